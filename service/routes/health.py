"""Liveness (/health), readiness (/ready: database reachable and migrated) and /metrics."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool

from db import migrate
from service.deps import AppState
from service.schemas import HealthOut, ReadyOut

router = APIRouter(tags=["health"])


@router.get("/health", response_model=HealthOut)
async def health() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/ready", response_model=ReadyOut,
            responses={503: {"model": ReadyOut, "description": "database unreachable or not migrated"}})
async def ready(state: AppState) -> JSONResponse:
    def check() -> tuple[int, dict[str, str]]:
        try:
            state.db.ping()
            current = migrate.current_revision(state.db.engine)
        except Exception as exc:  # noqa: BLE001 - any failure means not ready
            return 503, {"status": "unavailable", "detail": f"database unreachable: {type(exc).__name__}"}
        head = migrate.head_revision()
        if current != head:
            return 503, {"status": "unavailable",
                         "detail": f"database at revision {current}, code expects {head}: run `swtune db upgrade`"}
        return 200, {"status": "ready", "revision": str(current)}

    status, body = await run_in_threadpool(check)
    return JSONResponse(body, status_code=status)


@router.get("/metrics", response_class=Response, responses={
    200: {"content": {"text/plain": {"schema": {"type": "string"}}},
          "description": "Prometheus text exposition format"}})
async def metrics(state: AppState) -> Response:
    data = await run_in_threadpool(generate_latest, state.metrics.registry)
    return Response(data, media_type=CONTENT_TYPE_LATEST)
