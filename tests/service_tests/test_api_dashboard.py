"""The dashboard's read-only views: a task's trials and per-worker tally, workers' leases, tasks
grouped by submission with the baseline comparison, workload keys, and the static UI itself."""

from __future__ import annotations

import math

from api_helpers import Api, lease
from storage_helpers import TARGET, WORKLOAD, task_with_jobs


def _post(api: Api, lease_token: str, worker: str, results: list[dict]) -> None:
    body = {"lease_token": lease_token, "worker": worker, "results": results}
    r = api.client.post("/api/v1/jobs/results", json=body, headers=api.headers("worker"))
    assert r.status_code == 200, r.text
    assert {o["outcome"] for o in r.json()["results"]} == {"stored"}


def test_task_trials_in_completion_order_with_failures_and_workers(api: Api) -> None:
    task_id = task_with_jobs(api.db, 5)
    a = lease(api, worker="wa", max_jobs=3)
    b = lease(api, worker="wb", max_jobs=2)
    ja, jb = [j["id"] for j in a["jobs"]], [j["id"] for j in b["jobs"]]
    _post(api, a["lease_token"], "wa", [{"job_id": ja[0], "status": "ok", "times": [2e-3], "source": "simulator"},
                                        {"job_id": ja[1], "status": "ldm_overflow", "error": "tile too big",
                                         "source": "simulator"}])
    _post(api, b["lease_token"], "wb", [{"job_id": jb[0], "status": "ok", "times": [1e-3, 1e-3],
                                         "source": "simulator"}])
    r = api.client.get(f"/api/v1/tasks/{task_id}/trials", headers=api.headers("read"))
    assert r.status_code == 200, r.text
    body = r.json()
    trials = body["trials"]
    assert [t["trial"] for t in trials] == [1, 2, 3]
    assert {t["job_id"] for t in trials} == {ja[0], ja[1], jb[0]}
    by_job = {t["job_id"]: t for t in trials}
    assert by_job[ja[1]]["status"] == "ldm_overflow" and by_job[ja[1]]["mean_time"] is None
    assert by_job[ja[1]]["error"] == "tile too big" and by_job[ja[1]]["gflops"] is None
    assert math.isclose(by_job[jb[0]]["gflops"], WORKLOAD.flops / 1e-3 / 1e9)
    assert body["flops"] == WORKLOAD.flops
    tally = {w["worker"]: w for w in body["workers"]}
    assert (tally["wa"]["trials"], tally["wa"]["ok"], tally["wa"]["failed"]) == (2, 1, 1)
    assert tally["wa"]["best_time"] == 2e-3 and tally["wb"]["best_time"] == 1e-3
    # the curve of the task endpoint and the trials agree on the best
    task = api.client.get(f"/api/v1/tasks/{task_id}", headers=api.headers("read")).json()
    assert task["best_time"] == min(t["mean_time"] for t in trials if t["mean_time"])
    assert task["trials_done"] == len(trials)
    assert api.client.get("/api/v1/tasks/999999/trials", headers=api.headers("read")).status_code == 404
    too_big = api.client.get(f"/api/v1/tasks/{2**40}/trials", headers=api.headers("read"))
    assert too_big.status_code == 422  # refused before it reaches a 32-bit id column


def test_leases_per_worker(api: Api) -> None:
    task_id = task_with_jobs(api.db, 4)
    lease(api, worker="wa", max_jobs=3)
    lease(api, worker="wb", max_jobs=1)
    r = api.client.get("/api/v1/workers/leases", headers=api.headers("read"))
    assert r.status_code == 200, r.text
    leases = {l["worker"]: l for l in r.json()["leases"]}
    assert leases["wa"]["jobs"] == 3 and leases["wb"]["jobs"] == 1
    assert leases["wa"]["task_ids"] == [task_id]
    assert leases["wa"]["next_expiry"] > r.json()["database_time"]  # leases last 30 s


