"""An ensemble of XGBoost boosters: the mean score ranks configs, the spread is the model's uncertainty.

Members differ in their seed and see a bootstrap-like row subsample, so they disagree where data is
thin: the search adds ``kappa`` times that spread to the mean (an upper-confidence bound) to explore
configs the model is unsure about instead of only those it believes best. Each member's scores are
standardised over the predicted batch before averaging, since ranking margins have no common scale.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from cost_model.base import CostModel
from cost_model.xgb import XGBoostCostModel


class BoosterEnsemble(CostModel):
    def __init__(self, members: int = 4, objective: str = "rank", seed: int = 0, subsample: float = 0.7,
                 base: CostModel | None = None, **options) -> None:
        if members < 2:
            raise ValueError("an ensemble needs at least two members")
        self.members = [XGBoostCostModel(objective=objective, seed=seed * 1009 + k, base=base, **options)
                        for k in range(members)]
        for m in self.members:
            m.params["subsample"] = subsample

    @property
    def trained(self) -> bool:
        return self.members[0].trained

    def update(self, features: np.ndarray, costs: np.ndarray, groups: np.ndarray | None = None) -> None:
        for m in self.members:
            m.update(features, costs, groups)

    def _standardised(self, features: np.ndarray) -> np.ndarray:
        scores = np.stack([m.predict(features) for m in self.members])
        spread = scores.std(axis=1, keepdims=True)
        return (scores - scores.mean(axis=1, keepdims=True)) / np.where(spread > 0, spread, 1.0)

    def predict(self, features: np.ndarray) -> np.ndarray:
        return self._standardised(features).mean(axis=0)

    def predict_with_spread(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(mean, standard deviation) over the members of the standardised scores."""
        s = self._standardised(features)
        return s.mean(axis=0), s.std(axis=0)

    def save(self, path: str | Path) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        for k, m in enumerate(self.members):
            m.save(path / f"member{k}")
        (path / "ensemble.json").write_text(json.dumps({"members": len(self.members)}))

    @classmethod
    def load(cls, path: str | Path) -> BoosterEnsemble:
        path = Path(path)
        n = json.loads((path / "ensemble.json").read_text())["members"]
        ens = cls.__new__(cls)
        ens.members = [XGBoostCostModel.load(path / f"member{k}") for k in range(n)]
        return ens
