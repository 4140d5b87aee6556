"""Domain exceptions of the tuning log; the service maps each to one HTTP status code."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from tuner.errors import SwtuneError

T = TypeVar("T")


class StorageError(SwtuneError):
    """Base of every error the db package raises on purpose."""


class NotFoundError(StorageError, LookupError):
    """The object asked for does not exist (HTTP 404)."""


def found_one(found: Sequence[T], what: str) -> T:
    """The object a lookup of one key found; NotFoundError "<what> does not exist" when it found none."""
    if not found:
        raise NotFoundError(f"{what} does not exist")
    return found[0]


class ConflictError(StorageError):
    """The request clashes with the current state, e.g. cancelling a finished task (HTTP 409)."""


class LeaseLostError(ConflictError):
    """A lease token that no longer holds the job: expired and reclaimed, released, or re-leased (HTTP 409)."""


class ForbiddenError(StorageError):
    """The caller is authenticated but may not touch this object, e.g. another worker's job (HTTP 403)."""


class InvalidInputError(StorageError, ValueError):
    """Input that describes nothing valid; nothing was changed (HTTP 422)."""


class StorageUnavailableError(StorageError):
    """The database cannot be reached or is not migrated (HTTP 503)."""


class DatabaseUrlError(InvalidInputError):
    """A tuning log named by something that is neither a file path nor a usable SQLAlchemy URL."""
