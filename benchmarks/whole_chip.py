"""The whole chip: each zoo model's simulated program on one core group and on all of them.

Usage: python benchmarks/whole_chip.py [--trials 32] [--models resnet50,vit_tiny,...] [--targets sw26010,...]

Per model and preset (sw26010: 4 CGs, sw26010-pro: 6), the model's tasks are tuned in-process on the
simulator twice with the same trials per task: on one CG (the preset) and on the chip (``<preset>-<N>cg``,
where each kernel's split over 1 to N CGs is a knob of its schedule, tuner/space/chip.py); the chip's
search starts from the one-CG records (tuner.space.chip.chip_seeds: each record, and its tiles split over
all CGs each way), measured within its trials. Memory-bound CPE kernels spread their blocks over the
chip's CPEs (tuner/space/cpe/schedule.py ``active`` above 64). Each program
is lowered as ``swtune compile`` would build it (tuner.aot.compiler.lower_model) and timed whole: kernels,
memory-bound CPE kernels, MPE steps, launches. Reported per model
and preset: ``speedup_vs_1cg`` (the one-CG program's time over the chip program's), the chip program's
``mpe_time_fraction``, ``cross_cg_bytes`` per inference (cross reads, replicas, partial sums) and the
OpenACC-like baseline speedup, whose baseline splits its outer loop over the same CGs.

``assumptions``: every cross-CG cost of the profile is an assumption with bounds (tuner/profile.py);
ResNet-50's chip program (its configs as tuned at the preset's values) is re-timed at each end of each
bound. ``emulated`` stays empty: a split kernel is generated and emulated alone
(tests/codegen_tests/test_chip_codegen.py), but a whole model is not compiled for several CGs yet
(``swtune compile`` refuses such a target), so no chip program runs on the emulator.

Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import numpy as np
from _common import emit

# (zoo model, batch, width, image): full width at batch 1, simulated only
MODELS: dict[str, tuple[str, int, float, int]] = {
    "resnet50": ("resnet50", 1, 1.0, 224),
    "vit_tiny": ("vit_tiny", 1, 1.0, 224),
    "bert_layer": ("bert_layer", 1, 1.0, 0),
    "mobilenet_v2": ("mobilenet_v2", 1, 1.0, 224),
    "unet": ("unet", 1, 1.0, 128),
    "gpt2_block": ("gpt2_block", 1, 1.0, 0),
    "convnext": ("convnext", 1, 1.0, 224),
    "vgg19": ("vgg19", 1, 1.0, 224),
}
TARGETS = ("sw26010", "sw26010-pro")


def _relax(name: str) -> Any:
    from tuner.bridge.extract import torch_to_relax
    from tuner.models.torch_models import build

    zoo, batch, width, image = MODELS[name]
    module, inputs = build(zoo, batch=batch, width=width, image=image or 224)
    return torch_to_relax(module, inputs)


def _tune(mod: Any, target: Any, trials: int, seeds: dict[str, dict[str, Any]] | None = None
          ) -> dict[str, dict[str, Any]]:
    """Best config per workload key; ``seeds``: the one-CG records that start the chip's search."""
    from tuner.bridge.extract import extract_relax
    from tuner.space.chip import chip_seeds
    from tuner.tune import tune_workloads

    layers = extract_relax(mod, target=target).layers
    seed_configs = None
    if seeds is not None:
        seed_configs = [chip_seeds(seeds[l.workload.key], target.cgs) if l.workload.key in seeds else []
                        for l in layers]
    results = tune_workloads([l.workload for l in layers], target, trials=trials, batch=8,
                             weights=[float(l.weight) for l in layers], seed_configs=seed_configs)
    return {l.workload.key: r.best_config for l, r in zip(layers, results) if r.best_config is not None}


def _program(mod: Any, target: Any, configs: dict[str, dict[str, Any]]) -> Any:
    from tuner.aot.compiler import lower_model

    return lower_model(mod, target, lambda w: configs.get(w.key))


def _cross_bytes(program: Any) -> float:
    """Bytes moved between core groups by one run of the program's kernels."""
    from tuner.space.factory import space_for

    total = 0.0
    for k in program.kernels:
        space = space_for(k.workload, program.target)
        total += k.calls * float(space.analyze(space.encode(k.config)[None, :]).cross_cg_bytes[0])
    return total


