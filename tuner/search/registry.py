"""The search strategies by name: what a task's ``strategy`` and ``swtune tune --strategy`` take.

A strategy is a factory ``(space, seed=..., **options) -> SearchStrategy`` (usually its class), a plug-in
of the :class:`tuner.registry.Registry` ``STRATEGIES``: swtune's own in :data:`BUILTIN_STRATEGIES`
(``model``, the XGBoost-guided search, is imported only when asked for), another package's under the
``swtune.strategies`` entry points. Tests register their own with :func:`register`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tuner.registry import Registry
from tuner.search.base import SearchStrategy
from tuner.space.space import ScheduleSpace

ENTRY_POINT_GROUP = "swtune.strategies"
BUILTIN_STRATEGIES = {
    "random": "tuner.search.base:RandomSearch",
    "model": "tuner.search.model_guided:ModelGuidedSearch",
}

StrategyFactory = Callable[..., SearchStrategy]

STRATEGIES: Registry[StrategyFactory] = Registry("search strategy", ENTRY_POINT_GROUP, BUILTIN_STRATEGIES)


def register(name: str, factory: StrategyFactory) -> StrategyFactory:
    """Offer ``factory`` as the strategy ``name`` (tests; a package declares an entry point)."""
    return STRATEGIES.register(name, factory)


def unregister(name: str) -> None:
    """Forget a strategy :func:`register` added."""
    STRATEGIES.unregister(name)


def create_strategy(name: str, space: ScheduleSpace, **options: Any) -> SearchStrategy:
    """Create a registered strategy by name ("random", "model", ...); ValueError listing them otherwise."""
    return STRATEGIES.get(name)(space, **options)


def strategy_names() -> list[str]:
    """The registered strategies' names, sorted (nothing is imported)."""
    return STRATEGIES.names()
