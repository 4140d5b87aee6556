"""Compile-time lookup: the best measured config of a (workload key, target), single and batch.

The single lookup is the hot path (a compiler asks per operator): answers are cached in-process
for ``lookup_cache_seconds`` and the cache is dropped whenever this process stores a result, so a
single server answers from fresh data and replicas are at most that many seconds stale.
"""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from db import measurements as measurements_db
from db.errors import InvalidInputError, NotFoundError
from db.refs import target_name
from service.auth import Reader
from service.deps import AppState, Db
from service.schemas import BestBatchIn, BestBatchOut
from service.views import best_out

router = APIRouter(prefix="/api/v1/schedules", tags=["lookup"])


class LookupCache:
    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._entries: dict[tuple[str, str], tuple[float, int, bytes]] = {}

    def get(self, key: tuple[str, str]) -> tuple[int, bytes] | None:
        entry = self._entries.get(key)
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1], entry[2]

    def put(self, key: tuple[str, str], status: int, body: bytes) -> None:
        if self.ttl <= 0:
            return
        if len(self._entries) > 50_000:
            self._entries.clear()
        self._entries[key] = (time.monotonic() + self.ttl, status, body)

    def clear(self) -> None:
        self._entries.clear()


@router.get("/best", responses={404: {"description": "nothing tuned for this workload and target"}})
async def best(state: AppState, _: Reader, workload_key: str = Query(min_length=1, max_length=255),
               target: str = Query(min_length=1, max_length=64)) -> Response:
    """The best config for (workload key, target); 404 with the reason when nothing is tuned."""
    key = (workload_key, target)
    cached = state.lookup_cache.get(key)
    if cached is None:
        def lookup() -> tuple[int, bytes]:
            try:
                tname = target_name(target)
                with state.db.session() as s:
                    found = measurements_db.best_config(s, workload_key, tname)
                return 200, best_out(found).model_dump_json().encode()
            except NotFoundError as exc:
                return 404, json.dumps({"detail": str(exc)}).encode()
            except InvalidInputError as exc:
                return 422, json.dumps({"detail": str(exc)}).encode()

        cached = await run_in_threadpool(lookup)
        state.lookup_cache.put(key, *cached)
        result = {200: "found", 404: "not_found"}.get(cached[0], "invalid")
    else:
        result = "cached"
    state.metrics.lookups.labels(result).inc()
    return Response(cached[1], status_code=cached[0], media_type="application/json")


@router.post("/best/batch", response_model=BestBatchOut)
def best_batch(body: BestBatchIn, db: Db, _: Reader) -> BestBatchOut:
    """Best configs for many workloads (a whole model) at once; unknown ones are listed as missing."""
    tname = target_name(body.target)
    with db.session() as s:
        found = measurements_db.best_configs(s, body.workload_keys, tname)
    missing: list[Any] = [k for k in dict.fromkeys(body.workload_keys) if k not in found]
    return BestBatchOut(target=tname, found={k: best_out(v) for k, v in found.items()}, missing=missing)
