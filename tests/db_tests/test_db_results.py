"""Posting results: idempotent, lease-checked, validated before anything is stored; best config."""

from __future__ import annotations

import math
import random

import pytest
from sqlalchemy import func, select
from storage_helpers import TARGET, WORKLOAD, task_with_jobs

from db import jobs as jobs_db
from db import measurements as measurements_db
from db import results as results_db
from db.domain import ResultIn
from db.engine import Database
from db.errors import ForbiddenError, InvalidInputError, LeaseLostError, NotFoundError
from db.orm import JobRow, MeasurementRow


def lease(db: Database, worker: str = "w1", n: int = 10, seconds: float = 30.0, token_id: int | None = None):
    with db.session() as s:
        return jobs_db.lease(s, target=TARGET, worker=worker, max_jobs=n, lease_seconds=seconds, token_id=token_id)


def post(db: Database, token: str, worker: str, *results: ResultIn, token_id: int | None = None):
    with db.session() as s:
        return results_db.post_results(s, lease_token=token, worker=worker, results=list(results), token_id=token_id)


def n_measurements(db: Database) -> int:
    with db.session() as s:
        return s.scalar(select(func.count()).select_from(MeasurementRow))


def ok(job_id: int, t: float = 1e-3) -> ResultIn:
    return ResultIn(job_id=job_id, status="ok", times=(t, t * 1.01), source="simulator")


def test_a_retried_post_is_stored_once(database: Database) -> None:
    task_with_jobs(database, 1)
    got = lease(database)
    job = got.jobs[0].id
    (first,) = post(database, got.token, "w1", ok(job))
    (again,) = post(database, got.token, "w1", ok(job))
    assert first.outcome == "stored" and again.outcome == "duplicate"
    assert first.measurement_id == again.measurement_id is not None
    assert n_measurements(database) == 1
    with database.session() as s:
        assert s.get(JobRow, job).state == "done"


def test_a_lost_lease_is_refused_and_stores_nothing(database: Database) -> None:
    task_with_jobs(database, 1)
    old = lease(database, "w1", seconds=0.05)
    import time

    time.sleep(0.3)
    new = lease(database, "w2")  # reclaims the expired job and leases it to w2
    assert [j.id for j in new.jobs] == [old.jobs[0].id]
    with database.session() as s, pytest.raises(LeaseLostError):
        results_db.post_result(s, lease_token=old.token, worker="w1", result=ok(old.jobs[0].id))
    assert n_measurements(database) == 0
    assert [o.outcome for o in post(database, new.token, "w2", ok(new.jobs[0].id))] == ["stored"]


def test_only_the_worker_that_leased_a_job_may_post_it(database: Database) -> None:
    task_with_jobs(database, 2)
    a = lease(database, "wa", n=1, token_id=1)
    b = lease(database, "wb", n=1, token_id=2)
    job_a = a.jobs[0].id
    # b's own lease token does not hold a's job: 409; a's token presented by b: 403
    assert post(database, b.token, "wb", ok(job_a), token_id=2)[0].outcome == "lease_lost"
    assert post(database, a.token, "wb", ok(job_a), token_id=2)[0].outcome == "forbidden"
    assert post(database, a.token, "wa", ok(job_a), token_id=2)[0].outcome == "forbidden"
    with database.session() as s, pytest.raises(ForbiddenError):
        results_db.post_result(s, lease_token=a.token, worker="wb", result=ok(job_a), token_id=2)
    assert n_measurements(database) == 0
    assert post(database, a.token, "wa", ok(job_a), token_id=1)[0].outcome == "stored"


def test_unknown_job(database: Database) -> None:
    with database.session() as s, pytest.raises(NotFoundError):
        results_db.post_result(s, lease_token="x" * 16, worker="w", result=ok(999))


@pytest.mark.parametrize("times", [(math.nan,), (math.inf,), (-1e-3,), (0.0,), (1e-3, math.nan), ()])
def test_invalid_times_are_refused_and_nothing_is_stored(database: Database, times: tuple[float, ...]) -> None:
    task_with_jobs(database, 2)
    got = lease(database)
    good, bad = got.jobs[0].id, got.jobs[1].id
    with pytest.raises(InvalidInputError):
        post(database, got.token, "w1", ok(good), ResultIn(job_id=bad, status="ok", times=times, source="simulator"))
    assert n_measurements(database) == 0
    with database.session() as s:
        assert {s.get(JobRow, j).state for j in (good, bad)} == {"leased"}


def test_failed_configs_are_stored_but_never_best(database: Database) -> None:
    task_with_jobs(database, 2)
    got = lease(database)
    fail = ResultIn(job_id=got.jobs[0].id, status="ldm_overflow", error="LDM 70000 B", source="simulator")
    outcomes = post(database, got.token, "w1", fail, ok(got.jobs[1].id, 5e-3))
    assert [o.outcome for o in outcomes] == ["stored", "stored"]
    with database.session() as s:
        best = measurements_db.best_config(s, WORKLOAD.key, TARGET)
    assert best.mean_time == pytest.approx(5e-3 * 1.005)
    assert best.config == got.jobs[1].config


def test_best_config_is_the_minimum_over_the_measurements_table(database: Database) -> None:
    task_with_jobs(database, 40)
    rng = random.Random(7)
    got = lease(database, n=40)
    results = []
    for j in got.jobs:
        if rng.random() < 0.2:
            results.append(ResultIn(job_id=j.id, status="compile_error", error="x", source="simulator"))
        else:
            t = rng.uniform(1e-4, 1e-2)
            results.append(ResultIn(job_id=j.id, status="ok", times=(t, t * rng.uniform(0.9, 1.1)), source="simulator"))
    post(database, got.token, "w1", *results)
    with database.session() as s:
        best = measurements_db.best_config(s, WORKLOAD.key, TARGET, count=True)
        rows = s.execute(select(MeasurementRow.mean_time, MeasurementRow.config)
                         .where(MeasurementRow.status == "ok")).all()
        batch = measurements_db.best_configs(s, [WORKLOAD.key, "dense-m1-n1-k1-float32"], TARGET)
    t_min, c_min = min(rows, key=lambda r: r[0])
    assert best.mean_time == t_min and best.config == c_min
    assert best.n_measured == 40
    assert list(batch) == [WORKLOAD.key] and batch[WORKLOAD.key].config_hash == best.config_hash


def test_best_config_says_why_nothing_is_found(database: Database) -> None:
    with database.session() as s, pytest.raises(NotFoundError, match="never been tuned"):
        measurements_db.best_config(s, WORKLOAD.key, TARGET)
    task_with_jobs(database, 1)
    got = lease(database)
    post(database, got.token, "w1", ResultIn(job_id=got.jobs[0].id, status="timeout", source="simulator"))
    with database.session() as s, pytest.raises(NotFoundError, match="no successful measurement"):
        measurements_db.best_config(s, WORKLOAD.key, TARGET)
    with database.session() as s, pytest.raises(InvalidInputError):
        measurements_db.best_config(s, WORKLOAD.key, "nope")
