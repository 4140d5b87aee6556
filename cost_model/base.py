"""The CostModel interface and the label convention shared by its implementations."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np


def throughput_labels(costs: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
    """Seconds -> relative throughput in [0, 1] per group (best config of its workload = 1).

    Normalising per workload puts workloads of very different sizes on one scale, which is what lets
    one model learn from many workloads. Failed configs (inf or nan seconds) get 0: they are learned
    as bad, never dropped.
    """
    costs = np.asarray(costs, dtype=np.float64)
    groups = np.zeros(len(costs), dtype=np.int64) if groups is None else np.asarray(groups)
    labels = np.zeros(len(costs))
    ok = np.isfinite(costs) & (costs > 0)
    for g in np.unique(groups):
        sel = groups == g
        good = sel & ok
        if good.any():
            best = costs[good].min()
            labels[good] = best / costs[good]
    return labels


class CostModel(ABC):
    """Predicts a score per config (higher = faster) from a feature matrix."""

    @abstractmethod
    def update(self, features: np.ndarray, costs: np.ndarray, groups: np.ndarray | None = None) -> None:
        """(Re)train on measured configs: ``costs`` in seconds (inf for failures), ``groups`` = workload ids."""

    @abstractmethod
    def predict(self, features: np.ndarray) -> np.ndarray:
        """Scores for configs; only their order within one workload is meaningful."""

    @property
    @abstractmethod
    def trained(self) -> bool:
        """Whether predict() has learned anything yet."""

    @abstractmethod
    def save(self, path: str | Path) -> None:
        ...

    @classmethod
    @abstractmethod
    def load(cls, path: str | Path) -> CostModel:
        ...
