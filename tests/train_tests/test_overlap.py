"""Training overlapped with tuning: the program switches at a checkpoint when the tuning log improves,
and no step is lost or run twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")


@pytest.mark.slow
def test_a_better_tuning_log_switches_the_program_at_a_checkpoint_without_losing_a_step(tmp_path: Path) -> None:
    from tuner.bridge.extract import extract_relax
    from tuner.ir.optimizers import Optimizer, OptimizerKind
    from tuner.ir.training import Loss, target_shape, training_step
    from tuner.models.trainable import build_trainable
    from tuner.train import data as train_data
    from tuner.train.overlap import plot, train_overlapped
    from tuner.train.program import build_emulated, compile_training, run_emulated
    from tuner.tune import tune_workloads
    from tuner.workloads import Conv2d, Dense

    # the cnn: tuning its convolutions makes the step several times faster (the mlp's step is spawn-bound:
    # its tuned GEMMs do not make it 5% faster)
    module, inputs = build_trainable("cnn", 8)
    step = training_step(module, inputs, Loss.CROSS_ENTROPY, Optimizer(OptimizerKind.MOMENTUM, 0.05))
    batches = train_data.synthetic(5, 3, 8, tuple(inputs[0].shape), target_shape(module, inputs, Loss.CROSS_ENTROPY),
                                   Loss.CROSS_ENTROPY)
    data = tmp_path / "data.bin"
    batches.tofile(data, step.dtype)
    # what a tuning service would have found meanwhile: the step's GEMM-like tasks, a few trials each
    gemm = [l.workload for l in extract_relax(step.module).layers if isinstance(l.workload, (Conv2d, Dense))]
    tuned = {r.workload.key: r.best_config for r in tune_workloads(gemm, "sw26010", trials=4, seed=0)}
    log: dict[str, Any] = {}  # the tuning log as the runner sees it: empty until the first checkpoint

    def first_chunk_done(chunk: Any) -> None:
        log.update(tuned)

    run = train_overlapped(step, "sw26010", tmp_path / "overlap", data, 8, 2,
                           lambda: (lambda w: log.get(w.key)), name="cnn", on_chunk=first_chunk_done,
                           wait_for_build_s=600)
    assert run.switches >= 1 and run.versions[1] < run.versions[0]
    assert [c.version for c in run.chunks][:2] == [0, 0] and run.chunks[-1].version == 1
    assert run.steps_run() == list(range(8)) and run.steps_lost(8) == 0 and run.steps_repeated() == 0
    # the same training as a plain run of the untuned program, to the rounding of the tuned kernels
    plain = tmp_path / "plain"
    compile_training(step, "sw26010", plain, lambda w: None, "cnn")
    build_emulated(plain)
    whole = run_emulated(plain, data, 8, step.dtype)
    assert run.losses is not None and run.state is not None
    assert float(np.abs(run.losses - whole.losses).max() / np.abs(whole.losses).max()) <= 1e-4
    assert float(np.abs(run.state - whole.state).max() / np.abs(whole.state).max()) <= 1e-4
    png = tmp_path / "overlap.png"
    plot(run, png, "cnn")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
