"""``with apply_best(lookup):`` -- compile-time schedule application for every compilation in the block.

Inside the block, ``compile_model(..., lookup=None)`` (and anything else that asks ``current_lookup``)
takes each workload's best config from ``lookup`` (the tuning log over HTTP with its cache, the local
log, or any callable); a workload it does not know falls back to a default schedule with a logged
warning naming it (see tuner.aot.untuned.choose_config). Blocks nest; the innermost wins. The lookup
is target-aware because the callable is made for one target (e.g. ``ScheduleLookup(url, target)``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from tuner.aot.lookup import Lookup

_ACTIVE: ContextVar[Lookup | None] = ContextVar("swtune_schedule_lookup", default=None)


@contextmanager
def apply_best(lookup: Lookup) -> Iterator[Lookup]:
    token = _ACTIVE.set(lookup)
    try:
        yield lookup
    finally:
        _ACTIVE.reset(token)


def current_lookup() -> Lookup | None:
    return _ACTIVE.get()
