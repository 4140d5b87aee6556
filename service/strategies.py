"""Which search strategies the service offers, and the default one ("model" when registered)."""

from __future__ import annotations

import importlib
import logging

from tuner.search import strategy_names

log = logging.getLogger(__name__)
_OPTIONAL = ("tuner.search.model_guided",)  # registers "model" (XGBoost) when importable
_loaded = False


def available() -> list[str]:
    """Registered strategy names, after giving optional strategy modules a chance to register."""
    global _loaded
    if not _loaded:
        _loaded = True
        for module in _OPTIONAL:
            try:  # looked up at run time: the service works (with "random") while it is absent or broken
                importlib.import_module(module)
            except Exception as exc:  # noqa: BLE001 - any failure just leaves the strategy unregistered
                log.warning("optional search strategy module %s not loaded: %s", module, exc)
    return strategy_names()


def default_strategy(preferred: str = "") -> str:
    names = available()
    if preferred:
        return preferred
    return "model" if "model" in names else "random"
