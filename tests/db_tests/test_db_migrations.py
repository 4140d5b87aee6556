"""The Alembic migrations build exactly the schema the ORM models describe, on every backend."""

from __future__ import annotations

from db import migrate
from db.engine import make_engine


def test_upgrade_head_matches_the_models(backend_url: str) -> None:
    engine = make_engine(backend_url)
    try:
        assert migrate.current_revision(engine) == migrate.head_revision()
        assert migrate.schema_diff(engine) == []
    finally:
        engine.dispose()


def test_downgrade_to_base_and_back(backend_url: str) -> None:
    migrate.downgrade(backend_url, "base")
    engine = make_engine(backend_url)
    try:
        assert migrate.current_revision(engine) is None
        migrate.upgrade(backend_url)
        assert migrate.schema_diff(engine) == []
    finally:
        engine.dispose()
