"""Model submissions over the API: POST /api/v1/submissions (one budget for a model), bad input refused
with nothing written, auth, and the task and dashboard views carrying the model and call counts."""

from __future__ import annotations

import math
from typing import Any

import pytest
from api_helpers import Api, lease
from sqlalchemy import func, select

from db.orm import JobRow, SubmissionRow, TaskRow, WorkloadRow
from service.driver import TuningDriver
from tuner.baseline import baseline_time
from tuner.workloads import workload_from_json

TARGET = "sw26010"
FC1 = {"op": "dense", "m": 16, "n": 64, "k": 128}
FC2 = {"op": "dense", "m": 32, "n": 64, "k": 64}


def body(**kw: Any) -> dict[str, Any]:
    return {"model": "mlp", "target": TARGET, "trials": 24, "per_round": 4, "strategy": "random",
            "layers": [{"name": "fc1", "workload": FC1, "calls": 3}, {"name": "fc2", "workload": FC2},
                       {"name": "fc1b", "workload": FC1}], **kw}


def rows(api: Api) -> tuple[int, ...]:
    with api.db.session() as s:
        return tuple(s.scalar(select(func.count()).select_from(t)) or 0
                     for t in (SubmissionRow, TaskRow, WorkloadRow, JobRow))


def submit(api: Api, **kw: Any) -> dict[str, Any]:
    r = api.client.post("/api/v1/submissions", json=body(**kw), headers=api.headers("submit"))
    assert r.status_code == 201, r.text
    return r.json()


def test_a_model_is_one_submission_with_one_budget_and_call_counts(api: Api) -> None:
    sub = submit(api)
    assert (sub["model"], sub["target"], sub["trial_budget"], sub["state"], sub["trials_done"]) == (
        "mlp", TARGET, 24, "active", 0)
    assert [(t["layer_names"], t["call_count"], t["trial_budget"]) for t in sub["tasks"]] == [
        (["fc1", "fc1b"], 4, 0), (["fc2"], 1, 0)]
    # the task routes carry the model and the call counts
    task = api.client.get(f"/api/v1/tasks/{sub['tasks'][0]['task_id']}", headers=api.headers("read")).json()
    assert (task["model"], task["call_count"], task["layer_names"], task["batch"]) == (
        "mlp", 4, ["fc1", "fc1b"], sub["id"])
    listed = api.client.get("/api/v1/tasks", params={"batch": sub["id"]}, headers=api.headers("read")).json()
    assert [(t["model"], t["call_count"]) for t in listed] == [("mlp", 4), ("mlp", 1)]
    # tasks submitted one per workload: no model, called once
    plain = api.client.post("/api/v1/tasks", json={"workloads": [FC2], "target": TARGET, "trials": 5},
                            headers=api.headers("submit")).json()
    old = api.client.get(f"/api/v1/tasks/{plain['task_ids'][0]}", headers=api.headers("read")).json()
    assert (old["model"], old["call_count"], old["layer_names"]) == (None, 1, [])


def test_the_dashboard_view_multiplies_by_call_counts(api: Api) -> None:
    sub = submit(api)
    driver = TuningDriver(api.db, api.app.state.settings)
    driver.run_once()  # weighs the tasks and grants the first round
    got = lease(api, worker="wa", max_jobs=4)
    assert got["jobs"] and {j["task_id"] for j in got["jobs"]} == {sub["tasks"][0]["task_id"]}  # heaviest first
    r = api.client.post("/api/v1/jobs/results", headers=api.headers("worker"), json={
        "lease_token": got["lease_token"], "worker": "wa",
        "results": [{"job_id": j["id"], "status": "ok", "times": [1e-6 * (i + 1)], "source": "simulator"}
                    for i, j in enumerate(got["jobs"])]})
    assert r.status_code == 200, r.text
    rep = api.client.get(f"/api/v1/submissions/{sub['id']}", headers=api.headers("read")).json()
    assert (rep["model"], rep["state"], rep["trial_budget"], rep["calls"], rep["trials_done"]) == (
        "mlp", "active", 24, 5, len(got["jobs"]))
    fc1, fc2 = rep["layers"]
    assert (fc1["call_count"], fc1["layer_names"], fc2["call_count"]) == (4, ["fc1", "fc1b"], 1)
    base1, base2 = (baseline_time(workload_from_json(w), TARGET) for w in (FC1, FC2))
    assert math.isclose(fc1["baseline_time"], base1) and math.isclose(fc2["baseline_time"], base2)
    assert fc1["tuned_time"] == 1e-6 and fc2["tuned_time"] is None
    assert math.isclose(rep["baseline_total"], 4 * base1 + base2)
    assert math.isclose(rep["tuned_total"], 4 * 1e-6 + base2)
    assert math.isclose(rep["speedup"], rep["baseline_total"] / rep["tuned_total"])
    assert math.isclose(fc1["share"] + fc2["share"], 1.0)
    listed = api.client.get("/api/v1/submissions", headers=api.headers("read")).json()
    assert [(s["batch"], s["model"], s["trial_budget"], s["calls"]) for s in listed] == [(sub["id"], "mlp", 24, 5)]


