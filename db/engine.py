"""Engines and sessions: a SQLite file (WAL, busy timeout, immediate transactions) or PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

DEFAULT_URL = "sqlite:///./swtune.db"


def normalize_url(url: str) -> str:
    """Accept the usual spellings; PostgreSQL always goes through psycopg 3."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://"):]
    return url


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
