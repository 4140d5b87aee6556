"""Where ``swtune compile`` finds tuned schedules: a running service, or the local tuning log.

A lookup maps a workload to its best config, or None (untuned: the default schedule). The second
value of each pair releases what the lookup holds (a database engine).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cli.output import console

Lookup = Callable[[Any], "dict[str, Any] | None"]

# where `compile --server` keeps the schedules it looked up
DEFAULT_CACHE = Path.home() / ".cache" / "swtune" / "schedules.json"


def server_lookup(url: str, token: str | None, target: str, cache: Path | None = None
                  ) -> tuple[Lookup, Callable[[], None]]:
    """Lookup over HTTP with a local cache file: the service answers once per workload, later builds
    (and builds while the service is down) answer from the cache; nothing known means untuned."""
    from service.lookup import ScheduleLookup

    lookup = ScheduleLookup(url, target, cache_file=cache, timeout=10.0, token=token)
    return lookup.best, lambda: None


def db_lookup(url: str, target: str) -> tuple[Lookup, Callable[[], None]]:
    """Lookup in the local tuning log at ``url`` (cli.tuning_log.database_url); no database (or no
    tables) means every workload is untuned."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    from db.engine import Database
    from db.errors import NotFoundError
    from db.measurements import best_config

    parsed = make_url(url)
    none: Lookup = lambda w: None  # noqa: E731
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:") \
            and not Path(parsed.database).exists():
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

    return lookup, database.dispose
