"""What the migrations' tables share: column makers, the id column and key, the constraint names.

A migration that has run has built its tables with these; so each maker here keeps making exactly
what it made (a change is a new migration, never an edit here). Constraint names follow db.orm's
naming convention: ``pk_<table>``, ``fk_<table>_<column>_<referred table>``.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from db.timeutil import utcnow  # a dialect-compiled now(): millisecond strftime on SQLite

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def created(name: str = "created_at") -> sa.Column:
    """A stamp the database sets when the row is inserted."""
    return sa.Column(name, sa.DateTime(timezone=True), server_default=utcnow(), nullable=False)


def required(name: str, type_: Any) -> sa.Column:
    """A column every row fills (NOT NULL)."""
    return sa.Column(name, type_, nullable=False)


def optional(name: str, type_: Any) -> sa.Column:
    """A column a row may leave NULL."""
    return sa.Column(name, type_, nullable=True)


def search_columns() -> list[sa.Column]:
    """How a tuning task or a model submission searches, and who submitted it."""
    return [required("strategy", sa.String(64)), required("seed", sa.Integer()), required("state", sa.String(16)),
            required("submitter", sa.String(128))]


def create_table(name: str, *items: Any, id_type: Any = None) -> None:
    """``op.create_table`` with the table's first column, ``id`` (an integer unless ``id_type`` says
    otherwise), as its primary key ``pk_<name>``, then ``items``."""
    key = sa.PrimaryKeyConstraint("id", name=f"pk_{name}")
    # the key stands where the migrations first wrote it, before the unique constraints: the DDL is as it was
    at = next((i for i, item in enumerate(items) if isinstance(item, sa.UniqueConstraint)), len(items))
    op.create_table(name, required("id", sa.Integer() if id_type is None else id_type),
                    *items[:at], key, *items[at:])


def foreign_key(table: str, column: str, referred: str, **options: Any) -> sa.ForeignKeyConstraint:
    """``table.column`` refers to ``referred.id``."""
    return sa.ForeignKeyConstraint([column], [f"{referred}.id"], name=f"fk_{table}_{column}_{referred}", **options)
