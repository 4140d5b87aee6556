"""The tuning log a command names: ``--db`` / ``--database-url`` / ``SWTUNE_DATABASE_URL``.

Each is a file path (relative or absolute: a SQLite file) or a SQLAlchemy URL. The conversion and
the refusal of anything else are ``swtune.tuning_log.database_url``'s; commands call :func:`database_url`
first, so a bad value is reported before any work starts; :func:`log_session` is a command's one
transaction on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from swtune.tuning_log import database_url

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

DB_HELP = "the tuning log: a file path (a SQLite file, e.g. swtune.db) or a SQLAlchemy URL [default: ./swtune.db]"


@contextmanager
def log_session(value: str | None) -> Iterator[Session]:
    """One transaction on the tuning log an option names (db.engine.Database.session), its engine
    disposed after."""
    from db.engine import Database

    database = Database(database_url(value))
    try:
        with database.session() as s:
            yield s
    finally:
        database.dispose()
