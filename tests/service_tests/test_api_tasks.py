"""Submitting, reading and cancelling tuning tasks; bad input is 422 and changes nothing."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from wire import detail_text

from db.orm import TaskRow, WorkloadRow
from service.driver import TuningDriver
from service.settings import Settings

DENSE = {"op": "dense", "m": 1, "n": 128, "k": 256}
CONV = {"op": "conv2d", "n": 1, "c": 16, "h": 14, "w": 14, "k": 32, "r": 3, "s": 3, "padding": 1}


def submit(api, body, role="submit"):
    return api.client.post("/api/v1/tasks", json=body, headers=api.headers(role))


def test_submit_many_workloads_and_read_them(api) -> None:
    r = submit(api, {"workloads": [DENSE, CONV], "labels": ["fc", "conv"], "target": "sw26010", "trials": 6,
                     "strategy": "random"})
    assert r.status_code == 201, r.text
    body = r.json()
    assert len(body["task_ids"]) == 2 and body["workload_keys"][0] == "dense-m1-n128-k256-float32"
    listed = api.client.get("/api/v1/tasks", params={"batch": body["batch"]}, headers=api.headers("read")).json()
    assert [t["id"] for t in listed] == body["task_ids"]
    task = api.client.get(f"/api/v1/tasks/{body['task_ids'][1]}", headers=api.headers("read")).json()
    assert task["state"] == "active" and task["label"] == "conv" and task["trial_budget"] == 6
    assert task["trials_done"] == 0 and task["best_time"] is None and task["curve"] == []
    assert task["workload"]["op"] == "conv2d" and task["submitter"] == "test-submit"


def test_a_capped_listing_shows_the_newest_tasks_oldest_first(api) -> None:
    ids = [submit(api, {"workloads": [{**DENSE, "n": 64 * (i + 1)}], "target": "sw26010", "trials": 2,
                        "strategy": "random"}).json()["task_ids"][0] for i in range(4)]
    listed = api.client.get("/api/v1/tasks", params={"limit": 2}, headers=api.headers("read")).json()
    assert [t["id"] for t in listed] == ids[2:]


def test_default_strategy_is_model_when_registered(api) -> None:
    r = submit(api, {"workloads": [DENSE], "target": "sw26010", "trials": 2})
    assert r.json()["strategy"] in ("model", "random")


def count(api, table) -> int:
    with api.db.session() as s:
        return s.scalar(select(func.count()).select_from(table))


@pytest.mark.parametrize("body, message", [
    ({"workloads": [DENSE, {"op": "dense", "m": 1, "n": -3, "k": 4}], "target": "sw26010", "trials": 4},
     "workloads[1]: invalid workload: n must be positive"),
    ({"workloads": [DENSE, {"op": "conv9"}], "target": "sw26010", "trials": 4}, "unknown op"),
    ({"workloads": [DENSE], "target": "sw9", "trials": 4}, "unknown target"),
    ({"workloads": [DENSE], "target": "sw26010", "trials": 4, "strategy": "magic"}, "unknown search strategy"),
    ({"workloads": [DENSE], "target": "sw26010", "trials": 0}, "body.trials"),
    ({"workloads": [], "target": "sw26010", "trials": 3}, "body.workloads"),
    ({"workloads": [DENSE], "labels": ["a", "b"], "target": "sw26010", "trials": 3}, "labels"),
])
def test_malformed_submissions_are_422_and_change_nothing(api, body, message) -> None:
    r = submit(api, body)
    assert r.status_code == 422
    assert message in detail_text(r)
    assert count(api, TaskRow) == 0 and count(api, WorkloadRow) == 0


def test_unknown_task_is_404(api) -> None:
    r = api.client.get("/api/v1/tasks/999", headers=api.headers("read"))
    assert r.status_code == 404 and "999" in detail_text(r)


def test_listing_by_state_takes_the_stored_strings(api) -> None:
    ids = submit(api, {"workloads": [DENSE, CONV], "target": "sw26010", "trials": 2, "strategy": "random"}).json()[
        "task_ids"]
    api.client.post(f"/api/v1/tasks/{ids[0]}/cancel", headers=api.headers("submit"))
    for state, want in (("cancelled", ids[:1]), ("active", ids[1:]), ("done", [])):
        listed = api.client.get("/api/v1/tasks", params={"state": state}, headers=api.headers("read"))
        assert [(t["id"], t["state"]) for t in listed.json()] == [(i, state) for i in want], listed.text
    r = api.client.get("/api/v1/tasks", params={"state": "ACTIVE"}, headers=api.headers("read"))
    assert r.status_code == 422, r.text


def test_cancel_drops_pending_jobs(api) -> None:
    tid = submit(api, {"workloads": [DENSE], "target": "sw26010", "trials": 10, "strategy": "random"}).json()[
        "task_ids"][0]
    TuningDriver(api.db, Settings(database_url=api.db.url, queue_depth=4)).run_once()
    assert api.client.get(f"/api/v1/tasks/{tid}", headers=api.headers("read")).json()["pending"] == 4
    r = api.client.post(f"/api/v1/tasks/{tid}/cancel", headers=api.headers("submit"))
    assert r.status_code == 200 and r.json()["state"] == "cancelled" and r.json()["pending"] == 0
    assert api.client.post(f"/api/v1/tasks/{tid}/cancel", headers=api.headers("submit")).status_code == 200
    assert api.client.post("/api/v1/tasks/999/cancel", headers=api.headers("submit")).status_code == 404
