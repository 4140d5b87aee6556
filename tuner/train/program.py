"""A training step compiled into a Sunway program, and its run on the emulator.

``compile_training`` writes what ``swtune compile`` writes (host.c, slave.c, weights.bin, Makefile)
with the training driver (tuner.aot.training_program) as main, plus ``state.bin`` (the initial
parameters and optimizer state) and ``training.json`` (what the program carries, in order).
``run_emulated`` builds it with ``make emu`` and runs N steps.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tuner.aot.compiler import AotResult, compile_model
from tuner.aot.lookup import Lookup
from tuner.aot.timing import ModelTime
from tuner.aot.training_program import training_main
from tuner.codegen.emulator.build import launch
from tuner.codegen.emulator.cache import make_emulated
from tuner.errors import SwtuneError
from tuner.ir.training import Phase, TrainingStep
from tuner.targets import Target
from tuner.train.framework_style import library_calls


class TrainingRunError(SwtuneError):
    """The program did not build or did not finish (its message says why)."""


@dataclass(frozen=True)
class TrainingProgram:
    out_dir: Path
    step: TrainingStep
    result: AotResult

    @property
    def timing(self) -> ModelTime:
        assert self.result.timing is not None
        return self.result.timing


def compile_training(step: TrainingStep, target: Target | str, out_dir: str | Path, lookup: Lookup | None,
                     name: str = "model", dropout_seed: int = 0, framework_style: bool = False) -> TrainingProgram:
    """The program of ``step``; its dropout masks are drawn from ``dropout_seed``. ``framework_style``:
    the reference that runs one library call at a time (tuner.train.framework_style; build ``step``
    with its expression layers decomposed)."""
    out = Path(out_dir)
    result = compile_model(step.module, target, out, lookup, name=name,
                           driver=training_main(name, len(step.inputs), step.dropouts, dropout_seed),
                           framework_style=library_calls(step) if framework_style else None)
    np.concatenate([v.ravel() for _, v in step.carried] or [np.zeros(0)]).astype(step.dtype).tofile(out / "state.bin")
    (out / "training.json").write_text(json.dumps({
        "model": name, "dtype": step.dtype, "loss": step.loss.value,
        "optimizer": {"kind": step.optimizer.kind.value, "lr": step.optimizer.lr},
        "inputs": [{"name": n, "shape": list(s)} for n, s in step.inputs],
        "dropouts": [{"name": d.name, "p": d.p, "shape": list(d.shape)} for d in step.dropouts],
        "dropout_seed": dropout_seed,
        "carried": [{"name": n, "shape": list(v.shape)} for n, v in step.carried],
        "usage": "./model_emu weights.bin data.bin state.bin STEPS losses.bin final_state.bin "
                 "[checkpoint.bin EVERY]",
    }, indent=1))
    return TrainingProgram(out, step, result)


@dataclass(frozen=True)
class TrainingRun:
    losses: np.ndarray
    state: np.ndarray  # the carried state after the last step, flat
    step_seconds: float | None  # simulated-clock seconds per step the emulator counted (None: no step ran)
    resumed_from: int | None
    stdout: str


def build_emulated(out_dir: Path, mpi: bool = False) -> None:
    """``make emu`` (``make emu-mpi`` with ``mpi``: mpicc, the ranks' allreduce)."""
    target = "emu-mpi" if mpi else "emu"
    build = make_emulated(out_dir, target)
    if build.returncode != 0:
        raise TrainingRunError(f"make {target} failed in {out_dir}:\n{build.stderr[-3000:]}")


def run_emulated(out_dir: Path, data: Path, steps: int, dtype: str, *, checkpoint: Path | None = None,
                 every: int = 0, timeout: float = 3600.0, target: str = "sw26010", ranks: int = 0) -> TrainingRun:
    """Run the built program for ``steps`` steps over ``data`` (resuming from ``checkpoint`` when it
    exists and writing it every ``every`` steps); ``ranks`` > 0: ``mpirun -np ranks`` of the MPI build."""
    launcher = ["mpirun", "-np", str(ranks), "./model_emu_mpi"] if ranks else ["./model_emu"]
    args = [*launcher, "weights.bin", str(Path(data).resolve()), "state.bin", str(steps), "losses.bin",
            "final_state.bin"]
    if checkpoint is not None:
        args += [str(Path(checkpoint).resolve()), str(every)]
    run = launch(args, cwd=out_dir, wait_s=timeout, target=target, timeout=int(timeout))
    if run.returncode != 0:
        raise TrainingRunError(f"the training program failed (exit {run.returncode}): "
                               f"{(run.stderr or run.stdout)[-3000:].strip()}")
    values = dict(line.split("=", 1) for line in run.stdout.splitlines() if line.startswith("SWTUNE_STEP_SECONDS="))
    resumed = [int(line.split()[1]) for line in run.stdout.splitlines() if line.startswith("SWTUNE_RESUMED")]
    return TrainingRun(np.fromfile(out_dir / "losses.bin", dtype=dtype),
                       np.fromfile(out_dir / "final_state.bin", dtype=dtype),
                       float(values["SWTUNE_STEP_SECONDS"]) if values else None,
                       resumed[0] if resumed else None, run.stdout)


def split_state(flat: np.ndarray, step: TrainingStep) -> dict[str, np.ndarray]:
    """The carried state by name (parameters, then the optimizer's)."""
    out, at = {}, 0
    for name, v in step.carried:
        out[name] = flat[at:at + v.size].reshape(v.shape)
        at += v.size
    return out


def phase_seconds(timing: ModelTime, step: TrainingStep) -> dict[str, dict[str, float]]:
    """Simulated seconds of the forward, the backward and the update, in the tuned and the baseline
    program (a step the phase map does not name, e.g. a layout copy the reader added, counts with the
    forward when it precedes the first backward step, else with the phase before it)."""
    out = {p.value: {"tuned_s": 0.0, "baseline_s": 0.0} for p in Phase}
    phase = Phase.FORWARD
    for s in timing.steps:
        phase = step.phases.get(s.source, phase)
        out[phase.value]["tuned_s"] += s.tuned_s
        out[phase.value]["baseline_s"] += s.baseline_s
    return out


def tasks_by_phase(program: TrainingProgram) -> dict[str, int]:
    """Distinct tuning tasks (GEMM-like and expression kernels, CPE kernel tasks) the program runs, by
    the phase of their first step."""
    seen: dict[str, str] = {}
    for n in program.result.graph.nodes:
        if n.op == "kernel":
            key = n.attrs["kernel"].workload.key
        elif n.op == "cpe" and getattr(n.attrs["cpe"], "workload", None) is not None:
            key = n.attrs["cpe"].workload.key
        else:
            continue
        seen.setdefault(key, program.step.phases.get(n.source, Phase.BACKWARD).value)
    return {p.value: sum(1 for v in seen.values() if v == p.value) for p in Phase}
