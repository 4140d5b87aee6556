"""XGBoost cost model: pairwise ranking (default) or regression on per-workload throughput.

Transfer: a model trained on other workloads of the same target can be given as ``base``. Its
predictions enter as the base margin of this model's boosting, scaled by a weight that fades as the
workload's own data grows (``base_weight = prior / (prior + n)``), so early rounds lean on what was
learned elsewhere and later rounds on the workload's own measurements. Small histories are always
used: with fewer than two distinct labels the model falls back to the base model's scores.

Prior: with ``prior_column`` set, ``-prior_weight`` times that feature column (e.g. a log2 analytic
estimate of the cycles) is added to the margin, always: the boosters learn the residual of the
measurements over the estimate, so regions the data has not reached are ranked by the estimate
instead of by whatever the trees extrapolate there. With ``prior_fade`` > 0 its weight fades as
``prior_fade / (prior_fade + n)`` over the ``n`` measured configs, like the transfer base.

One thread by default: the boosting of a few thousand rows gains little from OpenMP, and on shared,
busy cores (several tuners or workers per machine) OpenMP's spinning threads made training 5-10x
slower in wall time; parallelism comes from running tasks in separate processes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import xgboost as xgb

from cost_model.base import CostModel, throughput_labels

OBJECTIVES = {"rank": "rank:pairwise", "ndcg": "rank:ndcg", "regression": "reg:squarederror"}


class XGBoostCostModel(CostModel):
    def __init__(self, objective: str = "rank", num_rounds: int = 60, max_depth: int = 6, eta: float = 0.25,
                 nthread: int = 1, seed: int = 0, base: CostModel | None = None, base_prior: float = 64.0,
                 prior_column: int | None = None, prior_weight: float = 1.0, prior_fade: float = 0.0) -> None:
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {sorted(OBJECTIVES)}, got {objective!r}")
        self.objective = objective
        self.num_rounds = num_rounds
        self.params: dict[str, Any] = {
            "objective": OBJECTIVES[objective], "tree_method": "hist", "max_depth": max_depth, "eta": eta,
            "nthread": nthread, "seed": seed, "min_child_weight": 1, "subsample": 0.9, "colsample_bytree": 0.9,
            "verbosity": 0, "max_bin": 64,  # 64 bins: ~25% faster training, no loss seen in ranking
        }
        if objective == "ndcg":
            self.params["ndcg_exp_gain"] = False  # labels are continuous throughputs in [0, 1]
        self.base = base
        self.base_prior = base_prior
        self.prior_column = prior_column
        self.prior_weight = prior_weight
        self.prior_fade = prior_fade
        self.booster: xgb.Booster | None = None
        self._intercept: float | None = None  # the booster's base_score, read once per booster
        self.n_train = 0

    @property
    def trained(self) -> bool:
        return (self.booster is not None or self.prior_column is not None
                or (self.base is not None and self.base.trained))

    def _prior(self, features: np.ndarray) -> np.ndarray | None:
        if self.prior_column is None:
            return None
        weight = self.prior_weight
        if self.prior_fade > 0:  # fades like the transfer base: the workload's own data takes over
            weight *= self.prior_fade / (self.prior_fade + self.n_train)
        return -weight * np.asarray(features[:, self.prior_column], dtype=np.float64)

    def _base_weight(self) -> float:
        return self.base_prior / (self.base_prior + self.n_train) if self.base is not None else 0.0

    def _base_margin(self, features: np.ndarray) -> np.ndarray | None:
        prior = self._prior(features)
        if self.base is None or not self.base.trained:
            return prior
        margin = self._base_weight() * self.base.predict(features)
        return margin if prior is None else margin + prior

    def update(self, features: np.ndarray, costs: np.ndarray, groups: np.ndarray | None = None) -> None:
        features = np.asarray(features, dtype=np.float32)
        costs = np.asarray(costs, dtype=np.float64)
        if len(features) != len(costs):
            raise ValueError(f"{len(features)} feature rows but {len(costs)} costs")
        groups = np.zeros(len(costs), dtype=np.int64) if groups is None else np.asarray(groups, dtype=np.int64)
        labels = throughput_labels(costs, groups)
        self.n_train = len(labels)
        if len(np.unique(labels)) < 2:
            self.booster = None  # nothing to learn yet: predict() uses the base model (or zeros)
            return
        order = np.argsort(groups, kind="stable")  # ranking objectives need rows grouped by query
        dtrain = xgb.DMatrix(features[order], label=labels[order])
        if self.objective != "regression":
            dtrain.set_group(np.unique(groups[order], return_counts=True)[1])
        margin = self._base_margin(features[order])
        if margin is not None:
            dtrain.set_base_margin(margin)
        self.booster = xgb.train(self.params, dtrain, num_boost_round=self.num_rounds)
        self._intercept = None

    def predict(self, features: np.ndarray) -> np.ndarray:
        features = np.asarray(features, dtype=np.float32)
        margin = self._base_margin(features)
        if self.booster is None:
            return margin if margin is not None else np.zeros(len(features))
        own = np.asarray(self.booster.inplace_predict(features), dtype=np.float64)
        if margin is None:
            return own
        # A base margin replaces the booster's intercept (base_score), and every objective here has an
        # identity link, so this is inplace_predict(features, base_margin=margin) to float32 rounding.
        # XGBoost sets a margin through a proxy matrix at ~5 ms a call, more than the prediction itself,
        # and a search round predicts hundreds of batches.
        return own - self.intercept + margin

    @property
    def intercept(self) -> float:
        """The trained booster's global bias (``base_score``), which a base margin replaces."""
        if self._intercept is None:
            assert self.booster is not None
            score = json.loads(self.booster.save_config())["learner"]["learner_model_param"]["base_score"]
            self._intercept = float(str(score).strip("[]"))
        return self._intercept

    def save(self, path: str | Path) -> None:
        """Save to a directory: the booster as UBJSON plus our settings as JSON (base models too)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        meta = {"objective": self.objective, "num_rounds": self.num_rounds, "params": self.params,
                "base_prior": self.base_prior, "prior_column": self.prior_column, "prior_weight": self.prior_weight,
                "prior_fade": self.prior_fade, "n_train": self.n_train, "has_booster": self.booster is not None,
                "has_base": self.base is not None}
        if self.booster is not None:
            self.booster.save_model(str(path / "booster.ubj"))
        if self.base is not None:
            self.base.save(path / "base")
        (path / "model.json").write_text(json.dumps(meta, indent=2))

    @classmethod
    def load(cls, path: str | Path) -> XGBoostCostModel:
        path = Path(path)
        meta = json.loads((path / "model.json").read_text())
        model = cls(objective=meta["objective"], num_rounds=meta["num_rounds"], base_prior=meta["base_prior"],
                    prior_column=meta.get("prior_column"), prior_weight=meta.get("prior_weight", 1.0),
                    prior_fade=meta.get("prior_fade", 0.0))
        model.params = meta["params"]
        model.n_train = meta["n_train"]
        if meta["has_base"]:
            model.base = cls.load(path / "base")
        if meta["has_booster"]:
            model.booster = xgb.Booster()
            model.booster.load_model(str(path / "booster.ubj"))
            model._intercept = None
        return model
