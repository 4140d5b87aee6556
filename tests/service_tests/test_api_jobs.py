"""The worker protocol over HTTP: lease (long-poll), heartbeat, release, post; 409, 413, 422."""

from __future__ import annotations

import json
import time

import pytest
from api_helpers import lease, make_api
from sqlalchemy import func, select
from storage_helpers import task_with_jobs
from wire import detail_text

from db.orm import JobRow, MeasurementRow


def n_measurements(api) -> int:
    with api.db.session() as s:
        return s.scalar(select(func.count()).select_from(MeasurementRow))


def post(api, job_id, lease_token, worker="w1", role="worker", **result):
    body = {"status": "ok", "times": [1e-3, 1.1e-3], "source": "simulator", **result,
            "lease_token": lease_token, "worker": worker}
    return api.client.post(f"/api/v1/jobs/{job_id}/result", json=body, headers=api.headers(role))


def test_lease_heartbeat_post_is_idempotent(api) -> None:
    task_with_jobs(api.db, 3)
    got = lease(api, max_jobs=2)
    assert len(got["jobs"]) == 2 and got["lease_seconds"] == 30
    job = got["jobs"][0]
    assert job["attempt"] == 1 and job["workload_key"] == "dense-m16-n64-k128-float32" and job["config"]
    hb = api.client.post("/api/v1/jobs/heartbeat", json={"lease_token": got["lease_token"], "worker": "w1"},
                         headers=api.headers("worker"))
    assert hb.status_code == 200 and sorted(hb.json()["job_ids"]) == sorted(j["id"] for j in got["jobs"])
    first = post(api, job["id"], got["lease_token"])
    again = post(api, job["id"], got["lease_token"])
    assert first.status_code == again.status_code == 200
    assert first.json()["outcome"] == "stored" and again.json()["outcome"] == "duplicate"
    assert first.json()["measurement_id"] == again.json()["measurement_id"]
    assert n_measurements(api) == 1


def test_batch_post_reports_each_outcome(api) -> None:
    task_with_jobs(api.db, 3)
    got = lease(api, max_jobs=3)
    ids = [j["id"] for j in got["jobs"]]
    results = [{"job_id": i, "status": "ok", "times": [2e-3], "source": "simulator"} for i in ids]
    body = {"lease_token": got["lease_token"], "worker": "w1", "results": results}
    r = api.client.post("/api/v1/jobs/results", json=body, headers=api.headers("worker"))
    assert [o["outcome"] for o in r.json()["results"]] == ["stored"] * 3
    body["results"].append({"job_id": 12345, "status": "timeout", "source": "simulator"})
    r = api.client.post("/api/v1/jobs/results", json=body, headers=api.headers("worker"))
    assert [o["outcome"] for o in r.json()["results"]] == ["duplicate"] * 3 + ["not_found"]
    assert n_measurements(api) == 3


def test_a_post_on_a_lost_lease_is_409(backend_url) -> None:
    with make_api(backend_url, lease_seconds=0.2) as api:
        task_with_jobs(api.db, 1)
        old = lease(api, worker="w1")
        time.sleep(0.5)
        new = lease(api, worker="w2")
        assert [j["id"] for j in new["jobs"]] == [old["jobs"][0]["id"]]
        r = post(api, old["jobs"][0]["id"], old["lease_token"], worker="w1")
        assert r.status_code == 409 and "lease lost" in detail_text(r)
        r = api.client.post("/api/v1/jobs/heartbeat", json={"lease_token": old["lease_token"], "worker": "w1"},
                            headers=api.headers("worker"))
        assert r.status_code == 409
        assert n_measurements(api) == 0


@pytest.mark.parametrize("times", ["[NaN]", "[Infinity]", "[-Infinity]", "[-0.001]", "[0]", '["fast"]'])
def test_bad_times_are_422_and_nothing_is_stored(api, times) -> None:
    task_with_jobs(api.db, 1)
    got = lease(api)
    job = got["jobs"][0]["id"]
    token = got["lease_token"]
    raw = f'{{"status": "ok", "source": "simulator", "lease_token": "{token}", "worker": "w1", "times": {times}}}'
    r = api.client.post(f"/api/v1/jobs/{job}/result", content=raw,
                        headers={**api.headers("worker"), "Content-Type": "application/json"})
    assert r.status_code == 422 and "times" in detail_text(r)
    assert n_measurements(api) == 0
    with api.db.session() as s:
        assert s.get(JobRow, job).state == "leased"


def test_an_ok_result_needs_a_time(api) -> None:
    task_with_jobs(api.db, 1)
    got = lease(api)
    r = post(api, got["jobs"][0]["id"], got["lease_token"], times=[])
    assert r.status_code == 422 and "at least one time" in detail_text(r)


def test_oversized_bodies_are_413(api) -> None:
    big = json.dumps({"workloads": [{"op": "dense", "m": 1, "n": 1, "k": 1, "pad": "x" * 70_000}],
                      "target": "sw26010", "trials": 1}).encode()
    r = api.client.post("/api/v1/tasks", content=big, headers={**api.headers("submit"),
                                                               "Content-Type": "application/json"})
    assert r.status_code == 413

    def chunks():  # no Content-Length: the limit is enforced while streaming
        for _ in range(10):
            yield b" " * 10_000

    r = api.client.post("/api/v1/tasks", content=chunks(), headers={**api.headers("submit"),
                                                                    "Content-Type": "application/json"})
    assert r.status_code == 413


def test_long_poll_waits_then_returns_empty(api) -> None:
    start = time.monotonic()
    got = lease(api, wait_seconds=1.0)
    assert got["jobs"] == [] and 0.9 <= time.monotonic() - start < 5


def test_release_hands_jobs_back(api) -> None:
    task_with_jobs(api.db, 2)
    got = lease(api, max_jobs=2)
    r = api.client.post("/api/v1/jobs/release", json={"lease_token": got["lease_token"], "worker": "w1"},
                        headers=api.headers("worker"))
    assert sorted(r.json()["released"]) == sorted(j["id"] for j in got["jobs"])
    again = lease(api, worker="w2", max_jobs=2)
    assert [j["attempt"] for j in again["jobs"]] == [1, 1]
    workers = api.client.get("/api/v1/workers", headers=api.headers("read")).json()
    assert {w["name"] for w in workers} == {"w1", "w2"}
