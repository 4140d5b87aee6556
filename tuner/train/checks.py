"""What a compiled training program is put through besides plain runs: a crash in the middle (SIGKILL
once a given step is reported) and data parallelism (R ranks against one process on the same global
batch). The tests and benchmarks/training.py run them."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from tuner.ir.optimizers import Optimizer
from tuner.ir.training import Loss, training_step
from tuner.train.data import Batches
from tuner.train.program import TrainingRun, build_emulated, compile_training, run_emulated


def run_killed(out_dir: Path, data: Path, steps: int, checkpoint: Path, every: int, kill_after: int) -> int:
    """Start the built program (checkpointing every ``every`` steps) and SIGKILL it as soon as it
    reports step ``kill_after``; returns its exit status (``-SIGKILL`` when the kill landed)."""
    args = ["./model_emu", "weights.bin", str(Path(data).resolve()), "state.bin", str(steps), "losses.bin",
            "final_state.bin", str(Path(checkpoint).resolve()), str(every)]
    proc = subprocess.Popen(args, cwd=out_dir, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(f"SWTUNE_LOSS {kill_after} "):
            os.kill(proc.pid, signal.SIGKILL)
            break
    return proc.wait()


def ranks_against_one(module: Any, inputs: tuple[Any, ...], optimizer: Optimizer, loss: Loss, batches: Batches,
                      ranks: int, work: Path, steps: int, name: str = "model") -> tuple[TrainingRun, TrainingRun]:
    """(one process on the whole batch, ``ranks`` MPI ranks on a slice each) after ``steps`` steps."""
    whole = training_step(module, inputs, loss, optimizer)
    local = tuple(x[:x.shape[0] // ranks] for x in inputs)
    sliced = training_step(module, local, loss, optimizer, data_parallel=True)
    one, many = work / "one_rank", work / f"{ranks}_ranks"
    compile_training(whole, "sw26010", one, lambda w: None, name)
    compile_training(sliced, "sw26010", many, lambda w: None, name)
    for out, step in ((one, whole), (many, sliced)):
        batches.tofile(out / "data.bin", step.dtype)
    build_emulated(one)
    build_emulated(many, mpi=True)
    return (run_emulated(one, one / "data.bin", steps, whole.dtype),
            run_emulated(many, many / "data.bin", steps, sliced.dtype, ranks=ranks))
