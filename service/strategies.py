"""Which search strategies the service offers (the registered ones), and the default one ("model")."""

from __future__ import annotations

from tuner.search import strategy_names


def available() -> list[str]:
    """The registered strategies' names (tuner.search.registry), sorted."""
    return strategy_names()


def default_strategy(preferred: str = "") -> str:
    """``preferred`` (the service's setting) when given, else "model" when registered, else "random"."""
    if preferred:
        return preferred
    return "model" if "model" in available() else "random"
