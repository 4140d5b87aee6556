"""The one measurement validation at the storage layer (db.validation), on every backend: the store
(post_results), the import (import_lines, as `swtune db import` calls it) and the task model refuse
what the HTTP routes refuse, so no door bypasses it (issue #13)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select
from storage_helpers import TARGET, WORKLOAD, configs, task_with_jobs

from db import jobs as jobs_db
from db import records as records_db
from db import results as results_db
from db import tasks as tasks_db
from db.domain import ResultIn
from db.engine import Database
from db.errors import InvalidInputError, NotFoundError
from db.orm import MeasurementRow
from db.validation import check_measurement, mean


def n_measurements(db: Database) -> int:
    with db.session() as s:
        return s.scalar(select(func.count()).select_from(MeasurementRow))


def post(db: Database, *, backend: str = "", **result) -> None:
    task_with_jobs(db, 1)
    with db.session() as s:
        got = jobs_db.lease(s, target=TARGET, worker="w1", max_jobs=1, lease_seconds=30, backend=backend)
    with db.session() as s:
        results_db.post_results(s, lease_token=got.token, worker="w1",
                                results=[ResultIn(job_id=got.jobs[0].id, **result)])


@pytest.mark.parametrize("result", [
    {"status": "ok", "times": (1e-300,), "source": "simulator"},    # #10 below the physical floor
    {"status": "ok", "times": (1e308, 1e308), "source": "simulator"},  # #3 above the ceiling
    {"status": "ok", "times": (True,), "source": "simulator"},        # #10 a boolean is not a time
    {"status": "ok", "times": (), "source": "simulator"},             # ok needs a time
    {"status": "ok", "times": (1e-3,), "source": "simulator", "details": {"a": [[[[[[[[[[1]]]]]]]]]]}},  # #4 depth
])
def test_the_store_refuses_impossible_results(database: Database, result) -> None:
    with pytest.raises(InvalidInputError):
        post(database, **result)
    assert n_measurements(database) == 0


def test_the_store_refuses_a_source_the_workers_backend_cannot_produce(database: Database) -> None:
    task_with_jobs(database, 1)
    with database.session() as s:
        got = jobs_db.lease(s, target=TARGET, worker="w1", max_jobs=1, lease_seconds=30, backend="simulator")
    for source, refused in (("hardware", True), ("simulator", False)):
        result = ResultIn(job_id=got.jobs[0].id, status="ok", times=(1e-3,), source=source)
        with database.session() as s:
            if refused:
                with pytest.raises(InvalidInputError, match="simulator worker"):
                    results_db.post_results(s, lease_token=got.token, worker="w1", results=[result])
            else:
                results_db.post_results(s, lease_token=got.token, worker="w1", results=[result])
    assert n_measurements(database) == 1


def test_cli_import_refuses_configs_outside_the_space(database: Database) -> None:
    config = configs(1)[0]
    rec = {"version": 1, "workload": WORKLOAD.to_json(), "target": TARGET, "status": "ok", "times": [1e-3],
           "source": "simulator"}
    for bad in ({"bogus": 1}, {**config, "tile_m": 3}, {**config, "simd": True}):
        with pytest.raises(InvalidInputError, match="line 1"), database.session() as s:
            records_db.import_lines(s, [json.dumps({**rec, "config": bad})])
    with database.session() as s:
        stats = records_db.import_lines(s, [json.dumps({**rec, "config": config}).encode()])
    assert stats.imported == 1 and n_measurements(database) == 1


def test_a_record_from_before_a_knob_existed_imports_with_the_knobs_default(database: Database) -> None:
    config = configs(1)[0]
    old = {k: v for k, v in config.items() if k not in ("db_c", "acc")}  # exported before those knobs
    rec = {"version": 1, "workload": WORKLOAD.to_json(), "target": TARGET, "status": "ok", "times": [1e-3],
           "source": "simulator", "config": old}
    with database.session() as s:
        stats = records_db.import_lines(s, [json.dumps(rec).encode()])
    assert stats.imported == 1
    with database.session() as s:
        stored = s.scalars(select(MeasurementRow)).one()
    assert stored.config["db_c"] == 0 and stored.config["acc"] == "ldm"


def test_mean_cannot_overflow_and_measurements_come_out_normalised() -> None:
    assert mean((1e308, 1e308, 1e308)) == pytest.approx(1e308)
    m = check_measurement(WORKLOAD, TARGET, config=configs(1)[0], status="ok", times=[1, 2e-3], source="simulator")
    assert m.times == (1.0, 2e-3) and m.mean_time == pytest.approx(0.501) and m.details == {}


def test_task_ids_beyond_the_column_are_not_found_not_a_database_error(database: Database) -> None:
    with database.session() as s:
        for task_id in (2**31, 2**63, 2**70):
            with pytest.raises(NotFoundError):
                tasks_db.get_task(s, task_id)
            with pytest.raises(NotFoundError):
                tasks_db.cancel_task(s, task_id)


def test_only_the_owner_or_an_admin_cancels(database: Database) -> None:
    from db.errors import ForbiddenError

    with database.session() as s:
        task = tasks_db.create_tasks(s, [WORKLOAD], TARGET, 10, "random", submitter_token_id=7)[0]
    with database.session() as s, pytest.raises(ForbiddenError):
        tasks_db.cancel_task(s, task.id, token_id=8, admin=False)
    with database.session() as s:
        assert tasks_db.cancel_task(s, task.id, token_id=7, admin=False).state == "cancelled"
