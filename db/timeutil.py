"""Database-clock timestamps: `utcnow()` / `utcnow_plus(seconds)` compiled per dialect.

Lease expiry must be decided by one clock shared by every service replica, so it is always computed
in SQL from the database's clock, never from a Python process's clock. SQLite's CURRENT_TIMESTAMP
has one-second resolution, so SQLite uses strftime with milliseconds; both forms are fixed-width ISO
strings there, so string comparison orders them correctly.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement

_SQLITE_FMT = "'%Y-%m-%d %H:%M:%f'"


class utcnow(FunctionElement):  # noqa: N801 - reads like the SQL function it stands for
    """The database's current time (UTC)."""

    type = DateTime(timezone=True)
    inherit_cache = True


class utcnow_plus(FunctionElement):  # noqa: N801
    """The database's current time plus a number of seconds (a bound parameter or literal)."""

    type = DateTime(timezone=True)
    inherit_cache = True


@compiles(utcnow)
def _utcnow_default(element: Any, compiler: Any, **kw: Any) -> str:
    return "CURRENT_TIMESTAMP"


@compiles(utcnow, "postgresql")
def _utcnow_pg(element: Any, compiler: Any, **kw: Any) -> str:
    return "now()"


@compiles(utcnow, "sqlite")
def _utcnow_sqlite(element: Any, compiler: Any, **kw: Any) -> str:
    return f"strftime({_SQLITE_FMT}, 'now')"


@compiles(utcnow_plus, "postgresql")
def _utcnow_plus_pg(element: Any, compiler: Any, **kw: Any) -> str:
    (seconds,) = list(element.clauses)
    return f"(now() + make_interval(secs => {compiler.process(seconds, **kw)}))"


@compiles(utcnow_plus, "sqlite")
def _utcnow_plus_sqlite(element: Any, compiler: Any, **kw: Any) -> str:
    (seconds,) = list(element.clauses)
    return f"strftime({_SQLITE_FMT}, 'now', '+' || ({compiler.process(seconds, **kw)}) || ' seconds')"


def as_utc(value: datetime | str | None) -> datetime | None:
    """Timestamps read back from SQLite are naive (or strings); PostgreSQL's are aware."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
