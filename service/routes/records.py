"""Records export (JSON lines, streamed) and import (streamed, idempotent) of the tuning log."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from db import records as records_db
from service.auth import Admin, Reader
from service.deps import AppState, Db
from service.errors import AUTH, BODY, responses
from service.schemas import ImportOut

router = APIRouter(prefix="/api/v1/records", tags=["records"], responses=responses(*AUTH))


@router.get("/export", response_class=StreamingResponse, responses={
    200: {"content": {"application/x-ndjson": {"schema": {"type": "string"}}},
          "description": "one JSON record per line"}, **responses(422)})
def export(db: Db, _: Reader, target: str | None = Query(None, min_length=1, max_length=64),
           workload_key: str | None = Query(None, min_length=1, max_length=255)) -> StreamingResponse:
    """Every matching measurement as JSON lines; the arguments are checked before the first byte
    (an unknown target is a 422, not a cut stream)."""
    tname = records_db.check_export_args(target=target, workload_key=workload_key)

    def lines() -> Iterator[str]:
        with db.session() as s:
            yield from records_db.export_lines(s, workload_key=workload_key, target=tname)

    # the query runs and its first line is read here, so a database error is an error response, not a
    # stream cut after its headers were sent
    stream = lines()
    first = next(stream, None)
    return StreamingResponse(stream if first is None else itertools.chain([first], stream),
                             media_type="application/x-ndjson")


@router.post("/import", response_model=ImportOut, responses=responses(*BODY), openapi_extra={
    "requestBody": {"required": False, "description": "JSON lines as produced by export (empty: nothing)",
                    "content": {"application/x-ndjson": {"schema": {"type": "string"}}}}})
async def import_records(request: Request, state: AppState, _: Admin) -> ImportOut:
    """Body: JSON lines as produced by export. Lines are parsed and checked as they arrive and spooled
    (memory stays bounded; the body is never held whole); nothing is written unless every line is valid;
    records already present are skipped, so importing a file twice changes nothing."""
    importer = records_db.Importer()
    try:
        async for chunk in request.stream():  # the body size middleware caps this
            importer.feed(chunk)
        importer.finish()
    except BaseException:
        importer.close()
        raise

    def run() -> ImportOut:
        with state.db.session() as s:
            stats = importer.write(s)
        return ImportOut(imported=stats.imported, skipped=stats.skipped)

    out = await run_in_threadpool(run)
    if out.imported:
        state.lookup_cache.clear()
        if state.driver is not None:
            state.driver.wake()
    return out
