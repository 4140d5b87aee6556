"""Helpers for the API tests: the app on a database with one token per role, and worker calls."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

with warnings.catch_warnings():  # starlette nags about httpx2 on import; the tests do not care
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from db import tokens as tokens_db
from db.engine import Database
from service.app import create_app
from service.settings import Settings


@dataclass
class Api:
    client: TestClient
    db: Database
    tokens: dict[str, str]
    app: Any

    def headers(self, role: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[role]}"}


@contextlib.contextmanager
def make_api(url: str, **overrides: Any) -> Iterator[Api]:
    options: dict[str, Any] = dict(database_url=url, auth_enabled=True, driver_enabled=False, lease_seconds=30,
                                   max_body_bytes=64 * 1024, max_import_bytes=4 * 1024 * 1024,
                                   lookup_cache_seconds=0)
    settings = Settings(**{**options, **overrides})
    db = Database(url)
    tokens = {}
    with db.session() as s:
        for role in ("read", "submit", "worker", "admin"):
            tokens[role] = tokens_db.create_token(s, role, f"test-{role}")[1]
        tokens["worker2"] = tokens_db.create_token(s, "worker", "test-worker2")[1]
    app = create_app(settings, db=db)
    with TestClient(app) as client:
        yield Api(client, db, tokens, app)


def lease(api: Api, worker: str = "w1", role: str = "worker", **body: Any) -> dict[str, Any]:
    r = api.client.post("/api/v1/jobs/lease", json={"worker": worker, "target": "sw26010", **body},
                        headers=api.headers(role))
    assert r.status_code == 200, r.text
    return r.json()


def measure_leased(api: Api, backend: Any, max_jobs: int = 8) -> list[dict[str, Any]]:
    """One worker round: lease up to ``max_jobs``, measure them with ``backend`` from the job's workload
    JSON alone (what a worker rebuilds), post the results. Returns the jobs ([] when none were left)."""
    from tuner.workloads import workload_from_json

    got = lease(api, max_jobs=max_jobs)
    if not got["jobs"]:
        return []
    workload = workload_from_json(got["jobs"][0]["workload"])
    measured = backend.measure(workload, "sw26010", [j["config"] for j in got["jobs"]])
    results = [{"job_id": j["id"], "status": m.status.value, "times": list(m.times), "source": "simulator"}
               for j, m in zip(got["jobs"], measured)]
    body = {"lease_token": got["lease_token"], "worker": "w1", "results": results}
    r = api.client.post("/api/v1/jobs/results", json=body, headers=api.headers("worker"))
    assert r.status_code == 200, r.text
    return got["jobs"]


def tune_through_the_driver(api: Api, seed: int, rounds: int) -> None:
    """The service's driver and one simulated worker (``seed``), round after round until no job is left
    (``rounds`` at most); asserts the kind's baseline config is among the first jobs leased, so the best
    reported is never slower than the baseline."""
    from service.driver import TuningDriver
    from tuner.baseline import baseline_config
    from tuner.measure.simulator import Simulator
    from tuner.space.factory import space_for
    from tuner.workloads import workload_from_json

    driver, backend = TuningDriver(api.db, Settings(database_url=api.db.url, queue_depth=4)), Simulator(seed=seed)
    for i in range(rounds):
        driver.run_once()
        jobs = measure_leased(api, backend)
        if not jobs:
            return
        if i == 0:
            wl = workload_from_json(jobs[0]["workload"])
            assert baseline_config(space_for(wl, "sw26010")) in [j["config"] for j in jobs]
