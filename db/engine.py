"""Engines and sessions: a SQLite file (WAL, busy timeout, immediate transactions) or PostgreSQL.

Every option and variable that names a tuning log (``--db``, ``--database-url``,
``SWTUNE_DATABASE_URL``) goes through :func:`normalize_url`, the one place where a file path becomes
a SQLite URL and where a value that is neither is refused, naming the value and the two forms.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.orm import Session, sessionmaker

from db.errors import DatabaseUrlError

DEFAULT_URL = "sqlite:///./swtune.db"

ACCEPTED_FORMS = ("a file path (swtune.db, ./logs/swtune.db or /abs/swtune.db: a SQLite file) or a SQLAlchemy URL "
                  "(sqlite:///swtune.db, postgresql+psycopg://user@host:5432/db)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SCHEME_TYPO = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")  # sqlite:/x.db, postgresql:host: a URL gone wrong


def normalize_url(url: str) -> str:
    """The SQLAlchemy URL of a tuning log given as a URL or as a file path (relative or absolute).

    A path becomes ``sqlite:///`` + its absolute path; PostgreSQL always goes through psycopg 3.
    Anything else (an unparsable URL, an unknown database, a directory) raises DatabaseUrlError
    naming the value and the accepted forms, before anything is opened."""
    value = url.strip() if isinstance(url, str) else ""
    if not value:
        raise DatabaseUrlError(f"no tuning log given ({url!r}): give {ACCEPTED_FORMS}")
    if not _SCHEME.match(value):
        if _SCHEME_TYPO.match(value):
            raise DatabaseUrlError(f"cannot use {url!r} as a tuning log (a URL needs '://'): give {ACCEPTED_FORMS}")
        path = Path(value).expanduser().absolute()
        if path.is_dir():
            raise DatabaseUrlError(f"tuning log {url!r} is a directory: give {ACCEPTED_FORMS}")
        return f"sqlite:///{path}"
    if value.startswith("postgres://"):
        value = "postgresql://" + value[len("postgres://"):]
    if value.startswith("postgresql://"):
        value = "postgresql+psycopg://" + value[len("postgresql://"):]
    try:
        make_url(value).get_dialect()
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        raise DatabaseUrlError(f"cannot use {url!r} as a tuning log ({type(exc).__name__}): give "
                               f"{ACCEPTED_FORMS}") from None
    return value


def _sqlite_pragmas(engine: Engine, busy_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event below issue BEGIN itself (pysqlite's own would be DEFERRED).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # IMMEDIATE takes the write lock up front: a deferred transaction that reads and then writes
        # fails at once with SQLITE_BUSY when another writer got in between, busy timeout or not.
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def make_engine(url: str = DEFAULT_URL, *, busy_timeout_ms: int = 30_000, pool_size: int = 10,
                echo: bool = False) -> Engine:
    url = normalize_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        # hide_parameters: an error's text never carries bound values (lease tokens are parameters)
        engine = create_engine(url, echo=echo, hide_parameters=True,
                               connect_args={"check_same_thread": False, "timeout": busy_timeout_ms / 1000})
        _sqlite_pragmas(engine, busy_timeout_ms)
        return engine
    return create_engine(url, echo=echo, pool_size=pool_size, max_overflow=2 * pool_size, pool_pre_ping=True,
                         hide_parameters=True)


class Database:
    """An engine and its session factory: what the service, the driver and the CLI pass around."""

    def __init__(self, url: str = DEFAULT_URL, **engine_options: Any) -> None:
        self.url = normalize_url(url)
        self.engine = make_engine(self.url, **engine_options)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def session(self) -> Iterator[Session]:
        """One transaction: committed on success, rolled back on any exception."""
        with self.sessions() as session, session.begin():
            yield session

    def ping(self) -> None:
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def dispose(self) -> None:
        self.engine.dispose()
