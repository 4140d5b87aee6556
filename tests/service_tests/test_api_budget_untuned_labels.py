"""Issue 26 over the API, on every storage backend: a model's budget is named ``budget`` (``trials`` is
its deprecated old name) and a thin one is warned about; a task that ended without any successful
measurement says so (``untuned_reason``) in the task, submission and dashboard views; a CPE kernel
task's workload has a short label (operator, shapes, dtype), its script staying in the spec."""

from __future__ import annotations

from typing import Any

import pytest
from api_helpers import Api, lease
from cpe_samples import POOL_SCRIPT  # noqa: E402
from sqlalchemy import func, select

from db.orm import SubmissionRow
from service.driver import TuningDriver

TARGET = "sw26010"
FC1 = {"op": "dense", "m": 16, "n": 64, "k": 128}
FC2 = {"op": "dense", "m": 32, "n": 64, "k": 64}
FC3 = {"op": "dense", "m": 8, "n": 32, "k": 32}


def post(api: Api, **body: Any) -> Any:
    layers = body.pop("layers", [{"name": "fc1", "workload": FC1, "calls": 3}, {"name": "fc2", "workload": FC2}])
    return api.client.post("/api/v1/submissions", headers=api.headers("submit"), json={
        "model": "mlp", "target": TARGET, "strategy": "random", "layers": layers, **body})


def submissions(api: Api) -> int:
    with api.db.session() as s:
        return s.scalar(select(func.count()).select_from(SubmissionRow)) or 0


def test_a_model_budget_is_budget_and_trials_is_its_deprecated_name(api: Api) -> None:
    new = post(api, budget=24)
    assert new.status_code == 201, new.text
    assert (new.json()["trial_budget"], new.json()["warnings"]) == (24, [])
    old = post(api, trials=24)  # what older clients send: still the whole model's budget
    assert old.status_code == 201, old.text
    assert old.json()["trial_budget"] == 24
    assert old.json()["warnings"] == ["'trials' of a submission is deprecated: it is the whole model's budget; "
                                      "send 'budget'"]
    for bad in ({}, {"budget": 24, "trials": 24}):
        r = post(api, **bad)
        assert r.status_code == 422 and "exactly one" in r.text, r.text
    assert submissions(api) == 2
    schema = api.client.get("/openapi.json").json()["components"]["schemas"]["SubmissionCreate"]["properties"]
    assert "whole model" in schema["budget"]["description"] and schema["trials"].get("deprecated") is True


@pytest.mark.parametrize(("budget", "warned"), [(7, True), (8, False)])
def test_a_budget_too_small_for_a_baseline_and_a_few_trials_per_task_is_warned_about(
        api: Api, budget: int, warned: bool) -> None:
    created = post(api, budget=budget).json()
    expected = [f"a budget of {budget} trials cannot give each of the 2 tasks its baseline plus 3 trials (that "
                "needs 8): some tasks may end untuned"]
    assert created["warnings"] == (expected if warned else [])


def _post_results(api: Api, got: dict[str, Any], status_of: dict[int, str]) -> None:
    results = [{"job_id": j["id"], "status": status_of[j["task_id"]], "source": "simulator",
                **({"times": [1e-5]} if status_of[j["task_id"]] == "ok" else {"error": "boom"})}
               for j in got["jobs"]]
    r = api.client.post("/api/v1/jobs/results", headers=api.headers("worker"),
                        json={"lease_token": got["lease_token"], "worker": "w1", "results": results})
    assert r.status_code == 200 and {o["outcome"] for o in r.json()["results"]} == {"stored"}, r.text


def test_a_task_that_ended_without_a_measurement_says_so(api: Api) -> None:
    # a budget of 2 for 3 tasks: the two heaviest get one trial each (one succeeds, one fails), the last none
    layers = [{"name": "fc1", "workload": FC1, "calls": 8}, {"name": "fc2", "workload": FC2, "calls": 4},
              {"name": "fc3", "workload": FC3}]
    sub = post(api, budget=2, per_round=1, layers=layers).json()
    fc1, fc2, fc3 = (t["task_id"] for t in sub["tasks"])
    driver = TuningDriver(api.db, api.app.state.settings)
    driver.run_once()
    got = lease(api, worker="w1", max_jobs=8)
    assert sorted(j["task_id"] for j in got["jobs"]) == [fc1, fc2]
    _post_results(api, got, {fc1: "ok", fc2: "compile_error"})
    for _ in range(3):
        driver.run_once()
    read = api.headers("read")
    tasks = {t["id"]: t for t in api.client.get("/api/v1/tasks", params={"batch": sub["id"]}, headers=read).json()}
    assert {i: (t["state"], t["untuned_reason"]) for i, t in tasks.items()} == {
        fc1: ("done", None),
        fc2: ("done", "untuned: none of its 1 trials succeeded"),
        fc3: ("done", "untuned: no trial was run (the budget gave it none)")}
    assert api.client.get(f"/api/v1/tasks/{fc3}", headers=read).json()["untuned_reason"] == tasks[fc3][
        "untuned_reason"]
    report = api.client.get(f"/api/v1/submissions/{sub['id']}", headers=read).json()
    assert [(layer["task_id"], layer["untuned_reason"]) for layer in report["layers"]] == [
        (i, tasks[i]["untuned_reason"]) for i in (fc1, fc2, fc3)]
    assert report["untuned"] == 2


def test_an_active_task_without_results_is_not_called_untuned(api: Api) -> None:
    sub = post(api, budget=24).json()
    assert [t["untuned_reason"] for t in sub["tasks"]] == [None, None]
    cancelled = api.client.post(f"/api/v1/tasks/{sub['tasks'][0]['task_id']}/cancel", headers=api.headers("submit"))
    assert cancelled.json()["state"] == "cancelled"
    assert cancelled.json()["untuned_reason"] == "untuned: cancelled before any trial"


def test_a_cpe_kernel_task_has_a_short_label_and_keeps_its_script(api: Api) -> None:
    pytest.importorskip("tvm")
    pool = {"op": "cpe_kernel", "name": "nn_max_pool2d", "script": POOL_SCRIPT}
    sub = post(api, budget=8, layers=[{"name": "conv", "workload": FC1}, {"name": "pool", "workload": pool}])
    assert sub.status_code == 201, sub.text
    label = "nn.max_pool2d 1x8x16x16 -> 1x8x8x8 float32"
    dense_key = "dense-m16-n64-k128-float32"
    assert [t["workload_label"] for t in sub.json()["tasks"]] == [dense_key, label]
    read = api.headers("read")
    tasks = api.client.get("/api/v1/tasks", params={"batch": sub.json()["id"]}, headers=read).json()
    assert [t["workload_label"] for t in tasks] == [dense_key, label]
    assert tasks[1]["workload_key"].startswith("cpe-nn_max_pool2d-") and "R.nn.max_pool2d" in tasks[1]["workload"][
        "script"]
    report = api.client.get(f"/api/v1/submissions/{sub.json()['id']}", headers=read).json()
    assert [layer["workload_label"] for layer in report["layers"]] == [dense_key, label]
