"""Bearer tokens and roles: 401 without a valid token, 403 for a role that may not act."""

from __future__ import annotations

from storage_helpers import task_with_jobs

from db import tokens as tokens_db

TASK = {"workloads": [{"op": "dense", "m": 1, "n": 64, "k": 64}], "target": "sw26010", "trials": 4,
        "strategy": "random"}


def test_missing_or_wrong_tokens_are_401(api) -> None:
    r = api.client.get("/api/v1/tasks")
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert "missing bearer token" in r.json()["detail"]
    assert api.client.get("/api/v1/tasks", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert api.client.get("/api/v1/tasks", headers={"Authorization": "Basic abc"}).status_code == 401


def test_revoked_token_is_401(api) -> None:
    with api.db.session() as s:
        info, token = tokens_db.create_token(s, "read", "soon-revoked")
        tokens_db.revoke_token(s, info.id)
    assert api.client.get("/api/v1/tasks", headers={"Authorization": f"Bearer {token}"}).status_code == 401


def test_roles(api) -> None:
    c = api.client
    assert c.post("/api/v1/tasks", json=TASK, headers=api.headers("worker")).status_code == 403
    assert c.post("/api/v1/tasks", json=TASK, headers=api.headers("read")).status_code == 403
    created = c.post("/api/v1/tasks", json=TASK, headers=api.headers("submit"))
    assert created.status_code == 201
    tid = created.json()["task_ids"][0]
    assert c.get(f"/api/v1/tasks/{tid}", headers=api.headers("read")).status_code == 200
    assert c.get(f"/api/v1/tasks/{tid}", headers=api.headers("worker")).status_code == 403
    lease = {"worker": "w1", "target": "sw26010"}
    assert c.post("/api/v1/jobs/lease", json=lease, headers=api.headers("read")).status_code == 403
    assert c.post("/api/v1/jobs/lease", json=lease, headers=api.headers("submit")).status_code == 403
    assert c.post("/api/v1/jobs/lease", json=lease, headers=api.headers("worker")).status_code == 200
    assert c.post("/api/v1/records/import", content=b"", headers=api.headers("read")).status_code == 403
    assert c.post("/api/v1/records/import", content=b"", headers=api.headers("admin")).status_code == 200
    r = c.post("/api/v1/tasks", json=TASK, headers=api.headers("worker"))
    assert "may not submit" in r.json()["detail"]


def test_a_worker_may_only_post_results_for_jobs_it_leased(api) -> None:
    task_with_jobs(api.db, 2)
    c = api.client
    a = c.post("/api/v1/jobs/lease", json={"worker": "wa", "target": "sw26010", "max_jobs": 1},
               headers=api.headers("worker")).json()
    b = c.post("/api/v1/jobs/lease", json={"worker": "wb", "target": "sw26010", "max_jobs": 1},
               headers=api.headers("worker2")).json()
    job_a = a["jobs"][0]["id"]
    result = {"status": "ok", "times": [1e-3], "source": "simulator"}
    # b with its own lease token: that lease does not hold a's job
    r = c.post(f"/api/v1/jobs/{job_a}/result", json={**result, "lease_token": b["lease_token"], "worker": "wb"},
               headers=api.headers("worker2"))
    assert r.status_code == 409
    # b presenting a's lease token (leaked) under its own bearer token
    r = c.post(f"/api/v1/jobs/{job_a}/result", json={**result, "lease_token": a["lease_token"], "worker": "wa"},
               headers=api.headers("worker2"))
    assert r.status_code == 403
    r = c.post(f"/api/v1/jobs/{job_a}/result", json={**result, "lease_token": a["lease_token"], "worker": "wa"},
               headers=api.headers("worker"))
    assert r.status_code == 200 and r.json()["outcome"] == "stored"
    # heartbeats and releases are checked the same way
    r = c.post("/api/v1/jobs/heartbeat", json={"lease_token": b["lease_token"], "worker": "wa"},
               headers=api.headers("worker"))
    assert r.status_code == 403
