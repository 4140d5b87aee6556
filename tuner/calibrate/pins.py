"""FACTS figures a calibrated profile must keep: constraints of every fit, checked on every profile.

A fitted profile is a statement about one core group; published figures the simulator already reproduces
(FACTS.md) are not up for refitting. The DMA tables are pinned by construction (no profile parameter
touches tuner/dma_model.py). What a profile can break is the DGEMM figure: FACTS §4 quotes 88.7% of one
core group's peak (Lin et al., ICPP 2017) and up to 95% (Jiang et al., ICPP 2017); the simulator's best
DGEMM 2048^3 float64 must stay within 0.80-0.95 of peak (tests/tuner_tests/test_simulator.py pins the
built-in profile the same way).

The best DGEMM is taken over a fixed sub-space (double-buffered, accumulators in registers, every tile
size, both sharing schemes, every loop order, unroll and packing: 2304 configs) so a fit can evaluate it
in a few milliseconds for each trial profile.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from tuner.measure.simulator import simulate
from tuner.profile import Profile
from tuner.space.space import ScheduleSpace
from tuner.targets import Target, get_target
from tuner.workloads import Dense

DGEMM = Dense(2048, 2048, 2048, "float64")
DGEMM_BAND = (0.80, 0.95)
DGEMM_SOURCE = "FACTS §4: DGEMM 88.7% of one CG (Lin et al., ICPP 2017), up to 95% (Jiang et al., ICPP 2017)"


@lru_cache(maxsize=4)
def _dgemm_rows(target_name: str) -> np.ndarray:
    space = ScheduleSpace(DGEMM, get_target(target_name))  # DGEMM is a built-in GEMM-like workload
    tiles = (16, 32, 64, 128)
    return np.stack([space.encode(dict(
        tile_m=m, tile_n=n, tile_k=k, grid="8x8", share=sh, dma="rows", put_lines=1, db_a=1, db_b=1, db_c=dc,
        tile_order="col", inner=inner, simd=4, unroll=u, acc="reg", pack=pk))
        for m, n, k, sh, dc, inner, u, pk in itertools.product(
            tiles, tiles, tiles, ("bcast", "mesh"), (0, 1), ("m", "n", "k"), (4, 8, 16), ("none", "b"))])


def dgemm_peak_fraction(target: Target) -> float:
    """The best DGEMM 2048^3 float64 of the sub-space (module docstring) as a fraction of one CG's peak."""
    space = ScheduleSpace(DGEMM, target)
    rows = _dgemm_rows(target.name)
    seconds = simulate(space, rows)
    return float(DGEMM.flops / np.min(seconds) / target.peak_flops("float64"))


@dataclass(frozen=True)
class DgemmPin:
    """The DGEMM figure as a fit constraint: zero inside the band, the log distance to it outside."""

    profile: Profile  # the target and the values of parameters not in a trial's values
    weight: float = 10.0  # one pin outweighs many records: it is a fact, not a noisy sample

    def fraction(self, values: Mapping[str, float]) -> float:
        return dgemm_peak_fraction(self.profile.with_values(values, fit={}).apply(self.profile.target))

    def residual(self, values: Mapping[str, float]) -> float:
        f = self.fraction(values)
        lo, hi = DGEMM_BAND
        return self.weight * (math.log(lo / f) if f < lo else math.log(f / hi) if f > hi else 0.0)

    def holds(self, profile: Profile) -> bool:
        lo, hi = DGEMM_BAND
        return lo <= self.fraction(profile.values) <= hi


def check(profile: Profile) -> dict[str, dict[str, Any]]:
    """Every pinned figure under ``profile``: value, band, whether it holds (empty for a target FACTS has no
    compute figure for)."""
    if get_target(profile.target).name != "sw26010":
        return {}
    fraction = dgemm_peak_fraction(profile.apply(profile.target))
    lo, hi = DGEMM_BAND
    return {"dgemm_peak_fraction": {"value": round(fraction, 4), "band": [lo, hi], "holds": lo <= fraction <= hi,
                                    "source": DGEMM_SOURCE}}


def broken(profile: Profile) -> list[str]:
    """The pinned figures ``profile`` breaks, each as one line (the profile's fit metadata when it has a check)."""
    pins = profile.fit.get("pins")
    checked: Mapping[str, Any] = pins if isinstance(pins, Mapping) else check(profile)
    return [f"{name} {entry['value']} outside {entry['band']} ({entry['source']})"
            for name, entry in checked.items() if not entry["holds"]]
