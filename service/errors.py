"""Every error the service answers, mapped once for the whole app, with the models that document them.

Bodies have one of two shapes, both in the OpenAPI schema: ``{"detail": "<sentence>"}`` (ErrorOut)
for 400, 401, 403, 404, 409, 413, 429 and 503, and FastAPI's ``{"detail": [{"loc", "msg", "type"}]}``
(ValidationErrorOut) for every 422, whether pydantic or a domain check refused the input.

Only a real outage is a 503 ("retry later"): a lost or refused database connection, a pool timeout,
SQLite's lock timeout. Constraint, data and overflow errors are the caller's input (4xx) and a
client must not retry them. Logs name the error class and the driver's first message line, never
the SQL statement or its parameters (lease tokens travel as parameters).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import (
    DataError,
    DBAPIError,
    DisconnectionError,
    IntegrityError,
    InterfaceError,
    OperationalError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from db.errors import (
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    StorageUnavailableError,
)
from tuner.errors import InvalidConfigError, InvalidWorkloadError, UnknownTargetError, UnsupportedStrategyError

log = logging.getLogger(__name__)


class ErrorOut(BaseModel):
    """Every error but 422: one readable sentence."""

    detail: str


class ValidationIssue(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class ValidationErrorOut(BaseModel):
    """Every 422: the list of problems (pydantic's, or one from a domain check at loc ["body"])."""

    detail: list[ValidationIssue]


_DESCRIPTIONS = {
    400: "the request could not be read",
    401: "missing, invalid or revoked bearer token",
    403: "the token's role or ownership does not allow this",
    404: "no such object",
    409: "conflicts with the current state (e.g. a lost lease, a finished task)",
    413: "request body too large",
    422: "invalid input; nothing was changed",
    429: "too many requests from this token; retry after the Retry-After seconds",
    503: "storage unavailable (lost database connection); retry later",
}


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses=`` for the error statuses a route can answer."""
    return {code: {"model": ValidationErrorOut if code == 422 else ErrorOut, "description": _DESCRIPTIONS[code]}
            for code in codes}


# What every authenticated route may answer; routes add 404/409/413/422 as they apply.
AUTH = (401, 403, 429, 503)
BODY = (400, 413, 422)

STATUS = [
    (NotFoundError, 404),
    (ConflictError, 409),  # includes LeaseLostError
    (ForbiddenError, 403),
    (StorageUnavailableError, 503),
]
NOT_MIGRATED = frozenset({"42P01", "42703"})  # PostgreSQL: undefined table, undefined column
INVALID = (InvalidInputError, InvalidWorkloadError, InvalidConfigError, UnknownTargetError, UnsupportedStrategyError)


def validation_body(msg: str, loc: tuple[str | int, ...] = ("body",), kind: str = "value_error") -> dict[str, Any]:
    return {"detail": [{"loc": list(loc), "msg": msg, "type": kind}]}


def _domain_handler(status: int):
    async def handler(_request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=status)

    return handler


async def _invalid_handler(_request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(validation_body(str(exc)), status_code=422)


def _loc_part(p: Any) -> str | int:
    return p if isinstance(p, int) and not isinstance(p, bool) else str(p)


async def _validation_handler(_request: Request, exc: RequestValidationError) -> JSONResponse:
    # Only loc/msg/type: pydantic's "input" and "ctx" may hold values that are not JSON (or are huge).
    issues = [{"loc": [_loc_part(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")),
               "type": str(e.get("type", ""))} for e in exc.errors()]
    return JSONResponse({"detail": issues}, status_code=422)


def _summary(exc: BaseException) -> str:
    """Error class and the driver's first message line: no SQL, no parameters."""
    orig = getattr(exc, "orig", None) or exc
    first = (str(orig).strip().splitlines() or [""])[0][:200]
    return f"{type(orig).__name__}: {first}"


def is_outage(exc: BaseException) -> bool:
    """A lost or unreachable database (retryable), as opposed to a statement the data refuses."""
    if isinstance(exc, (DisconnectionError, PoolTimeoutError, StorageUnavailableError)):
        return True
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated or isinstance(exc, InterfaceError):
            return True
        if getattr(exc.orig, "sqlstate", None) in NOT_MIGRATED:
            return True  # the schema is behind the code: `swtune db upgrade`, not the caller's fault
        if isinstance(exc, OperationalError):
            # psycopg raises OperationalError for connection failures; SQLite for its lock timeout and
            # I/O trouble. Both are outages. Its data errors are DataError/IntegrityError, not this.
            return True
    return False


async def _storage_handler(_request: Request, exc: Exception) -> JSONResponse:
    if is_outage(exc):
        log.warning("storage unavailable: %s", _summary(exc))
        return JSONResponse({"detail": "storage unavailable, retry later"}, status_code=503,
                            headers={"Retry-After": "1"})
    if isinstance(exc, IntegrityError):
        log.info("refused by a database constraint: %s", _summary(exc))
        return JSONResponse({"detail": "the request conflicts with stored data (a database constraint)"},
                            status_code=409)
    if isinstance(exc, DataError):
        log.info("refused by the database as out of range: %s", _summary(exc))
        return JSONResponse(validation_body("a value is out of range for the database (too large or too long)"),
                            status_code=422)
    log.error("database error: %s", _summary(exc))
    return JSONResponse({"detail": "internal error"}, status_code=500)


async def _overflow_handler(_request: Request, exc: Exception) -> JSONResponse:
    # sqlite3 raises a bare OverflowError for integers beyond 64 bits, before any SQL runs.
    return JSONResponse(validation_body(f"a number is out of range: {exc}"), status_code=422)


def install(app: FastAPI) -> None:
    for exc_type, status in STATUS:
        app.add_exception_handler(exc_type, _domain_handler(status))
    for invalid in INVALID:
        app.add_exception_handler(invalid, _invalid_handler)
    app.add_exception_handler(RequestValidationError, _validation_handler)  # type: ignore[arg-type]
    for storage in (DBAPIError, DisconnectionError, PoolTimeoutError):
        app.add_exception_handler(storage, _storage_handler)
    app.add_exception_handler(OverflowError, _overflow_handler)
