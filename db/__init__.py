"""The tuning log: SQLAlchemy ORM, Alembic migrations, and model functions returning domain values.

Callers (the service, its driver, the CLI) open a transaction with ``Database.session()`` and pass
the session to the model functions of ``db.tasks``, ``db.jobs``, ``db.results``,
``db.measurements``, ``db.records``, ``db.tokens`` and ``db.workers``.
"""

from db.engine import DEFAULT_URL, Database, make_engine, normalize_url
from db.errors import (
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    LeaseLostError,
    NotFoundError,
    StorageError,
    StorageUnavailableError,
)

__all__ = [
    "DEFAULT_URL",
    "ConflictError",
    "Database",
    "ForbiddenError",
    "InvalidInputError",
    "LeaseLostError",
    "NotFoundError",
    "StorageError",
    "StorageUnavailableError",
    "make_engine",
    "normalize_url",
]
