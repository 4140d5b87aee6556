"""A compiled training step run on the emulator beside the same steps in torch (the training tests' one
runner): write the batches, ``make emu``, run, step torch's copy of the model, and split the program's
carried state by name."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tuner.ir.optimizers import Optimizer, OptimizerKind
from tuner.ir.training import Loss, TrainingStep, target_shape, training_step
from tuner.train import data as train_data
from tuner.train.program import TrainingRun, build_emulated, run_emulated, split_state
from tuner.train.reference import Reference, relative_error, torch_steps


@dataclass(frozen=True)
class Compared:
    run: TrainingRun  # the emulated program's losses and flat state
    ref: Reference  # torch's steps
    state: dict[str, np.ndarray]  # the program's carried state by name

    @property
    def loss_err(self) -> float:
        return relative_error(self.run.losses, np.array(self.ref.losses))

    @property
    def param_err(self) -> float:
        """The worst parameter's relative error."""
        return max(relative_error(self.state[n], v) for n, v in self.ref.params.items())


def emulate_beside_torch(step: Any, reference: Any, batches: Any, opt: Optimizer, out: Path, steps: int,
                         loss: Loss = Loss.CROSS_ENTROPY) -> Compared:
    """``steps`` steps of the program compiled in ``out`` on the emulator, and of ``reference`` (an
    untouched copy of the model) in torch, over ``batches``."""
    batches.tofile(out / "data.bin", step.dtype)
    build_emulated(out)
    run = run_emulated(out, out / "data.bin", steps, step.dtype)
    return Compared(run, torch_steps(reference, batches, opt, loss, steps), split_state(run.state, step))


def sgd_step(module: Any, x: Any, lr: float = 0.05) -> tuple[TrainingStep, Any, Optimizer]:
    """``module``'s training step on input ``x`` (cross-entropy, SGD at ``lr``), an untouched copy of the
    model for torch to step beside it, and the optimizer."""
    reference = copy.deepcopy(module)
    opt = Optimizer(OptimizerKind.SGD, lr)
    return training_step(module, (x,), Loss.CROSS_ENTROPY, opt), reference, opt


def assert_two_steps_match_torch(step: TrainingStep, module: Any, reference: Any, x: Any, opt: Optimizer,
                                 out: Path) -> None:
    """Two steps of the program compiled in ``out``, over synthetic batches of two inputs shaped like
    ``x``, match torch's on ``reference`` to 1e-4 (loss and every parameter)."""
    shape = target_shape(module, (x,), Loss.CROSS_ENTROPY)
    batches = train_data.synthetic(4, 2, 2, tuple(x.shape), shape, Loss.CROSS_ENTROPY)
    compared = emulate_beside_torch(step, reference, batches, opt, out, 2)
    assert compared.loss_err <= 1e-4 and compared.param_err <= 1e-4