def _splits(program: Any) -> dict[str, int]:
    """How many of the program's kernels run on how many CGs (and split what)."""
    out: dict[str, int] = {}
    for k in program.kernels:
        key = f"{k.config.get('cgs', 1)}:{k.config.get('cg_split', 'rows')}" if k.config.get("cgs", 1) > 1 else "1"
        out[key] = out.get(key, 0) + k.calls
    return dict(sorted(out.items()))


def _assumptions(mod: Any, chip: Any, configs: dict[str, dict[str, Any]], one_ms: float) -> dict[str, Any]:
    from tuner.profile import CHIP_PARAMETERS, SPEC_BY_NAME, default_profile

    base = default_profile(chip.base_name)
    out: dict[str, Any] = {}
    for name in CHIP_PARAMETERS:
        spec = SPEC_BY_NAME[name]
        ends = {}
        for label, value in (("low", spec.low), ("high", spec.high)):
            target = base.with_values({name: value}).apply(chip.name)
            ms = _program(mod, target, configs).timing().summary()["tuned_ms"]
            ends[label] = {"value": value, "speedup_vs_1cg": round(one_ms / ms, 3)}
        out[name] = {"preset": getattr(chip, name), "unit": spec.unit, "source": spec.source, **ends}
    return out


def run(name: str, preset: str, trials: int) -> tuple[dict[str, Any], Any, Any, dict[str, Any], float]:
    from tuner.targets import get_target, with_cgs

    mod = _relax(name)
    one = get_target(preset)
    chip = with_cgs(one, one.cgs_per_chip)
    t0 = time.perf_counter()
    one_configs = _tune(mod, one, trials)
    chip_configs = _tune(mod, chip, trials, seeds=one_configs)
    one_t = _program(mod, one, one_configs).timing().summary()
    chip_program = _program(mod, chip, chip_configs)
    chip_t = chip_program.timing().summary()
    row = {"cgs": chip.cgs, "one_cg_ms": round(one_t["tuned_ms"], 4), "chip_ms": round(chip_t["tuned_ms"], 4),
           "speedup_vs_1cg": round(one_t["tuned_ms"] / chip_t["tuned_ms"], 3),
           "mpe_time_fraction": round(chip_t["mpe_time_fraction"], 4),
           "mpe_time_fraction_1cg": round(one_t["mpe_time_fraction"], 4),
           "cross_cg_bytes": int(_cross_bytes(chip_program)),
           "speedup_vs_baseline": round(chip_t["speedup_vs_baseline"], 3),
           "speedup_vs_baseline_1cg": round(one_t["speedup_vs_baseline"], 3),
           "kernels_by_split": _splits(chip_program), "seconds": round(time.perf_counter() - t0, 1)}
    print(f"{name:14s} {preset:12s} 1 CG {row['one_cg_ms']:9.3f} ms  {chip.cgs} CGs {row['chip_ms']:9.3f} ms  "
          f"{row['speedup_vs_1cg']:5.2f}x  MPE {row['mpe_time_fraction']:6.1%}  cross "
          f"{row['cross_cg_bytes'] / 1e6:7.2f} MB  splits {row['kernels_by_split']}  ({row['seconds']:.0f} s)",
          flush=True)
    return row, mod, chip, chip_configs, one_t["tuned_ms"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=32, help="trials per task, the same for 1 CG and N")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--targets", default=",".join(TARGETS))
    args = parser.parse_args()
    names = [m for m in args.models.split(",") if m]
    unknown = set(names) - set(MODELS)
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}; expected some of {list(MODELS)}")
    models: dict[str, dict[str, Any]] = {}
    assumptions: dict[str, Any] = {}
    for name in names:
        for preset in args.targets.split(","):
            row, mod, chip, configs, one_ms = run(name, preset, args.trials)
            models.setdefault(name, {})[preset] = row
            if name == "resnet50":
                assumptions[preset] = _assumptions(mod, chip, configs, one_ms)
    geomean = {p: round(math.exp(float(np.mean([math.log(m[p]["speedup_vs_1cg"]) for m in models.values()
                                                if p in m]))), 3)
               for p in args.targets.split(",")}
    emit({"models": models, "trials_per_task": args.trials, "geomean_speedup_vs_1cg": geomean,
          "max_mpe_time_fraction": max(r["mpe_time_fraction"] for m in models.values() for r in m.values()),
          "assumptions": assumptions,
          "emulated": {"models": [], "why": "a whole model is not compiled for several core groups yet (one split "
                                           "kernel is): swtune compile refuses such a target"}})


if __name__ == "__main__":
    main()
