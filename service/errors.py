"""Domain exceptions mapped to HTTP status codes, once, for the whole app."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, OperationalError

from db.errors import (
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    StorageUnavailableError,
)
from tuner.errors import InvalidConfigError, InvalidWorkloadError, UnknownTargetError

log = logging.getLogger(__name__)

STATUS = [
    (NotFoundError, 404),
    (ConflictError, 409),  # includes LeaseLostError
    (ForbiddenError, 403),
    (InvalidInputError, 422),
    (InvalidWorkloadError, 422),
    (InvalidConfigError, 422),
    (UnknownTargetError, 422),
    (StorageUnavailableError, 503),
]


def _domain_handler(status: int):  # type: ignore[no-untyped-def]
    async def handler(_request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=status)

    return handler


async def _validation_handler(_request: Request, exc: RequestValidationError) -> JSONResponse:
    # One readable sentence first ("body.trials: Input should be ..."), the full list after it.
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()))
        parts.append(f"{loc}: {err.get('msg')}")
    errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")} for e in exc.errors()]
    return JSONResponse({"detail": "invalid request: " + "; ".join(parts), "errors": errors}, status_code=422)


async def _storage_handler(_request: Request, exc: Exception) -> JSONResponse:
    log.warning("storage unavailable: %s", exc)
    return JSONResponse({"detail": "storage unavailable, retry later"}, status_code=503,
                        headers={"Retry-After": "1"})


def install(app: FastAPI) -> None:
    for exc_type, status in STATUS:
        app.add_exception_handler(exc_type, _domain_handler(status))
    app.add_exception_handler(RequestValidationError, _validation_handler)  # type: ignore[arg-type]
    # Connection loss, lock timeouts ("database is locked"), a server shutting down: retryable.
    app.add_exception_handler(OperationalError, _storage_handler)
    app.add_exception_handler(DBAPIError, _storage_handler)
