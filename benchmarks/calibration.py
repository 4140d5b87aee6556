"""Foundation acceptance figures: DMA model fit, DGEMM peak fraction, naive slowdown, analysis speed.

    python benchmarks/calibration.py [--samples N]

Last line: one JSON object with dma_max_rel_err, dgemm_peak_fraction, naive_slowdown,
analysis_configs_per_s (see issue 2).
"""

from __future__ import annotations

import argparse

import _common  # noqa: F401  (sets the import path)
import numpy as np
from _common import emit, median_seconds

from tuner.measure.calibration import load_points, relative_errors
from tuner.measure.simulator import simulate
from tuner.space import ScheduleSpace
from tuner.targets import get_target
from tuner.workloads import Dense


def best_by_search(space: ScheduleSpace, samples: int, seed: int = 0) -> tuple[np.ndarray, float]:
    """Exhaustive when the space is small, else a long random search refined by hill climbing."""
    rng = np.random.default_rng(seed)
    every = space.enumerate()
    if every is not None:
        times = simulate(space, every)
        return every[int(np.argmin(times))], float(times.min())
    pool = space.sample(samples, rng)
    times = simulate(space, pool)
    order = np.argsort(times)[:256]
    front, front_t = pool[order], times[order]
    for _ in range(60):  # local refinement of the best random configs
        moved = space.neighbours(np.repeat(front, 8, axis=0), rng, n_moves=1 + int(rng.integers(0, 2)))
        moved_t = simulate(space, moved)
        allc = np.concatenate([front, moved])
        allt = np.concatenate([front_t, moved_t])
        _, uniq = np.unique(allc, axis=0, return_index=True)
        allc, allt = allc[uniq], allt[uniq]
        keep = np.argsort(allt)[:256]
        front, front_t = allc[keep], allt[keep]
    return front[0], float(front_t[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=200_000, help="random configs before refinement")
    args = parser.parse_args()

    errors = {}
    for name in ("sw26010", "sw26010-pro"):
        target = get_target(name)
        errs = relative_errors(target.dma, load_points(name))
        errors[name] = float(np.max(errs))
        print(f"DMA model {name}: {len(errs)} points, max rel err {errors[name]:.3f}, median {np.median(errs):.3f}")

    target = get_target("sw26010")
    gemm = Dense(2048, 2048, 2048, "float64")
    space = ScheduleSpace(gemm, target)
    best, best_t = best_by_search(space, args.samples)
    peak = target.peak_flops("float64")
    fraction = gemm.flops / best_t / peak
    naive = space.encode(space.naive_config())
    naive_t = float(simulate(space, naive[None, :])[0])
    print(f"DGEMM 2048^3 fp64 on sw26010: best {best_t * 1e3:.2f} ms = {gemm.flops / best_t / 1e9:.1f} GFLOPS "
          f"({fraction:.3f} of {peak / 1e9:.1f} GFLOPS peak)")
    print(f"  best config: {space.decode(best)}")
    print(f"  naive config: {naive_t:.3f} s, {naive_t / best_t:.1f}x slower")

    rng = np.random.default_rng(1)
    many = rng.integers(0, space.sizes, size=(100_000, len(space.sizes)))
    seconds = median_seconds(lambda: space.analyze(many), repeats=3)
    print(f"analysis: 100000 configs in {seconds * 1e3:.1f} ms (median of 3)")
    emit({
        "dma_max_rel_err": round(max(errors.values()), 4),
        "dma_max_rel_err_per_target": {k: round(v, 4) for k, v in errors.items()},
        "dgemm_peak_fraction": round(fraction, 4),
        "dgemm_best_gflops": round(gemm.flops / best_t / 1e9, 1),
        "naive_slowdown": round(naive_t / best_t, 1),
        "analysis_configs_per_s": round(100_000 / seconds),
    })


if __name__ == "__main__":
    main()
