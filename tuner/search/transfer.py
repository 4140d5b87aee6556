"""Transfer: a base cost model trained on what other workloads of the same target measured.

The features are op-agnostic (tuner/search/features.py), so the measurements of other workloads,
other operators included, rank a new workload's configs before it has measured any of its own. The
new task's model boosts on top of the base's predictions, whose weight fades as its own data grows
(cost_model/xgb.py ``base_prior``), and skips the random warm-up (tuner/search/model_guided.py). Each
workload is its own ranking group: only the order of configs within one workload is learned, never
how fast one workload is against another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cost_model import XGBoostCostModel
from tuner.search.features import features
from tuner.space.space import ScheduleSpace

MIN_ROWS = 32  # fewer measurements than this teach the base nothing worth a skipped warm-up


@dataclass(frozen=True)
class History:
    """What one workload measured: its space, the index rows of the configs and their seconds."""

    space: ScheduleSpace
    index: np.ndarray
    seconds: np.ndarray


def base_model(histories: Sequence[History], seed: int = 0) -> XGBoostCostModel | None:
    """A ranking model of the histories (None when they hold fewer than ``MIN_ROWS`` measurements)."""
    used = [h for h in histories if len(h.seconds)]
    if sum(len(h.seconds) for h in used) < MIN_ROWS:
        return None
    base = XGBoostCostModel(seed=seed)
    base.update(np.concatenate([features(h.space, np.asarray(h.index, dtype=np.int64)) for h in used]),
                np.concatenate([np.asarray(h.seconds, dtype=np.float64) for h in used]),
                np.concatenate([np.full(len(h.seconds), g) for g, h in enumerate(used)]))
    return base
