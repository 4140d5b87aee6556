"""Search strategies (ask/tell), their registry, cost-model features and the multi-task scheduler.

Owns: base (``SearchStrategy``, random search), registry (the strategies by name), model_guided
(XGBoost-guided search), features (a GEMM-like config's features), neighbourhood (local moves),
scheduler (the gradient task scheduler), transfer (a base model of other workloads' measurements). May
import measure, space, cost_model and the domain.
"""

from tuner.search.base import RandomSearch, SearchStrategy
from tuner.search.registry import STRATEGIES, create_strategy, register, strategy_names, unregister

__all__ = ["STRATEGIES", "RandomSearch", "SearchStrategy", "create_strategy", "register", "strategy_names",
           "unregister"]
