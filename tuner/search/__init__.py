"""Search strategies (ask/tell), their registry, cost-model features and the multi-task scheduler.

Owns: base (``SearchStrategy``, the registry, random search), model_guided (XGBoost-guided search),
features (a GEMM-like config's features), neighbourhood (local moves), scheduler (the gradient task
scheduler), transfer (a base model of other workloads' measurements). May import measure, space,
cost_model and the domain.
"""

from tuner.search.base import RandomSearch, SearchStrategy, create_strategy, register, strategy_names

__all__ = ["RandomSearch", "SearchStrategy", "create_strategy", "register", "strategy_names"]

from tuner.search import model_guided as _model_guided  # noqa: E402,F401  (registers "model")
