"""A compiled training step run on the emulator beside the same steps in torch (the training tests' one
runner): write the batches, ``make emu``, run, step torch's copy of the model, and split the program's
carried state by name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tuner.ir.optimizers import Optimizer
from tuner.ir.training import Loss
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
