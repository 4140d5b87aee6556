"""Liveness, readiness (database reachable and migrated) and Prometheus metrics."""

from __future__ import annotations

from api_helpers import TestClient
from backends import fresh_url

from service.app import create_app
from service.settings import Settings


def test_health_ready_metrics(api) -> None:
    assert api.client.get("/health").json() == {"status": "ok"}
    ready = api.client.get("/ready")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    api.client.get("/api/v1/tasks", headers=api.headers("read"))
    text = api.client.get("/metrics").text
    assert 'swtune_http_requests_total{method="GET",route="/api/v1/tasks",status="200"} 1.0' in text
    assert 'swtune_jobs{state="pending"} 0.0' in text


def test_not_ready_before_migrations(backend_kind, tmp_path) -> None:
    with fresh_url(backend_kind, tmp_path, upgrade=False) as url:
        app = create_app(Settings(database_url=url, driver_enabled=False))
        with TestClient(app) as client:
            r = client.get("/ready")
            assert r.status_code == 503 and "swtune db upgrade" in r.json()["detail"]
            # a storage failure on an API route is a 503, not a 500
            r = client.get("/api/v1/tasks", headers={"Authorization": "Bearer x"})
            assert r.status_code == 503
        app.state.db.dispose()
