"""The interval of a served simulated time: what the profile it was measured under leaves uncertain.

A simulated best time came from one stored profile version (``profile_version``). When that profile was
fitted (``swtune calibrate``) its bootstrap draws give the config's simulated time a 95% interval
(tuner/calibrate/intervals.py); the lookup and the dashboard show it beside the time. Hardware times,
the built-in profile and a profile stored without draws have none.

Stored profile versions never change, so an interval is cached by (target, version, workload, config) in
an :class:`IntervalCache` the app holds (one per tuning log): repeated lookups cost one computation and read
the profile once.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from db import profiles as profiles_db
from db.domain import BestConfig
from db.errors import NotFoundError
from tuner.calibrate.intervals import simulated_interval
from tuner.measure.base import Source


class IntervalCache:
    """Intervals by (target, profile version, workload key, config hash), bounded."""

    LIMIT = 10_000

    def __init__(self) -> None:
        self._entries: dict[tuple[str, int, str, str], tuple[float, float] | None] = {}

    def interval(self, session: Session, best: BestConfig) -> tuple[float, float] | None:
        """The 95% interval of ``best``'s simulated time under its profile's draws (None: no such interval)."""
        if best.source != Source.SIMULATOR.value or not best.profile_version:
            return None
        key = (best.target, best.profile_version, best.workload_key, best.config_hash)
        if key not in self._entries:  # a lookup is a request handler's hot path: read the profile once per key
            try:
                profile = profiles_db.get_profile(session, best.target, best.profile_version)
            except NotFoundError:
                return None
            if len(self._entries) > self.LIMIT:
                self._entries.clear()
            self._entries[key] = (simulated_interval(profile, best.workload, best.config)
                                  if profile.fit.get("draws") else None)
        return self._entries[key]
