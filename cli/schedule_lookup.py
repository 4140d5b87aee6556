"""Where ``swtune compile`` finds tuned schedules: a running service, or the local tuning log.

A lookup maps a workload to its best config, or None (untuned: the default schedule). The second
value of each pair releases what the lookup holds (a database engine).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cli.output import console
from tuner.aot.lookup import Lookup

# where `compile --server` keeps the schedules it looked up
DEFAULT_CACHE = Path.home() / ".cache" / "swtune" / "schedules.json"


def server_lookup(url: str, token: str | None, target: str, cache: Path | None = None
                  ) -> tuple[Lookup, Callable[[], None]]:
    """Lookup over HTTP with a local cache file: the service answers once per workload, later builds
    (and builds while the service is down) answer from the cache; nothing known means untuned."""
    from service.lookup import ScheduleLookup
    from tuner.aot.lookup import TuningLog

    lookup = ScheduleLookup(url, target, cache_file=cache, timeout=10.0, token=token)
    return TuningLog(lookup.best), lambda: None


def db_lookup(url: str, target: str) -> tuple[Lookup, Callable[[], None]]:
    """Lookup in the local tuning log at ``url`` (cli.tuning_log.database_url); no database (or no
    tables) means every workload is untuned."""
    from sqlalchemy.exc import SQLAlchemyError

    from db.engine import Database
    from db.errors import NotFoundError
    from db.measurements import best_config
    from tuner.aot.lookup import TuningLog

    none: Lookup = lambda w: None  # noqa: E731
    if _missing_sqlite_file(url):
        console.print(f"[yellow]warning:[/] no tuning log at {url}: every workload is untuned "
                      "(default schedules)", soft_wrap=True)
        return none, lambda: None
    database = Database(url)
    broken: list[str] = []

    def lookup(workload: Any) -> dict[str, Any] | None:
        if broken:
            return None
        try:
            with database.session() as s:
                return dict(best_config(s, workload.key, target).config)
        except NotFoundError:
            return None
        except SQLAlchemyError as exc:  # e.g. a database without the swtune tables
            broken.append(str(exc))
            console.print(f"[yellow]warning:[/] cannot read the tuning log at {url} "
                          f"({type(exc).__name__}): every workload is untuned", soft_wrap=True)
            return None

    return TuningLog(lookup), database.dispose


def active_profile(target: str, *, server: str | None = None, token: str | None = None,
                   db_url: str | None = None) -> Any:
    """The target's active simulator profile in the tuning log (a service's, or the local one), or None
    when it is the built-in profile (version 0) or cannot be read: times are then the built-in model's."""
    import httpx
    from sqlalchemy.exc import SQLAlchemyError

    from service.client import ServiceError
    from tuner.profile import ProfileError

    try:
        profile = _served_profile(server, token, target) if server else _stored_profile(db_url, target)
    except (httpx.HTTPError, ServiceError, SQLAlchemyError, ProfileError) as exc:
        console.print(f"[yellow]warning:[/] cannot read the active simulator profile of {target} "
                      f"({type(exc).__name__}: {exc}); simulated times use the built-in profile", soft_wrap=True)
        return None
    return profile if profile is not None and profile.version > 0 else None


def _served_profile(server: str, token: str | None, target: str) -> Any:
    from service.client import ServiceClient
    from tuner.profile import Profile

    with ServiceClient(server, token, timeout=10.0, retries=1) as client:
        document = client.get_profile(target).get("active")
    return Profile.from_json(document) if document else None


def _stored_profile(db_url: str | None, target: str) -> Any:
    from db.engine import Database
    from db.profiles import active_profile as stored_active

    if db_url is None or _missing_sqlite_file(db_url):
        return None  # no tuning log yet: nothing calibrated
    database = Database(db_url)
    try:
        with database.session() as s:
            return stored_active(s, target)
    finally:
        database.dispose()


def _missing_sqlite_file(url: str) -> bool:
    """A SQLite tuning log whose file does not exist yet (opening it would create an empty one)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    return (parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:")
            and not Path(parsed.database).exists())


def profile_note(profile: Any, interval: tuple[float, float] | None) -> str:
    """How a report names the profile its simulated times come from, with the whole model's interval."""
    if profile is None:
        return ""
    if interval is None:
        return f" (simulator profile version {profile.version}, no fit draws: no interval)"
    return (f" (simulator profile version {profile.version}; 95% interval {interval[0] * 1e3:.3f} - "
            f"{interval[1] * 1e3:.3f} ms from its parameter uncertainty)")
