"""The storage backends every contract test runs against: a fresh SQLite file always, and a fresh
PostgreSQL schema when SWTUNE_TEST_POSTGRES_URL is set (dropped afterwards, so runs are independent)."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from db import migrate
from db.engine import Database, normalize_url

PG_ENV = "SWTUNE_TEST_POSTGRES_URL"


def backend_names() -> list[str]:
    return ["sqlite"] + (["postgresql"] if os.environ.get(PG_ENV) else [])


def with_search_path(url: str, schema: str) -> str:
    return make_url(url).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
        hide_password=False)


@contextlib.contextmanager
def fresh_url(kind: str, directory: Path, *, upgrade: bool = True) -> Iterator[str]:
    """A URL of an empty database of ``kind``, migrated to head unless ``upgrade`` is False."""
    empty = _sqlite_file(directory) if kind == "sqlite" else _postgres_schema()
    with empty as url:
        if upgrade:
            migrate.upgrade(url)
        yield url


@contextlib.contextmanager
def _sqlite_file(directory: Path) -> Iterator[str]:
    yield f"sqlite:///{directory / f'swtune-{uuid.uuid4().hex[:8]}.db'}"


@contextlib.contextmanager
def _postgres_schema() -> Iterator[str]:
    """A new schema of the test server, dropped with everything in it afterwards."""
    base = normalize_url(os.environ[PG_ENV])
    schema = f"swt_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, pool_pre_ping=True)  # its connection may predate a restart test
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield with_search_path(base, schema)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(params=backend_names())
def backend_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def backend_url(backend_kind: str, tmp_path: Path) -> Iterator[str]:
    with fresh_url(backend_kind, tmp_path) as url:
        yield url


@pytest.fixture
def backend_factory(backend_kind: str, tmp_path: Path) -> Iterator[Callable[[], str]]:
    """More fresh databases of the same backend (e.g. a second site for import tests)."""
    with contextlib.ExitStack() as stack:
        yield lambda: stack.enter_context(fresh_url(backend_kind, tmp_path))


@pytest.fixture
def database(backend_url: str) -> Iterator[Database]:
    db = Database(backend_url)
    yield db
    db.dispose()