def test_submissions_group_tasks_and_compare_with_the_baseline(api: Api) -> None:
    workloads = [{"op": "dense", "m": 16, "n": 64, "k": 128}, {"op": "dense", "m": 32, "n": 64, "k": 64}]
    r = api.client.post("/api/v1/tasks", json={"workloads": workloads, "labels": ["fc1", "fc2"], "target": TARGET,
                                               "trials": 10, "strategy": "random"}, headers=api.headers("submit"))
    assert r.status_code == 201, r.text
    batch, ids = r.json()["batch"], r.json()["task_ids"]
    other = api.client.post("/api/v1/tasks", json={"workloads": workloads[:1], "target": TARGET, "trials": 5,
                                                   "strategy": "random"}, headers=api.headers("submit")).json()
    listed = api.client.get("/api/v1/submissions", headers=api.headers("read")).json()
    assert [s["batch"] for s in listed] == [other["batch"], batch]  # newest first
    assert listed[1]["labels"] == ["fc1", "fc2"] and listed[1]["tasks"] == 2 and listed[1]["trial_budget"] == 20
    assert listed[1]["states"] == {"active": 2}

    # measure one config of fc1 only: fc2 stays untuned and counts at its baseline
    from storage_helpers import configs

    from db import jobs as jobs_db
    from db import tasks as tasks_db

    with api.db.session() as s:
        spec = next(t for t in tasks_db.active_tasks(s) if t.id == ids[0])
        jobs_db.enqueue(s, spec.id, spec.workload_id, spec.target_id, configs(1), 3)
    got = lease(api, worker="wa")
    _post(api, got["lease_token"], "wa", [{"job_id": got["jobs"][0]["id"], "status": "ok", "times": [1e-5],
                                           "source": "simulator"}])
    r = api.client.get(f"/api/v1/submissions/{batch}", headers=api.headers("read"))
    assert r.status_code == 200, r.text
    rep = r.json()
    layers = {l["label"]: l for l in rep["layers"]}
    assert layers["fc1"]["tuned_time"] == 1e-5 and layers["fc2"]["tuned_time"] is None
    assert layers["fc1"]["baseline_time"] > 0 and layers["fc2"]["baseline_time"] > 0
    assert math.isclose(layers["fc1"]["speedup"], layers["fc1"]["baseline_time"] / 1e-5)
    assert rep["untuned"] == 1 and rep["trials_done"] == 1
    assert math.isclose(rep["baseline_total"], layers["fc1"]["baseline_time"] + layers["fc2"]["baseline_time"])
    assert math.isclose(rep["tuned_total"], 1e-5 + layers["fc2"]["baseline_time"])
    assert math.isclose(rep["speedup"], rep["baseline_total"] / rep["tuned_total"])
    assert api.client.get("/api/v1/submissions/nope", headers=api.headers("read")).status_code == 404


def test_workload_key_and_targets(api: Api) -> None:
    r = api.client.get("/api/v1/workloads/key", params={"workload": '{"op": "dense", "m": 16, "n": 64, "k": 128}'},
                       headers=api.headers("read"))
    assert r.status_code == 200 and r.json()["key"] == WORKLOAD.key and r.json()["flops"] == WORKLOAD.flops
    bad = api.client.get("/api/v1/workloads/key", params={"workload": '{"op": "dense", "m": -1}'},
                         headers=api.headers("read"))
    assert bad.status_code == 422 and "invalid workload" in bad.text
    not_json = api.client.get("/api/v1/workloads/key", params={"workload": "{oops"}, headers=api.headers("read"))
    assert not_json.status_code == 422
    bad_target = api.client.get("/api/v1/workloads/key", params={"workload": '{"op": "dense", "m": 1, "n": 2, "k": 3}',
                                                                "target": "x86"}, headers=api.headers("read"))
    assert bad_target.status_code == 422
    names = [t["name"] for t in api.client.get("/api/v1/targets", headers=api.headers("read")).json()]
    assert TARGET in names


def test_a_read_token_is_enough_and_none_is_refused(api: Api) -> None:
    paths = ["/api/v1/submissions", "/api/v1/workers/leases", "/api/v1/targets"]
    for path in paths:
        assert api.client.get(path).status_code == 401
        assert api.client.get(path, headers=api.headers("read")).status_code == 200
        assert api.client.get(path, headers=api.headers("worker")).status_code == 403


def test_the_ui_is_served_without_a_token_and_needs_no_cdn(api: Api) -> None:
    root = api.client.get("/", follow_redirects=False)
    assert root.status_code in (302, 307) and root.headers["location"] == "/ui/"
    page = api.client.get("/ui/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    for asset in ("app.js", "curve.js", "style.css"):
        r = api.client.get(f"/ui/{asset}")
        assert r.status_code == 200 and len(r.text) > 500
        assert "http://" not in r.text.replace("http://www.w3.org/2000/svg", "") and "https://" not in r.text
    assert "https://" not in page.text and "http://" not in page.text

