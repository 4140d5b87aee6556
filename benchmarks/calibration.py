"""Simulator fidelity figures: DMA fit, FACTS strided figures, DGEMM and conv peak fractions, noise.

    python benchmarks/calibration.py [--samples N] [--noise X] [--bootstrap N] [--recovery-bootstrap N]

Last line: one JSON object with dma_max_rel_err (every calibration point, contiguous and strided),
strided_facts_max_rel_err (FACTS §2.1 strided figures), dgemm_peak_fraction (DGEMM 2048^3 float64,
one SW26010 core group), naive_slowdown, conv3x3_f64_peak_fraction and conv3x3_f64_breakdown (conv2d
n=32 c=128 h=w=18 k=128 3x3 float64), analysis_configs_per_s and noise_default (issues 2 and 11), all
under the built-in profile (version 0), and the calibration of issue 24:

- ``swdnn_replay``: swDNN's 172 measured shapes replayed with swDNN's schedule (tuner/calibrate/swdnn.py),
  the profile fitted to them, its 5-fold cross-validated errors (log of simulated / measured), and the
  fitted costs of swDNN's own code (``code_terms``: its register tiles' start-up, its DMA overlap), which
  the simulator does not take;
- ``profile``: every parameter of that calibrated profile with its value, interval (Bonferroni bootstrap,
  95% jointly; null when the data cannot move it), and source or "assumption"; ``profile_pins``: the FACTS
  figures under it (the best DGEMM at 0.80-0.95 of peak);
- ``calibrate_recovery``: synthetic hardware records from a hidden profile with noise, fitted back
  (tuner/calibrate/recovery.py);
- ``conv3x3_f64_peak_fraction_calibrated`` and ``swdnn_population_peak_fraction_calibrated``: the best config
  found under the calibrated profile (the conv above; swDNN's population, its 6-shape subset), with the
  interval the profile's draws give at that config. There is no target for these: they are what the
  calibrated model says. ``..._if_swdnn_code_costs``: the best configs a search finds if the generated
  kernels paid swDNN's code terms too (its tile start-up as ``block_overhead_cycles``, its overlap as
  ``dma_overlap``): the pessimistic reading, which breaks the DGEMM figure.

The searches select configs on noisy measurements (relative noise ``--noise`` between launches, default the
simulator's ``DEFAULT_NOISE``), re-measure their finalists, as a tuner would, and report the noise-free model
time of the config they pick.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

import _common  # noqa: F401  (sets the import path)
import numpy as np
from _common import emit, median_seconds
from swdnn_population import CHIP_PEAK, SUBSET, chip_flops, per_cg

from tuner.calibrate import pins
from tuner.calibrate.fit import Calibration, calibrate
from tuner.calibrate.intervals import interval
from tuner.calibrate.recovery import recover
from tuner.calibrate.swdnn import SwdnnReplay
from tuner.measure.calibration import load_points, relative_errors, strided_fact_errors
from tuner.measure.noise import DEFAULT_NOISE, measurement_factors
from tuner.measure.simulator import breakdown, simulate
from tuner.profile import Profile, default_profile
from tuner.space import ScheduleSpace
from tuner.space.factory import space_for
from tuner.targets import get_target
from tuner.workloads import Conv2d, Dense

FINALISTS = 256  # configs a search keeps, re-measured at its end
FINAL_LAUNCHES = 8  # launches of each finalist: a tuner re-measures its finalists before it trusts one


def best_by_search(space: ScheduleSpace, samples: int, seed: int = 0, noise: float = 0.0,
                   rounds: int = 60) -> tuple[np.ndarray, float]:
    """Exhaustive when the space is small, else a long random search refined by hill climbing.

    Configs are ranked on one noisy measurement each (relative ``noise``, one launch); the best
    ``FINALISTS`` are then launched ``FINAL_LAUNCHES`` more times and the lowest mean wins, as a tuner
    re-measures its finalists. Returns the pick and its noise-free time.
    """
    rng = np.random.default_rng(seed)
    noise_rng = np.random.default_rng(seed + 1)

    def measured(index: np.ndarray) -> np.ndarray:
        return simulate(space, index) * measurement_factors(noise_rng, noise, len(index))

    def final_pick(front: np.ndarray) -> tuple[np.ndarray, float]:
        means = np.mean([measured(front) for _ in range(FINAL_LAUNCHES)], axis=0)
        pick = front[int(np.argmin(means))]
        return pick, float(simulate(space, pick[None, :])[0])

    every = space.enumerate()
    if every is not None:
        return final_pick(every[np.argsort(measured(every))[:FINALISTS]])
    pool = space.sample(samples, rng)
    times = measured(pool)
    order = np.argsort(times)[:FINALISTS]
    front, front_t = pool[order], times[order]
    for _ in range(rounds):  # local refinement of the best random configs
        moved = space.neighbours(np.repeat(front, 8, axis=0), rng, n_moves=1 + int(rng.integers(0, 2)))
        moved_t = measured(moved)
        allc = np.concatenate([front, moved])
        allt = np.concatenate([front_t, moved_t])
        _, uniq = np.unique(allc, axis=0, return_index=True)
        allc, allt = allc[uniq], allt[uniq]
        keep = np.argsort(allt)[:FINALISTS]
        front, front_t = allc[keep], allt[keep]
    return final_pick(front)


def conv_figures(samples: int, noise: float) -> tuple[float, dict[str, object], dict]:
    """Best conv2d n=32 c=128 h=w=18 k=128 3x3 float64 on one SW26010 CG: peak fraction, breakdown."""
    target = get_target("sw26010")
    conv = Conv2d(32, 128, 18, 18, 128, 3, 3, dtype="float64")
    space = space_for(conv, target)
    best, best_t = best_by_search(space, samples, seed=2, noise=noise, rounds=120)
    config = space.decode(best)
    parts = breakdown(space, config)
    fraction = conv.flops / best_t / target.peak_flops("float64")
    shares = parts["share_of_total"]
    summary = {
        "compute_p0": round(shares["p0_compute"], 4),
        "p1_traffic": round(shares["p1_traffic"], 4),
        "loop_overhead": round(shares["loop_overhead"] + shares["tile_overhead"], 4),
        "exposed_dma": round(shares["exposed_dma"] + shares["dma_hidden_excess"], 4),
        "put": round(shares["put_c"], 4),
        "share": round(shares["share"], 4),
        "spawn_and_host": round(shares["spawn_join"] + shares["host_prepass"], 4),
        "pipe_bound": parts["pipe_bound"],
        "register_block": parts["register_block"],
        "acc_in_registers": parts["acc_in_registers"],
    }
    print(f"conv2d {conv.key} fp64 on sw26010: best {best_t * 1e3:.2f} ms = {conv.flops / best_t / 1e9:.1f} GFLOPS "
          f"({fraction:.3f} of peak)")
    print(f"  best config: {config}")
    print(f"  breakdown (share of time): {summary}")
    return fraction, summary, config


def replay_figures(bootstrap: int) -> tuple[Calibration, dict[str, object]]:
    """The profile fitted to swDNN's sweep, and the replay's figures before and after."""
    replay = SwdnnReplay()
    base = default_profile("sw26010")
    before = replay.predict(replay.with_profile_code_costs(base.values)) / replay.measured
    cal = calibrate(replay, base, bootstrap=bootstrap, folds=5)
    after = replay.predict(cal.values) / replay.measured
    print(f"swDNN replay ({cal.records} shapes): built-in profile simulated/measured {before.min():.2f}-"
          f"{before.max():.2f} (median {np.median(before):.2f}); calibrated {after.min():.2f}-{after.max():.2f}, "
          f"5-fold CV median |log err| {cal.cv_median_abs_log_err:.4f}, max {cal.cv_max_abs_log_err:.4f}")
    code = {name: {"value": float(f"{t['value']:.6g}"), "unit": t["unit"],
                   "interval": [float(f"{x:.6g}") for x in t["interval"]] if t["interval"] else None,
                   "source": t["source"]} for name, t in cal.code_terms.items()}
    for name, t in code.items():
        print(f"  swDNN's code: {name} = {t['value']:.4g} {t['unit']} {t['interval']}")
    return cal, {**cal.summary(), "shapes": cal.records, "code_terms": code,
                 "builtin_ratio_median": round(float(np.median(before)), 4),
                 "builtin_ratio_range": [round(float(before.min()), 4), round(float(before.max()), 4)],
                 "calibrated_ratio_range": [round(float(after.min()), 4), round(float(after.max()), 4)]}


def profile_figures(profile: Profile) -> dict[str, object]:
    out: dict[str, object] = {}
    for p in profile.parameters:
        out[p.name] = {"value": float(f"{p.value:.6g}"), "unit": p.spec.unit,
                       "interval": [float(f"{x:.6g}") for x in p.interval] if p.interval else None,
                       "source": p.spec.source}
        shown = f"[{p.interval[0]:.4g}, {p.interval[1]:.4g}]" if p.interval else "not fitted"
        print(f"  {p.name} = {p.value:.4g} {p.spec.unit} {shown} ({p.spec.source})")
    return out


def with_swdnn_code_costs(profile: Profile, code_terms: Mapping[str, Mapping[str, Any]]) -> Profile:
    """``profile`` as if the generated kernels paid swDNN's code terms (module docstring)."""
    return profile.with_values({"block_overhead_cycles": float(code_terms["swdnn_tile_overhead_cycles"]["value"]),
                                "dma_overlap": float(code_terms["swdnn_dma_overlap"]["value"])})


