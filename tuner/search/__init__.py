"""Search strategies (ask/tell), their registry, and the multi-task scheduler."""

from tuner.search.base import RandomSearch, SearchStrategy, create_strategy, register, strategy_names

__all__ = ["RandomSearch", "SearchStrategy", "create_strategy", "register", "strategy_names"]

from tuner.search import model_guided as _model_guided  # noqa: E402,F401  (registers "model")