@pytest.mark.parametrize("bad", [
    {"layers": [{"name": "fc1", "workload": FC1}, {"name": "fc2", "workload": {"op": "dense", "m": 0, "n": 1}}]},
    {"layers": [{"name": "fc1", "workload": FC1}, {"name": "fc2", "workload": {"op": "dense", "m": 1, "n": 1,
                                                                              "k": 2**25}}]},
    {"layers": [{"name": "fc1", "workload": FC1, "calls": 0}]},
    {"layers": [{"name": "fc1", "workload": FC1, "calls": "2"}]},
    {"layers": [{"name": "", "workload": FC1}]},
    {"layers": []},
    {"model": "m" * 129},
    {"trials": 0},
    {"trials": 24.0},
    {"per_round": 513},
    {"early_stop": 0},
    {"target": "x86"},
    {"strategy": "no-such-strategy"},
    {"surprise": 1},
])
def test_bad_input_is_refused_and_writes_nothing(api: Api, bad: dict[str, Any]) -> None:
    before = rows(api)
    r = api.client.post("/api/v1/submissions", json=body(**bad), headers=api.headers("submit"))
    assert r.status_code == 422, r.text
    assert isinstance(r.json()["detail"], list) and r.json()["detail"]
    assert rows(api) == before


def test_submitting_needs_a_submit_token(api: Api) -> None:
    assert api.client.post("/api/v1/submissions", json=body()).status_code == 401
    assert api.client.post("/api/v1/submissions", json=body(), headers=api.headers("read")).status_code == 403
    assert api.client.post("/api/v1/submissions", json=body(), headers=api.headers("worker")).status_code == 403
    assert rows(api)[0] == 0
    assert api.client.post("/api/v1/submissions", json=body(), headers=api.headers("admin")).status_code == 201


def _follow(service: Any, sid: str, until: Any, timeout: float = 180.0) -> dict[str, Any]:
    import time

    deadline = time.monotonic() + timeout
    with service.client() as api:
        while True:
            report = api.submission(sid)
            assert report["trials_done"] <= report["trial_budget"]
            if until(report):
                return report
            assert time.monotonic() < deadline, report
            time.sleep(0.3)


@pytest.mark.slow
def test_a_live_service_spends_one_budget_and_continues_it_after_a_restart(backend_url: str) -> None:
    """The embedded service (API and its driver thread): a model submitted through the client gets 16
    trials measured by the test over HTTP, the server stops, and a new one with two simulator worker
    processes spends the rest of the one budget, from what the database holds."""
    from service.embedded import embedded_service
    from tuner.measure.simulator import Simulator

    big = {"op": "dense", "m": 1, "n": 1024, "k": 2048}
    sim = Simulator()
    with embedded_service(backend_url) as service, service.client() as api:
        sub = api.submit_model("mlp", [{"name": "fc1", "workload": big, "calls": 2},
                                       {"name": "fc2", "workload": FC2}], TARGET, 64, per_round=8, strategy="random")
        measured = 0
        while measured < 16:  # this test is the only worker for now: 16 trials, then the server stops
            got = api.lease("t", TARGET, max_jobs=4, wait_seconds=5)
            results = []
            for job in got["jobs"]:
                (m,) = sim.measure(workload_from_json(job["workload"]), TARGET, [job["config"]])
                results.append({"job_id": job["id"], "status": m.status, "times": list(m.times),
                                "source": m.source})
            if results:
                api.post_results(got["lease_token"], "t", results)
            measured += len(results)
    # the server (and its driver) stopped mid-submission; a new one continues from the database
    from db import submissions as submissions_db
    from db.engine import Database

    db = Database(backend_url)
    with db.session() as s:
        stopped = submissions_db.get_submission(s, sub["id"])
    db.dispose()
    assert stopped.state == "active" and 16 <= stopped.trials_done < 64, stopped
    with embedded_service(backend_url, workers=2, migrate=False) as service:
        report = _follow(service, sub["id"], lambda r: r["state"] != "active")
        with service.client() as api:
            tasks = api.tasks(batch=sub["id"])
    assert report["state"] == "done" and report["trials_done"] == 64
    fc1, fc2 = report["layers"]
    assert (fc1["call_count"], fc2["call_count"]) == (2, 1)
    assert fc1["trials_done"] + fc2["trials_done"] == 64 and fc1["trials_done"] > fc2["trials_done"]
    assert math.isclose(report["baseline_total"], 2 * fc1["baseline_time"] + fc2["baseline_time"])
    assert [t["state"] for t in tasks] == ["done", "done"]
