"""Transfer: a base cost model trained on what other workloads of the same target measured.

The features are op-agnostic (tuner/search/features.py), so the measurements of other workloads,
other operators included, rank a new workload's configs before it has measured any of its own. The
new task's model boosts on top of the base's predictions, whose weight fades as its own data grows
(cost_model/xgb.py ``base_prior``), and skips the random warm-up (tuner/search/model_guided.py). Each
workload is its own ranking group: only the order of configs within one workload is learned, never
how fast one workload is against another.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from cost_model import XGBoostCostModel
from tuner.errors import InvalidConfigError
from tuner.search.features import features
from tuner.space.space import Config, ScheduleSpace

MIN_ROWS = 32  # fewer measurements than this teach the base nothing worth a skipped warm-up


@dataclass(frozen=True)
class History:
    """What one workload measured: its space, the index rows of the configs and their seconds."""

    space: ScheduleSpace
    index: np.ndarray
    seconds: np.ndarray
    rows: np.ndarray | None = None  # the index rows' features, where the caller has them already

    def feature_rows(self) -> np.ndarray:
        return self.rows if self.rows is not None else features(self.space, np.asarray(self.index, dtype=np.int64))


class MeasuredRows:
    """Other workloads' measured configs as index and feature rows, each computed once.

    A tuning driver builds a base model for every new task from the newest measurements of the
    target's other workloads: without this, the hundred tasks of a model would encode and featurise
    each of those measurements once per task. Features depend on the workload, the target and the
    config only (not on the simulator profile), so a row stays valid; past ``max_rows`` the memo starts
    over, which bounds a long-running driver's memory.
    """

    def __init__(self, max_rows: int = 100_000) -> None:
        self.max_rows = max_rows
        self._rows: dict[Hashable, dict[str, tuple[np.ndarray, np.ndarray] | None]] = {}
        self._count = 0

    def history(self, key: Hashable, space: ScheduleSpace, measured: Sequence[tuple[Config, float]]) -> History | None:
        """The history of the workload ``key`` (its workload and target) in ``space``: the configs of
        ``measured`` the space accepts (a config from a site whose space had other knobs is left
        out), with their seconds and feature rows; None when it accepts none."""
        if self._count > self.max_rows:
            self._rows.clear()
            self._count = 0
        known = self._rows.setdefault(key, {})
        names = [json.dumps(config, sort_keys=True, default=str) for config, _ in measured]
        new: dict[str, np.ndarray] = {}
        for name, (config, _) in zip(names, measured):
            if name in known or name in new:
                continue
            try:
                new[name] = space.encode(config)
            except InvalidConfigError:
                known[name] = None
        if new:
            featured = features(space, np.stack(list(new.values())))
            for (name, index), row in zip(new.items(), featured):
                known[name] = (index, row)
            self._count += len(new)
        indices: list[np.ndarray] = []
        rows: list[np.ndarray] = []
        seconds: list[float] = []
        for name, (_, t) in zip(names, measured):
            memo = known[name]
            if memo is not None:
                indices.append(memo[0])
                rows.append(memo[1])
                seconds.append(t)
        if not seconds:
            return None
        return History(space, np.stack(indices), np.asarray(seconds, dtype=np.float64), np.stack(rows))


def base_model(histories: Sequence[History], seed: int = 0) -> XGBoostCostModel | None:
    """A ranking model of the histories (None when they hold fewer than ``MIN_ROWS`` measurements)."""
    used = [h for h in histories if len(h.seconds)]
    if sum(len(h.seconds) for h in used) < MIN_ROWS:
        return None
    base = XGBoostCostModel(seed=seed)
    base.update(np.concatenate([h.feature_rows() for h in used]),
                np.concatenate([np.asarray(h.seconds, dtype=np.float64) for h in used]),
                np.concatenate([np.full(len(h.seconds), g) for g, h in enumerate(used)]))
    return base
