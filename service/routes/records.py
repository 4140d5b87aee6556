"""Records export (JSON lines, streamed) and import (idempotent) of the tuning log."""

from __future__ import annotations

from typing import Iterator

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from db import records as records_db
from db.errors import InvalidInputError
from service.auth import Admin, Reader
from service.deps import AppState, Db
from service.schemas import ImportOut

router = APIRouter(prefix="/api/v1/records", tags=["records"])


@router.get("/export", response_class=StreamingResponse)
def export(db: Db, _: Reader, target: str | None = Query(None), workload_key: str | None = Query(None)
           ) -> StreamingResponse:
    def lines() -> Iterator[str]:
        with db.session() as s:
            yield from records_db.export_lines(s, workload_key=workload_key, target=target)

    return StreamingResponse(lines(), media_type="application/x-ndjson")


@router.post("/import", response_model=ImportOut)
async def import_records(request: Request, state: AppState, _: Admin) -> ImportOut:
    """Body: JSON lines as produced by export. Every line is checked first; records already
    present are skipped, so importing a file twice changes nothing."""
    raw = bytearray()
    async for chunk in request.stream():  # the body size middleware caps this
        raw.extend(chunk)
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise InvalidInputError("records must be UTF-8 JSON lines") from None

    def run() -> ImportOut:
        with state.db.session() as s:
            stats = records_db.import_lines(s, text.splitlines())
        return ImportOut(imported=stats.imported, skipped=stats.skipped)

    out = await run_in_threadpool(run)
    if out.imported:
        state.lookup_cache.clear()
        if state.driver is not None:
            state.driver.wake()
    return out
