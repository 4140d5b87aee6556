"""Prometheus metrics: one registry per app, request timing middleware, domain counters, and
gauges read at scrape time (jobs by state, driver counters)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from db import jobs as jobs_db
from db.states import JobState


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("swtune_http_requests", "HTTP requests", ["method", "route", "status"],
                                registry=self.registry)
        self.latency = Histogram("swtune_http_request_seconds", "HTTP request latency", ["method", "route"],
                                 buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30),
                                 registry=self.registry)
        self.jobs_leased = Counter("swtune_jobs_leased", "jobs handed to workers", registry=self.registry)
        self.results = Counter("swtune_results", "posted results by outcome", ["outcome"], registry=self.registry)
        self.lookups = Counter("swtune_lookups", "best-config lookups", ["result"], registry=self.registry)

    def add_collector(self, collector: Collector) -> None:
        self.registry.register(collector)


class StateCollector(Collector):
    """Jobs per state and the driver's counters, read when Prometheus scrapes."""

    def __init__(self, db: Any, driver_stats: Callable[[], Any | None]) -> None:
        self.db = db
        self.driver_stats = driver_stats

    def collect(self) -> Iterable[Any]:
        jobs = GaugeMetricFamily("swtune_jobs", "measure jobs by state", labels=["state"])
        try:
            with self.db.session() as s:
                counts = jobs_db.count_jobs(s)
            for state in JobState:
                jobs.add_metric([state.value], counts.get(state, 0))
        except Exception:  # noqa: BLE001 - a scrape must not fail because the database is away
            pass
        yield jobs
        stats = self.driver_stats()
        if stats is not None:
            for name in ("rounds", "enqueued", "conflicts", "lock_skips", "finished", "reclaimed", "errors"):
                family = CounterMetricFamily(f"swtune_driver_{name}", f"tuning driver: {name}")
                family.add_metric([], getattr(stats, name))
                yield family


class MetricsMiddleware:
    """Times every HTTP request, labelled by route template (not raw path: bounded cardinality)."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = {"code": 500}

        async def send_wrapper(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            method = scope.get("method", "")
            self.metrics.requests.labels(method, path, str(status["code"])).inc()
            self.metrics.latency.labels(method, path).observe(time.perf_counter() - start)
