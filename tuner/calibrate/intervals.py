"""Predictions with the interval a fitted profile's parameter uncertainty gives.

A fit keeps its bootstrap draws (``profile.fit["draws"]``: parameter values refitted on resampled records).
A prediction made under each draw spreads as far as the records leave the parameters free; the interval is
the central ``level`` range of those predictions. A profile without draws (the built-in one, or a profile
stored without its fit) has no interval: the functions say so with None rather than a zero-width range.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from tuner.aot.timing import model_time
from tuner.ir.graph import Graph
from tuner.measure.base import Status
from tuner.measure.simulator import Simulator
from tuner.profile import Profile
from tuner.space.space import Config
from tuner.workloads import Workload

LEVEL = 0.95


def draw_profiles(profile: Profile) -> list[Profile]:
    """The profile once per bootstrap draw of its fit (empty when it has none)."""
    draws = profile.fit.get("draws") or []
    return [profile.with_values({k: float(v) for k, v in d.items()}, fit={}) for d in draws]


def interval(profile: Profile, predict: Callable[[Profile], float],
             level: float = LEVEL) -> tuple[float, float] | None:
    """The central ``level`` range of ``predict`` over the profile's draws, widened to hold its own value."""
    profiles = draw_profiles(profile)
    if not profiles:
        return None
    values = np.array([predict(p) for p in profiles] + [predict(profile)])
    lo, hi = np.quantile(values[:-1], [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(min(lo, values[-1])), float(max(hi, values[-1]))


def simulated_seconds(profile: Profile, workload: Workload, config: Config) -> float:
    """The simulator's noise-free time of one config under ``profile`` (inf for a config it cannot time)."""
    result = Simulator(noise=0.0, repeats=1, profile=profile).measure(workload, profile.target, [config])[0]
    return float(result.times[0]) if result.status is Status.OK else float("inf")


def simulated_interval(profile: Profile, workload: Workload, config: Config,
                       level: float = LEVEL) -> tuple[float, float] | None:
    """The interval of one config's simulated time that the profile's uncertainty gives."""
    return interval(profile, lambda p: simulated_seconds(p, workload, config), level)


def program_interval(profile: Profile, graph: Graph, configs: Mapping[str, Config | None],
                     level: float = LEVEL) -> tuple[float, float] | None:
    """The interval of a compiled program's simulated end-to-end time (tuner.aot.timing.model_time):
    every kernel step re-simulated under each draw with the config it runs (``configs`` by workload key;
    None: its baseline schedule). Steps whose time no profile parameter sets (MPE C, layout copies) are the
    same under every draw."""
    def seconds(p: Profile) -> float:
        return model_time(graph, p.apply(p.target), lambda w: configs.get(w.key)).tuned_s

    return interval(profile, seconds, level)
