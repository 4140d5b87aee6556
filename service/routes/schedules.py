"""Compile-time lookup: the best measured config of a (workload key, target), single and batch.

The single lookup is the hot path (a compiler asks per operator): answers are cached in-process
for ``lookup_cache_seconds`` and the cache is dropped whenever this process stores a result, so a
single server answers from fresh data and replicas are at most that many seconds stale.
"""

from __future__ import annotations

import asyncio
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
from service.errors import AUTH, BODY, ErrorOut, responses, validation_body
from service.schemas import BestBatchIn, BestBatchOut, BestOut
from service.views import best_out

router = APIRouter(prefix="/api/v1/schedules", tags=["lookup"], responses=responses(*AUTH))


class LookupCache:
    """Answers (status, JSON bytes) per (workload key, target).

    Fresh for ``ttl`` seconds; then, up to ``STALE_FACTOR * ttl``, the old answer is still served
    while one background refresh runs, so a busy key never makes a request wait on the database.
    ``clear()`` (a result was stored) drops everything and bumps a generation number: a refresh
    that read the database before the clear cannot put its outdated answer back."""

    STALE_FACTOR = 4

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self.generation = 0
        self._entries: dict[tuple[str, str], tuple[float, int, bytes]] = {}
        self._refreshing: set[tuple[str, str]] = set()

    def get(self, key: tuple[str, str]) -> tuple[int, bytes, bool] | None:
        """(status, body, fresh) or None when there is nothing servable."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        age = time.monotonic() - entry[0]
        if age > self.STALE_FACTOR * self.ttl:
            return None
        return entry[1], entry[2], age <= self.ttl

    def put(self, key: tuple[str, str], status: int, body: bytes, generation: int) -> None:
        if self.ttl <= 0 or generation != self.generation:
            return
        if len(self._entries) > 50_000:
            self._entries.clear()
        self._entries[key] = (time.monotonic(), status, body)

    def clear(self) -> None:
        self.generation += 1
        self._entries.clear()

    def start_refresh(self, key: tuple[str, str]) -> bool:
        if key in self._refreshing:
            return False
        self._refreshing.add(key)
        return True

    def end_refresh(self, key: tuple[str, str]) -> None:
        self._refreshing.discard(key)


def _lookup(state: Any, workload_key: str, target: str) -> tuple[int, bytes]:
    try:
        tname = target_name(target)
        with state.db.session() as s:
            found = measurements_db.best_config(s, workload_key, tname)
            interval = state.intervals.interval(s, found)
        return 200, best_out(found, interval).model_dump_json().encode()
    except NotFoundError as exc:
        return 404, json.dumps({"detail": str(exc)}).encode()
    except InvalidInputError as exc:
        return 422, json.dumps(validation_body(str(exc), ("query", "target"))).encode()


async def _refresh(state: Any, key: tuple[str, str]) -> tuple[int, bytes]:
    cache: LookupCache = state.lookup_cache
    generation = cache.generation
    answer = await run_in_threadpool(_lookup, state, *key)
    cache.put(key, *answer, generation)
    return answer


async def _refresh_in_background(state: Any, key: tuple[str, str]) -> None:
    try:
        await _refresh(state, key)
    except Exception:  # noqa: BLE001 - the next request retries synchronously
        pass
    finally:
        state.lookup_cache.end_refresh(key)


@router.get("/best", response_model=BestOut, responses={
    **responses(422), 404: {"model": ErrorOut, "description": "nothing tuned for this workload and target"}})
async def best(state: AppState, _: Reader, workload_key: str = Query(min_length=1, max_length=255),
               target: str = Query(min_length=1, max_length=64)) -> Response:
    """The best config for (workload key, target); 404 with the reason when nothing is tuned."""
    key = (workload_key, target)
    cache: LookupCache = state.lookup_cache
    cached = cache.get(key)
    if cached is None:
        status, body = await _refresh(state, key)
        result = {200: "found", 404: "not_found"}.get(status, "invalid")
    else:
        status, body, fresh = cached
        if not fresh and cache.start_refresh(key):
            state.background.add(asyncio.create_task(_refresh_in_background(state, key)))
        result = "cached"
    state.metrics.lookups.labels(result).inc()
    return Response(body, status_code=status, media_type="application/json")


@router.post("/best/batch", response_model=BestBatchOut, responses=responses(*BODY))
def best_batch(body: BestBatchIn, db: Db, _: Reader) -> BestBatchOut:
    """Best configs for many workloads (a whole model) at once; unknown ones are listed as missing."""
    tname = target_name(body.target)
    with db.session() as s:
        found = measurements_db.best_configs(s, body.workload_keys, tname)
    missing: list[Any] = [k for k in dict.fromkeys(body.workload_keys) if k not in found]
    return BestBatchOut(target=tname, found={k: best_out(v) for k, v in found.items()}, missing=missing)
