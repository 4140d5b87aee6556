"""Where the workflows read tuned schedules and the simulator profile: the local tuning log, or a
running service.

A tuning log is named by a file path (a SQLite file) or a SQLAlchemy URL (``database_url``). A lookup
maps a workload to its best config, or None (untuned: the default schedule); ``db_lookup`` and
``server_lookup`` return it with the function that releases what it holds (a database engine), and
``open_log`` is the same as a context manager.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from swtune.progress import Progress
from tuner.aot.lookup import Lookup

# where a lookup on a server (compile_model(server=...)) keeps the schedules it looked up
DEFAULT_CACHE = Path.home() / ".cache" / "swtune" / "schedules.json"


def database_url(value: str | None) -> str:
    """The SQLAlchemy URL of a tuning log named by a path or a URL (None: the default ``./swtune.db``);
    raises ``ValueError`` naming the two accepted forms for anything else."""
    from db.engine import DEFAULT_URL, normalize_url

    return normalize_url(value if value is not None else DEFAULT_URL)


def server_lookup(url: str, token: str | None, target: str, cache: Path | None = None
                  ) -> tuple[Lookup, Callable[[], None]]:
    """Lookup over HTTP with a local cache file: the service answers once per workload, later builds
    (and builds while the service is down) answer from the cache; nothing known means untuned."""
    from service.lookup import ScheduleLookup
    from tuner.aot.lookup import TuningLog

    lookup = ScheduleLookup(url, target, cache_file=cache, timeout=10.0, token=token)
    return TuningLog(lookup.best), lambda: None


def db_lookup(url: str, target: str, progress: Progress | None = None) -> tuple[Lookup, Callable[[], None]]:
    """Lookup in the local tuning log at ``url`` (a URL: ``database_url``) for ``target``; no database
    (or no tables) means every workload is untuned, which ``progress.warning`` is told."""
    from sqlalchemy.exc import SQLAlchemyError

    from db.engine import Database
    from db.errors import NotFoundError
    from db.measurements import best_config
    from tuner.aot.lookup import TuningLog

    progress = progress or Progress()
    none: Lookup = lambda w: None  # noqa: E731
    if missing_sqlite_file(url):
        progress.warning(f"no tuning log at {url}: every workload is untuned (default schedules)")
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
            progress.warning(f"cannot read the tuning log at {url} ({type(exc).__name__}): every workload is "
                             "untuned")
            return None

    return TuningLog(lookup), database.dispose


@contextmanager
def open_log(db: str | None, target: str, progress: Progress | None = None) -> Iterator[Lookup]:
    """The best schedules of ``target`` in the tuning log ``db`` (a path or a URL; None: ``./swtune.db``),
    as a lookup (workload -> config or None) for ``tuner.aot.compile_model`` and the like; the log's
    engine is released on exit. Raises ``ValueError`` for a ``db`` that names no tuning log."""
    lookup, close = db_lookup(database_url(db), target, progress)
    try:
        yield lookup
    finally:
        close()


def active_profile(target: str, *, server: str | None = None, token: str | None = None,
                   db_url: str | None = None, progress: Progress | None = None) -> Any:
    """The target's active simulator profile in the tuning log (a service's, or the local one), or None
    when it is the built-in profile (version 0) or cannot be read (``progress.warning`` says why): times
    are then the built-in model's."""
    import httpx
    from sqlalchemy.exc import SQLAlchemyError

    from service.client import ServiceError
    from tuner.profile import ProfileError

    try:
        profile = _served_profile(server, token, target) if server else _stored_profile(db_url, target)
    except (httpx.HTTPError, ServiceError, SQLAlchemyError, ProfileError) as exc:
        (progress or Progress()).warning(f"cannot read the active simulator profile of {target} "
                                         f"({type(exc).__name__}: {exc}); simulated times use the built-in profile")
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

    if db_url is None or missing_sqlite_file(db_url):
        return None  # no tuning log yet: nothing calibrated
    database = Database(db_url)
    try:
        with database.session() as s:
            return stored_active(s, target)
    finally:
        database.dispose()


def missing_sqlite_file(url: str) -> bool:
    """A SQLite tuning log whose file does not exist yet (opening it would create an empty one)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    return (parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:")
            and not Path(parsed.database).exists())


def program_interval(profile: Any, graph: Any, kernels: list[Any]) -> tuple[float, float] | None:
    """The whole program's 95% interval of simulated time under ``profile``'s uncertainty (None: no
    profile, or one without fit draws)."""
    if profile is None:
        return None
    from tuner.calibrate.intervals import program_interval as interval

    return interval(profile, graph, {k.workload.key: k.config for k in kernels})
