"""NeoFlow's claim on Sunway: novel networks train faster as swtune's program than framework-style.

Usage: python benchmarks/novel_networks.py [--trials 8] [--steps 5] [--batch 8] [--networks NAME ...]

Every network of examples/novel/ (a model built on new operators written as expressions, each with a
torch twin) is trained two ways, simulated on SW26010 and run on the emulator:

* ``swtune``: the training step swtune compiles -- each new operator one expression operator with its
  derived gradient, epilogues fused into GEMMs, element-wise runs fused, kernels sharing spawns;
* ``framework``: the same step as a framework on a Sunway operator library runs it
  (tuner.aot.framework_style, ``swtune train --framework-style``) -- every new operator composed from
  its torch twin's primitives, one library call per primitive (a primitive's backward and the
  optimizer's update one call each), each its own spawn, nothing fused across calls.

Both programs' tasks are tuned in one submission to one tuning log, at the same ``--trials`` per task
(tuner.bridge.extract.trial_budget), so every GEMM-like kernel of the framework-style program runs at
the best schedule the log holds for it: a library as good as swtune's tuner.

Per network: each program's simulated step (``step_ms``), MPE share, kernel launches per step and
per-operator table (``by_operator``); the loss and parameter errors of each program against torch after
``--steps`` SGD steps (float32 on the emulator, against torch's float32 steps of the same model);
``speedup_vs_framework_style``. Summary: ``geomean_speedup_vs_framework_style`` (NeoFlow reports 3.16x
over PyTorch on GPUs) and the worst errors and MPE share. Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import copy
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import ROOT, emit

TARGET = "sw26010"
NETWORKS = ROOT / "examples" / "novel"
LR = 0.05


def _networks(names: list[str] | None) -> list[Path]:
    files = sorted(p for p in NETWORKS.glob("*.py") if not p.name.startswith("_"))
    return [p for p in files if names is None or p.stem in names]


def _steps(path: Path, batch: int) -> tuple[Any, Any, Any, Any]:
    """(torch module, the step swtune compiles, the framework-style step, the data) of one network."""
    from tuner.expr.workload import load_function
    from tuner.ir.expr_layer import decomposed
    from tuner.ir.optimizers import Optimizer, OptimizerKind
    from tuner.ir.training import Loss, target_shape, training_step
    from tuner.train import data as train_data

    module, inputs = load_function(f"{path}:model")(batch=batch)
    module = module.train()
    opt = Optimizer(OptimizerKind.SGD, LR)
    ours = training_step(copy.deepcopy(module), inputs, Loss.CROSS_ENTROPY, opt)
    with decomposed():
        framework = training_step(copy.deepcopy(module), inputs, Loss.CROSS_ENTROPY, opt)
    shape = target_shape(module, inputs, Loss.CROSS_ENTROPY)
    batches = train_data.synthetic(7, 3, batch, tuple(inputs[0].shape), shape, Loss.CROSS_ENTROPY)
    return module, ours, framework, batches


def _tune(name: str, ours: Any, framework: Any, url: str, trials: int) -> int:
    """Both programs' tasks, one submission, one log: the same trial cap per task."""
    import swtune
    from tuner.bridge.extract import extract_relax

    both = [*extract_relax(ours.module).layers, *extract_relax(framework.module, fused=False).layers]
    layers = list({layer.workload.key: layer for layer in both}.values())
    swtune.tune_layers(layers, url, name=f"{name}-novel", target=TARGET, trials=trials, timeout=7200.0)
    return len(layers)


def _program(module: Any, step: Any, batches: Any, lookup: Any, out: Path, steps: int, framework: bool
             ) -> dict[str, Any]:
    """One program's simulated figures and its errors against torch after ``steps`` steps."""
    from tuner.ir.training import Loss
    from tuner.train.program import build_emulated, compile_training, run_emulated, split_state
    from tuner.train.reference import relative_error, torch_steps

    program = compile_training(step, TARGET, out, lookup, out.name, framework_style=framework)
    batches.tofile(out / "data.bin", step.dtype)
    build_emulated(out)
    run = run_emulated(out, out / "data.bin", steps, step.dtype)
    ref = torch_steps(module, batches, step.optimizer, Loss.CROSS_ENTROPY, steps)
    state = split_state(run.state, step)
    timing = program.timing
    return {
        "step_ms": round(timing.tuned_s * 1e3, 4),
        "mpe_time_fraction": round(timing.mpe_fraction, 4),
        "kernels_per_step": timing.kernel_launches,
        "loss_max_rel_err": relative_error(run.losses, np.array(ref.losses)),
        "param_max_rel_err": max(relative_error(state[n], v) for n, v in ref.params.items()),
        "by_operator": [{"operator": o.relax_op, "where": o.where, "calls": o.calls,
                         "ms": round(o.seconds * 1e3, 4)} for o in timing.by_operator()],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=8, help="trials per task, the same for both programs")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--networks", nargs="*", default=None, help="file stems in examples/novel (default: all)")
    ap.add_argument("--log", default=None, help="an earlier run's tuning log (URL): compile with it, tune nothing")
    args = ap.parse_args()

    import swtune

    work = Path(tempfile.mkdtemp(prefix="swtune_novel_"))
    url = args.log or f"sqlite:///{work / 'log.db'}"
    networks: dict[str, Any] = {}
    for path in _networks(args.networks):
        start = time.monotonic()
        module, ours, framework, batches = _steps(path, args.batch)
        tasks = 0 if args.log or not args.trials else _tune(path.stem, ours, framework, url, args.trials)
        with swtune.open_log(url, TARGET) as lookup:
            figures = {form: _program(module, step, batches, lookup, work / f"{path.stem}_{form}", args.steps,
                                      form == "framework")
                       for form, step in (("swtune", ours), ("framework", framework))}
        mine, theirs = figures["swtune"], figures["framework"]
        networks[path.stem] = {
            "tasks_tuned": tasks, "seconds": round(time.monotonic() - start, 1),
            "speedup_vs_framework_style": round(theirs["step_ms"] / mine["step_ms"], 4),
            "kernels_per_step": {form: f["kernels_per_step"] for form, f in figures.items()},
            "loss_max_rel_err": max(f["loss_max_rel_err"] for f in figures.values()),
            "param_max_rel_err": max(f["param_max_rel_err"] for f in figures.values()),
            "mpe_time_fraction": mine["mpe_time_fraction"],
            "programs": figures,
        }
        print(path.stem, {k: v for k, v in networks[path.stem].items() if k != "programs"}, flush=True)
    speedups = [n["speedup_vs_framework_style"] for n in networks.values()]
    emit({
        "target": TARGET, "trials_per_task": args.trials, "steps": args.steps, "batch": args.batch,
        "tuning_log_reused": args.log is not None, "networks": networks,
        "geomean_speedup_vs_framework_style": round(math.exp(sum(map(math.log, speedups)) / len(speedups)), 4)
        if speedups else None,
        "loss_max_rel_err": max((n["loss_max_rel_err"] for n in networks.values()), default=None),
        "param_max_rel_err": max((n["param_max_rel_err"] for n in networks.values()), default=None),
        "mpe_time_fraction": max((n["mpe_time_fraction"] for n in networks.values()), default=None),
    })


if __name__ == "__main__":
    main()
