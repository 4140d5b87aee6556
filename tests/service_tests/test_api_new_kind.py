"""A kind of task the service has never heard of (tests/toy_kind.py, registered by one line) is
submitted over REST, driven with the one strategy it runs (any other is refused) and baseline first,
measured on the simulator from the job's workload JSON alone, and looked up, on both storage backends;
a workload of it that breaks its rules is a 422 that stores nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import toy_kind
from api_helpers import tune_through_the_driver
from sqlalchemy import func, select

from db.orm import TaskRow
from tuner.baseline import baseline_config
from tuner.space.factory import space_for
from tuner.task_kind import register, unregister
from tuner.workloads import workload_from_json

TRIALS = 10
SPEC = {"op": "test_axpy", "n": 1 << 18}


@pytest.fixture(autouse=True)
def axpy() -> Iterator[None]:
    register(toy_kind.KIND)
    yield
    unregister(toy_kind.KIND)


def test_a_new_kind_is_tuned_through_the_service(api) -> None:
    r = api.client.post("/api/v1/tasks", json={"workloads": [SPEC], "target": "sw26010", "trials": TRIALS,
                                               "strategy": "random"}, headers=api.headers("submit"))
    assert r.status_code == 201, r.text
    (task_id,), (key,) = r.json()["task_ids"], r.json()["workload_keys"]
    assert key == workload_from_json(SPEC).key
    tune_through_the_driver(api, seed=1, rounds=12)
    task = api.client.get(f"/api/v1/tasks/{task_id}", headers=api.headers("read")).json()
    assert task["trials_done"] == TRIALS, task
    best = api.client.get("/api/v1/schedules/best", params={"workload_key": key, "target": "sw26010"},
                          headers=api.headers("read"))
    assert best.status_code == 200, best.text
    space = space_for(workload_from_json(SPEC), "sw26010")
    assert space.seconds(best.json()["config"]) < space.seconds(baseline_config(space))


def test_a_strategy_the_kind_does_not_run_is_refused(api) -> None:
    """The toy kind runs random search only: asked for the model-guided search, the service says so (422)
    and stores nothing, where it used to run random search in its place."""
    with api.db.session() as s:
        before = s.scalar(select(func.count()).select_from(TaskRow))
    r = api.client.post("/api/v1/tasks", json={"workloads": [SPEC], "target": "sw26010", "trials": 4,
                                               "strategy": "model"}, headers=api.headers("submit"))
    assert r.status_code == 422 and "test_axpy task does not run the search strategy 'model'" in r.text, r.text
    with api.db.session() as s:
        assert s.scalar(select(func.count()).select_from(TaskRow)) == before


def test_a_workload_that_breaks_the_kinds_rules_is_refused(api) -> None:
    with api.db.session() as s:
        before = s.scalar(select(func.count()).select_from(TaskRow))
    r = api.client.post("/api/v1/tasks", json={"workloads": [{"op": "test_axpy", "n": -4}], "target": "sw26010",
                                               "trials": 4}, headers=api.headers("submit"))
    assert r.status_code == 422 and "n must be" in r.text, r.text
    with api.db.session() as s:
        assert s.scalar(select(func.count()).select_from(TaskRow)) == before
