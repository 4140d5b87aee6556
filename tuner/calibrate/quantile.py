"""Ranking configs by a quantile of their simulated time under a fitted profile's uncertainty.

A search normally ranks configs by their measured time: under a calibrated profile, the simulator's
point estimate plus noise. A fitted profile also says how unsure each parameter is (its bootstrap draws,
``profile.fit["draws"]``), and that uncertainty is not the same for every config: a config whose time
is mostly DMA waits moves with ``dma_wait_cycles``, one that is mostly FMA issue barely moves. A
cautious user can ask the search to prefer configs that are fast even in the pessimistic case: rank by
the ``q``-quantile of the config's time over the draws (q = 0.5 is the median; 0.9 a pessimistic
ranking).

How: each measured time is multiplied by the config's factor ``quantile_q(draw times) / point time``,
so noise and repeats stay as measured and only the ranking the search sees changes. The factors are
noise-free model times; a config the model cannot time keeps its result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from tuner.calibrate.intervals import draw_profiles
from tuner.errors import SwtuneError
from tuner.measure.base import MeasureResult, Source, Status
from tuner.profile import Profile
from tuner.space.factory import space_for
from tuner.space.space import Config
from tuner.task_kind import kind_of
from tuner.workloads import Workload


class QuantileError(SwtuneError, ValueError):
    """A quantile ranking that cannot be made: no draws to take a quantile over, or q outside (0, 1)."""


@dataclass
class QuantileRanking:
    """Scales measured times to the ``q``-quantile of each config's time over ``profile``'s draws."""

    profile: Profile
    q: float
    _draws: list[Profile] = field(init=False, repr=False)
    _spaces: dict[tuple[int, str], object] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 < self.q < 1.0:
            raise QuantileError(f"the ranking quantile must lie strictly between 0 and 1, got {self.q}")
        self._draws = draw_profiles(self.profile)
        if not self._draws:
            raise QuantileError(f"profile version {self.profile.version} of {self.profile.target} has no fit "
                                "draws: a quantile ranking needs a profile fitted by `swtune calibrate`")

    def _model_seconds(self, i: int, profile: Profile, workload: Workload, configs: Sequence[Config]) -> np.ndarray:
        key = (i, workload.key)
        if key not in self._spaces:  # one space per (draw, workload): the analysis reads the draw's Target
            self._spaces[key] = space_for(workload, profile.apply(profile.target))
        ones = np.ones(1)
        results = kind_of(workload).simulate(self._spaces[key], configs, lambda _c: ones, Source.SIMULATOR)
        return np.array([r.times[0] if r.status is Status.OK else np.nan for r in results])

    def factors(self, workload: Workload, configs: Sequence[Config]) -> np.ndarray:
        """Per config: its q-quantile time over the draws divided by its time under the profile itself."""
        point = self._model_seconds(-1, self.profile, workload, configs)
        draws = np.stack([self._model_seconds(i, p, workload, configs) for i, p in enumerate(self._draws)])
        with np.errstate(invalid="ignore"):
            return np.quantile(draws, self.q, axis=0) / point

    def rank(self, workload: Workload, results: Sequence[MeasureResult]) -> list[MeasureResult]:
        """``results`` with each successful time scaled by its config's factor (details say so)."""
        factors = self.factors(workload, [r.config for r in results])
        ranked = []
        for r, f in zip(results, factors, strict=True):
            if r.status is not Status.OK or not np.isfinite(f) or f <= 0:
                ranked.append(r)
                continue
            ranked.append(replace(r, times=tuple(t * float(f) for t in r.times),
                                  details={**r.details, "rank_quantile": self.q, "quantile_factor": float(f)}))
        return ranked
