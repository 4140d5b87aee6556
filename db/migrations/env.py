"""Alembic environment: migrates the database named by SWTUNE_DATABASE_URL (or a passed connection)."""

from __future__ import annotations

import os

from alembic import context

from db.engine import DEFAULT_URL, make_engine, normalize_url
from db.orm import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    return normalize_url(config.attributes.get("url") or os.environ.get("SWTUNE_DATABASE_URL") or DEFAULT_URL)


def run_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True,
                      render_as_batch=_url().startswith("sqlite"))
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(_url())
    try:
        with engine.connect() as conn:
            _run(conn)
    finally:
        engine.dispose()


def _run(connection) -> None:
    # render_as_batch: SQLite cannot ALTER most things in place; batch mode recreates tables.
    context.configure(connection=connection, target_metadata=target_metadata,
                      render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()
    if connection.in_transaction():
        connection.commit()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
