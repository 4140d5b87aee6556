"""The tuning driver against the storage contract: budgets, restarts, and concurrent drivers."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import func, select
from storage_helpers import TARGET

from db import jobs as jobs_db
from db import results as results_db
from db import tasks as tasks_db
from db.domain import ResultIn
from db.engine import Database
from db.orm import JobRow, MeasurementRow
from service.driver import TuningDriver
from service.settings import Settings
from tuner.measure.simulator import Simulator
from tuner.workloads import Conv2d, Dense

WORKLOADS = [Dense(1, 256, 512, "float32"), Conv2d(1, 16, 14, 14, 32, 3, 3, pad_h=1, pad_w=1)]
SIM = Simulator()


def submit(db: Database, trials: int, strategy: str = "random") -> list[int]:
    with db.session() as s:
        return [t.id for t in tasks_db.create_tasks(s, WORKLOADS, TARGET, trials, strategy)]


def measure_some(db: Database, worker: str = "w", n: int = 8) -> int:
    """Lease up to n jobs, simulate them, post the results; returns how many were posted."""
    with db.session() as s:
        got = jobs_db.lease(s, target=TARGET, worker=worker, max_jobs=n, lease_seconds=30)
    results = []
    for job in got.jobs:
        (m,) = SIM.measure(job.workload, TARGET, [job.config])
        results.append(ResultIn(job_id=job.id, status=m.status, times=m.times, error=m.error, source=m.source))
    with db.session() as s:
        results_db.post_results(s, lease_token=got.token, worker=worker, results=results)
    return len(results)


def check_log(db: Database, task_ids: list[int], trials: int) -> None:
    with db.session() as s:
        for tid in task_ids:
            task = tasks_db.get_task(s, tid)
            assert task.state == "done", task
            assert task.trials_done == trials and task.queued == 0
        per_config = s.execute(select(JobRow.workload_id, JobRow.config_hash, func.count())
                               .group_by(JobRow.workload_id, JobRow.config_hash)).all()
        assert all(n == 1 for *_, n in per_config)
        n_jobs = s.scalar(select(func.count()).select_from(JobRow))
        n_meas = s.scalar(select(func.count()).select_from(MeasurementRow))
    assert n_jobs == n_meas == trials * len(task_ids)


def settings(url: str, **kw) -> Settings:
    return Settings(database_url=url, driver_enabled=False, **{"queue_depth": 8, **kw})


def test_driver_fills_queues_within_budget_and_finishes_tasks(database: Database) -> None:
    tasks = submit(database, 20)
    driver = TuningDriver(database, settings(database.url))
    for _ in range(200):
        driver.run_once()
        with database.session() as s:
            counts = tasks_db.job_counts(s, tasks)
        for c in counts.values():
            assert c["pending"] + c["leased"] <= 8 and sum(c.values()) <= 20
        if not measure_some(database) and all(c["done"] == 20 for c in counts.values()):
            driver.run_once()
            break
    check_log(database, tasks, 20)
    assert driver.stats.finished == 2 and driver.stats.conflicts == 0


@pytest.mark.slow
def test_a_restarted_driver_resumes_without_remeasuring_or_overspending(database: Database) -> None:
    tasks = submit(database, 24, strategy="model")
    first = TuningDriver(database, settings(database.url))
    for _ in range(3):
        first.run_once()
        measure_some(database, n=5)
    first.run_once()
    with database.session() as s:
        done_before = {t: tasks_db.get_task(s, t).done for t in tasks}
        queued_before = {t: tasks_db.get_task(s, t).queued for t in tasks}
    assert all(d > 0 for d in done_before.values()) and any(q > 0 for q in queued_before.values())
    del first  # the service stops; its strategies are gone

    second = TuningDriver(Database(database.url), settings(database.url))
    for tid in tasks:
        assert second.strategy(tid).n_measured == done_before[tid]  # rebuilt from the measurements table
    for _ in range(200):
        second.run_once()
        if not measure_some(database, n=8):
            with database.session() as s:
                if all(tasks_db.get_task(s, t).state == "done" for t in tasks):
                    break
    check_log(database, tasks, 24)
    second.db.dispose()


@pytest.mark.slow
def test_two_drivers_on_one_database_never_enqueue_a_config_twice(database: Database, backend_kind: str) -> None:
    tasks = submit(database, 40)
    drivers = [TuningDriver(Database(database.url), settings(database.url, queue_depth=6)) for _ in range(2)]
    stop = threading.Event()
    errors: list[BaseException] = []

    def run(driver: TuningDriver) -> None:
        try:
            while not stop.is_set():
                driver.run_once()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(d,)) for d in drivers]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            measure_some(database, n=6)
            with database.session() as s:
                if all(tasks_db.get_task(s, t).state == "done" for t in tasks):
                    break
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors
    check_log(database, tasks, 40)
    if backend_kind == "postgresql":
        # the advisory lock serializes refills of a task: no proposal ever hit the unique constraint
        assert sum(d.stats.conflicts for d in drivers) == 0
    for d in drivers:
        d.db.dispose()


def test_a_task_locked_by_another_replica_is_skipped(database: Database, backend_kind: str) -> None:
    if backend_kind != "postgresql":
        pytest.skip("advisory locks are PostgreSQL's; SQLite runs one writer at a time")
    (tid, _) = submit(database, 10)
    a = TuningDriver(database, settings(database.url))
    b = TuningDriver(Database(database.url), settings(database.url))
    with a._task_lock(tid) as locked:  # replica a is refilling task tid
        assert locked
        b.run_once()
        assert b.stats.lock_skips >= 1
        with database.session() as s:
            assert tasks_db.job_counts(s, [tid])[tid]["pending"] == 0
    b.run_once()  # lock released: b refills
    with database.session() as s:
        assert tasks_db.job_counts(s, [tid])[tid]["pending"] == 8
    b.db.dispose()


@pytest.mark.slow
def test_a_new_task_transfers_from_the_targets_other_workloads(database: Database) -> None:
    """The cost model of a task on a workload never measured starts from a base model of the target's
    other workloads' measurements (none with transfer off): no random warm-up, and it ranks the new
    workload's configs."""
    import numpy as np
    from scipy.stats import spearmanr

    from tuner.measure.simulator import simulate
    from tuner.search.features import features

    submit_one(database, WORKLOADS[0], 48)
    driver = TuningDriver(database, settings(database.url))
    for _ in range(100):
        driver.run_once()
        if not measure_some(database, n=8):
            break
    (new,) = submit_one(database, Dense(4, 512, 384, "float32"), 16)
    strategy = TuningDriver(database, settings(database.url)).strategy(new)
    base = strategy.model.base
    assert base is not None and base.trained and strategy.n_init == 0
    assert TuningDriver(database, settings(database.url, transfer_rows=0)).strategy(new).model.base is None
    space = strategy.space
    rows = space.sample(400, np.random.default_rng(0))
    # scores rank high what is fast: the transferred model (the base's predictions plus the roofline
    # prior) orders a sample of the new workload's configs by their simulated times
    rho = spearmanr(strategy.model.predict(features(space, rows)), simulate(space, rows)).statistic
    assert rho < -0.8, rho


def submit_one(db: Database, workload, trials: int) -> list[int]:
    with db.session() as s:
        return [t.id for t in tasks_db.create_tasks(s, [workload], TARGET, trials, "model")]
