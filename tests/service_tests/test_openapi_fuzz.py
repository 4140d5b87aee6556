"""Schemathesis over the OpenAPI schema against a live uvicorn server, admin token, fixed seed:
every operation of the service's API, no 5xx, no response that contradicts the schema.

The short CI form of ``benchmarks/fuzz.py`` (which runs the long one): 50 s a backend, SQLite
always and PostgreSQL when configured (tests/backends.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from backends import fresh_url

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import fuzz

SERVICE_OPERATIONS = {
    "GET /health", "GET /ready", "GET /metrics",
    "POST /api/v1/tasks", "GET /api/v1/tasks", "GET /api/v1/tasks/{task_id}", "POST /api/v1/tasks/{task_id}/cancel",
    "POST /api/v1/jobs/lease", "POST /api/v1/jobs/heartbeat", "POST /api/v1/jobs/release",
    "POST /api/v1/jobs/{job_id}/result", "POST /api/v1/jobs/results", "GET /api/v1/workers",
    "GET /api/v1/schedules/best", "POST /api/v1/schedules/best/batch",
    "GET /api/v1/records/export", "POST /api/v1/records/import",
    # the dashboard's read-only views
    "GET /api/v1/tasks/{task_id}/trials", "GET /api/v1/workers/leases", "GET /api/v1/submissions",
    "GET /api/v1/submissions/{batch}", "GET /api/v1/workloads/key", "GET /api/v1/targets",
    "POST /api/v1/submissions",
    # simulator profiles
    "GET /api/v1/profiles/{target}", "POST /api/v1/profiles", "POST /api/v1/profiles/{target}/{version}/activate",
}


@pytest.mark.slow
def test_schemathesis_finds_no_server_error_and_no_schema_violation(backend_kind: str, tmp_path: Path) -> None:
    with fresh_url(backend_kind, tmp_path) as url:
        summary = fuzz.fuzz_url(url, seed_value=1, max_examples=30, max_time=50, workers=1)
    tail = summary.get("st_output_tail", "")
    assert summary["errors"] == 0, tail
    assert summary["server_errors"] == 0, tail
    assert summary["schema_violations"] == 0, tail
    assert summary["other_failures"] == 0, summary["failed_checks"]
    assert SERVICE_OPERATIONS <= set(summary["operations"]), SERVICE_OPERATIONS - set(summary["operations"])
    assert summary["cases"] >= 1000
