"""The interval of a served simulated time: what the profile it was measured under leaves uncertain.

A simulated best time came from one stored profile version (``profile_version``). When that profile was
fitted (``swtune calibrate``) its bootstrap draws give the config's simulated time a 95% interval
(tuner/calibrate/intervals.py); the lookup and the dashboard show it beside the time. Hardware times,
the built-in profile and a profile stored without draws have none.

Stored profile versions never change, so an interval is cached by (target, version, workload, config)
for the life of the process: repeated lookups cost one computation.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from db import profiles as profiles_db
from db.domain import BestConfig
from db.errors import NotFoundError
from tuner.calibrate.intervals import simulated_interval
from tuner.profile import Profile
from tuner.space.space import Config
from tuner.workloads import Workload

SIMULATOR = "simulator"


def best_interval(session: Session, best: BestConfig) -> tuple[float, float] | None:
    """The 95% interval of ``best``'s simulated time under its profile's draws (None: no such interval)."""
    if best.source != SIMULATOR or not best.profile_version:
        return None
    try:
        profile = profiles_db.get_profile(session, best.target, best.profile_version)
    except NotFoundError:
        return None
    if not profile.fit.get("draws"):
        return None
    return _cached(profile, best.workload, best.config_hash, best.config)


_CACHE: dict[tuple[str, int, str, str], tuple[float, float] | None] = {}


def _cached(profile: Profile, workload: Workload, config_hash: str, config: Config) -> tuple[float, float] | None:
    key = (profile.target, profile.version, workload.key, config_hash)
    if key not in _CACHE:
        if len(_CACHE) > 10_000:
            _CACHE.clear()
        _CACHE[key] = simulated_interval(profile, workload, config)
    return _CACHE[key]

