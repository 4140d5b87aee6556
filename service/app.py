"""The FastAPI app factory: settings, database, auth, metrics, body limit, routes, and the tuning
driver started by the lifespan (when enabled)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from db.engine import Database
from service import errors
from service.auth import TokenCache
from service.driver import TuningDriver
from service.intervals import IntervalCache
from service.limits import BodySizeLimit, LongPolls, RateLimiter
from service.metrics import Metrics, MetricsMiddleware, StateCollector
from service.notify import JobSignal
from service.routes import dashboard, health, jobs, profiles, records, schedules, submissions, tasks
from service.routes.schedules import LookupCache
from service.settings import Settings

log = logging.getLogger(__name__)


class _TaskSet(set[asyncio.Task[Any]]):
    """Strong references to fire-and-forget asyncio tasks (the loop keeps only weak ones)."""

    def add(self, task: asyncio.Task[Any]) -> None:
        super().add(task)
        task.add_done_callback(self.discard)


def create_app(settings: Settings | None = None, *, db: Database | None = None) -> FastAPI:
    settings = settings or Settings()
    db = db or Database(settings.database_url)
    signal = JobSignal()
    driver = TuningDriver(db, settings, on_enqueue=signal.notify) if settings.driver_enabled else None

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        signal.bind(asyncio.get_running_loop())
        if driver is not None:
            driver.start()
        try:
            yield
        finally:
            if driver is not None:
                await asyncio.to_thread(driver.stop)
            db.dispose()

    app = FastAPI(title="swtune", version="1", lifespan=lifespan,
                  description="Autotuning service for deep-learning operators on Sunway processors")
    metrics = Metrics()
    metrics.add_collector(StateCollector(db, lambda: driver.stats if driver is not None else None))
    state: Any = app.state
    state.settings = settings
    state.db = db
    state.driver = driver
    state.job_signal = signal
    state.metrics = metrics
    state.token_cache = TokenCache(settings.token_cache_seconds, settings.invalid_token_cache_seconds)
    state.rate_limiter = RateLimiter(settings.rate_limit_per_second, settings.rate_limit_burst)
    state.long_polls = LongPolls(settings.max_long_polls)
    state.lookup_cache = LookupCache(settings.lookup_cache_seconds)
    state.intervals = IntervalCache()
    state.background = _TaskSet()

    errors.install(app)
    for module in (health, tasks, submissions, jobs, schedules, records, profiles):
        app.include_router(module.router)
    dashboard.install(app)  # the web UI at /ui and its read-only views
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes,
                       overrides={"/api/v1/records/import": settings.max_import_bytes})
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app