def best_fractions(profile: Profile, samples: int, noise: float, *, intervals: bool) -> dict[str, Any]:
    """The best conv and swDNN-population configs a search finds under ``profile``: their peak fractions,
    with the interval the profile's draws give at those configs when ``intervals``."""
    target = profile.apply("sw26010")
    conv = Conv2d(32, 128, 18, 18, 128, 3, 3, dtype="float64")
    space = space_for(conv, target)
    best, best_t = best_by_search(space, samples, seed=2, noise=noise, rounds=120)
    peak = target.peak_flops("float64")

    def conv_fraction(p: Profile) -> float:
        return conv.flops / float(simulate(space_for(conv, p.apply("sw26010")), best[None, :])[0]) / peak

    picks = []
    for i, (ro, b, ni, no) in enumerate(SUBSET):
        cg = per_cg(ro, b, ni, no, "rows")
        row, _ = best_by_search(space_for(cg, target), max(samples // 10, 2000), seed=i, noise=noise, rounds=40)
        picks.append((cg, row, chip_flops(ro, b, ni, no)))

    def population(p: Profile) -> float:
        tgt = p.apply("sw26010")
        seconds = sum(float(simulate(space_for(cg, tgt), row[None, :])[0]) for cg, row, _ in picks)
        return sum(f for _, _, f in picks) / seconds / CHIP_PEAK

    def shown(iv: tuple[float, float] | None) -> list[float] | None:
        return [round(x, 4) for x in iv] if iv else None

    return {"conv": round(conv.flops / best_t / peak, 4), "conv_config": space.decode(best),
            "conv_interval": shown(interval(profile, conv_fraction)) if intervals else None,
            "population": round(population(profile), 4),
            "population_interval": shown(interval(profile, population)) if intervals else None}


def calibrated_fractions(profile: Profile, pessimistic: Profile, samples: int, noise: float) -> dict[str, object]:
    """The conv and swDNN's population under the calibrated profile (with intervals) and under
    ``pessimistic`` (the generated kernels paying swDNN's code costs; searched afresh under it)."""
    cal = best_fractions(profile, samples, noise, intervals=True)
    pess = best_fractions(pessimistic, samples, noise, intervals=False)
    dgemm_pess = pins.dgemm_peak_fraction(pessimistic.apply("sw26010"))
    print(f"calibrated profile: conv3x3 f64 best {cal['conv']} of peak {cal['conv_interval']}; swDNN population "
          f"subset ({len(SUBSET)} shapes) {cal['population']} of 3.06 TF {cal['population_interval']}")
    print(f"  if the generated kernels paid swDNN's code costs: conv3x3 {pess['conv']}, population "
          f"{pess['population']}, best DGEMM {dgemm_pess:.3f}")
    return {"conv3x3_f64_peak_fraction_calibrated": cal["conv"],
            "conv3x3_f64_peak_fraction_calibrated_interval": cal["conv_interval"],
            "conv3x3_f64_calibrated_config": cal["conv_config"],
            "swdnn_population_peak_fraction_calibrated": cal["population"],
            "swdnn_population_peak_fraction_calibrated_interval": cal["population_interval"],
            "conv3x3_f64_peak_fraction_if_swdnn_code_costs": pess["conv"],
            "swdnn_population_peak_fraction_if_swdnn_code_costs": pess["population"],
            "dgemm_peak_fraction_if_swdnn_code_costs": round(dgemm_pess, 4),
            "swdnn_population_shapes": len(SUBSET)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=200_000, help="random configs before refinement")
    parser.add_argument("--noise", type=float, default=DEFAULT_NOISE, help="relative measurement noise")
    parser.add_argument("--bootstrap", type=int, default=200, help="bootstrap refits of the swDNN replay fit")
    parser.add_argument("--recovery-bootstrap", type=int, default=100, help="bootstrap refits of the recovery")
    args = parser.parse_args()

    errors = {}
    for name in ("sw26010", "sw26010-pro"):
        target = get_target(name)
        errs = relative_errors(target.dma, load_points(name))
        errors[name] = float(np.max(errs))
        print(f"DMA model {name}: {len(errs)} points, max rel err {errors[name]:.3f}, median {np.median(errs):.3f}")
    strided = strided_fact_errors(get_target("sw26010").dma)
    for what, err in strided.items():
        print(f"FACTS 2.1 {what}: rel err {err:.3f}")

    target = get_target("sw26010")
    gemm = Dense(2048, 2048, 2048, "float64")
    space = space_for(gemm, target)
    best, best_t = best_by_search(space, args.samples, noise=args.noise)
    peak = target.peak_flops("float64")
    fraction = gemm.flops / best_t / peak
    naive = space.encode(space.naive_config())
    naive_t = float(simulate(space, naive[None, :])[0])
    print(f"DGEMM 2048^3 fp64 on sw26010: best {best_t * 1e3:.2f} ms = {gemm.flops / best_t / 1e9:.1f} GFLOPS "
          f"({fraction:.3f} of {peak / 1e9:.1f} GFLOPS peak)")
    print(f"  best config: {space.decode(best)}")
    print(f"  naive config: {naive_t:.3f} s, {naive_t / best_t:.1f}x slower")
    dgemm_parts = breakdown(space, space.decode(best))
    print(f"  breakdown: {({k: round(v, 3) for k, v in dgemm_parts['share_of_total'].items()})}, "
          f"{dgemm_parts['pipe_bound']}-bound, accumulators in registers: {dgemm_parts['acc_in_registers']}")
    conv_fraction, conv_breakdown, _ = conv_figures(args.samples, args.noise)

    rng = np.random.default_rng(1)
    many = rng.integers(0, space.sizes, size=(100_000, len(space.sizes)))
    seconds = median_seconds(lambda: space.analyze(many), repeats=3)
    print(f"analysis: 100000 configs in {seconds * 1e3:.1f} ms (median of 3)")

    cal, replay = replay_figures(args.bootstrap)
    profile = profile_figures(cal.profile)
    rec = recover(bootstrap=args.recovery_bootstrap)
    print(f"recovery of a hidden profile: all covered {rec.all_covered}, held-out max rel err "
          f"{rec.heldout_max_rel_err:.4f} ({rec.heldout} records)")
    calibrated = calibrated_fractions(cal.profile, with_swdnn_code_costs(cal.profile, cal.code_terms),
                                      args.samples, args.noise)
    emit({
        "dma_max_rel_err": round(max(errors.values()), 4),
        "dma_max_rel_err_per_target": {k: round(v, 4) for k, v in errors.items()},
        "dgemm_peak_fraction": round(fraction, 4),
        "dgemm_best_gflops": round(gemm.flops / best_t / 1e9, 1),
        "naive_slowdown": round(naive_t / best_t, 1),
        "analysis_configs_per_s": round(100_000 / seconds),
        "strided_facts_max_rel_err": round(max(strided.values()), 4),
        "conv3x3_f64_peak_fraction": round(conv_fraction, 4),
        "conv3x3_f64_breakdown": conv_breakdown,
        "noise_default": args.noise,
        "dgemm_acc_in_registers": dgemm_parts["acc_in_registers"],
        # where the best DGEMM's time goes (shares; the DMA lane hides behind compute up to
        # dma_hidden_excess, the part of the gets and puts that compute does not cover)
        "dgemm_breakdown": {k: round(v, 4) for k, v in dgemm_parts["share_of_total"].items()},
        "dgemm_best_config": space.decode(best),
        "swdnn_replay": replay,
        "profile": profile,
        "profile_pins": cal.profile.fit["pins"],
        "calibrate_recovery": rec.summary(),
        **calibrated,
    })


if __name__ == "__main__":
    main()
