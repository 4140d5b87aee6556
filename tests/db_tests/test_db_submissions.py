"""Model submissions against the storage contract: the record, bad input, and the driver spending one
budget over a model's tasks (heavier tasks get more), across a driver restart."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import func, select
from storage_helpers import TARGET

from db import jobs as jobs_db
from db import results as results_db
from db import submissions as submissions_db
from db import tasks as tasks_db
from db.domain import ResultIn
from db.engine import Database
from db.errors import InvalidInputError, NotFoundError
from db.orm import JobRow, MeasurementRow, SubmissionRow, TaskRow, WorkloadRow
from db.submissions import LayerSpec
from service.driver import TuningDriver
from service.settings import Settings
from tuner.baseline import baseline_time
from tuner.measure.simulator import Simulator
from tuner.workloads import Dense

SIM = Simulator()
BIG = Dense(1, 1024, 2048, "float32")  # the layer that dominates the model ...
SMALL = Dense(1, 64, 128, "float32")  # ... and one that barely counts


def layers() -> list[LayerSpec]:
    # fc1 and fc1b share a workload: one task called 4 times
    return [LayerSpec("fc1", BIG, 3), LayerSpec("fc2", SMALL), LayerSpec("fc1b", BIG.to_json())]


def create(db: Database, trials: int = 64, **kw: Any) -> submissions_db.Submission:
    with db.session() as s:
        return submissions_db.create_submission(s, kw.pop("model", "mlp"), kw.pop("layers", layers()), TARGET,
                                                trials, "random", **kw)


def row_counts(db: Database) -> tuple[int, ...]:
    with db.session() as s:
        return tuple(s.scalar(select(func.count()).select_from(t)) or 0
                     for t in (SubmissionRow, TaskRow, WorkloadRow, JobRow))


def measure_some(db: Database, n: int = 8) -> int:
    with db.session() as s:
        got = jobs_db.lease(s, target=TARGET, worker="w", max_jobs=n, lease_seconds=30)
    results = []
    for job in got.jobs:
        (m,) = SIM.measure(job.workload, TARGET, [job.config])
        results.append(ResultIn(job_id=job.id, status=m.status, times=m.times, error=m.error, source=m.source))
    if results:
        with db.session() as s:
            results_db.post_results(s, lease_token=got.token, worker="w", results=results)
    return len(results)


def driver(db: Database) -> TuningDriver:
    return TuningDriver(db, Settings(database_url=db.url, driver_enabled=False, queue_depth=8))


def run(db: Database, drv: TuningDriver, sid: str, rounds: int = 400,
        until: Callable[[submissions_db.Submission], bool] | None = None) -> submissions_db.Submission:
    for _ in range(rounds):
        drv.run_once()
        with db.session() as s:
            sub = submissions_db.get_submission(s, sid)
        assert sub.spent <= sub.trial_budget and sub.trials_done + sub.trials_queued <= sub.trial_budget
        if sub.state != "active" or (until is not None and until(sub)):
            return sub
        measure_some(db)
    raise AssertionError("the submission did not finish")


def test_a_submission_records_the_model_its_layers_call_counts_and_weights(database: Database) -> None:
    sub = create(database, 64, per_round=8)
    assert (sub.model, sub.target, sub.trial_budget, sub.per_round, sub.state) == ("mlp", TARGET, 64, 8, "active")
    assert [(t.workload, t.layer_names, t.call_count) for t in sub.tasks] == [(BIG, ("fc1", "fc1b"), 4),
                                                                              (SMALL, ("fc2",), 1)]
    assert all(t.granted == 0 and t.state == "active" and t.weight is None for t in sub.tasks)
    with database.session() as s:
        assert submissions_db.get_submission(s, sub.id) == sub
        task = tasks_db.get_task(s, sub.tasks[0].task_id)
        listed = tasks_db.list_tasks(s, batch=sub.id)
        with pytest.raises(NotFoundError):
            submissions_db.get_submission(s, "0" * 16)
    assert (task.model, task.call_count, task.layer_names, task.batch, task.submission_id) == (
        "mlp", 4, ("fc1", "fc1b"), sub.id, sub.id)
    assert [t.call_count for t in listed] == [4, 1]
    driver(database).run_once()  # the driver weighs the tasks (call count x baseline time), then grants
    with database.session() as s:
        weighed = submissions_db.get_submission(s, sub.id)
    assert [t.weight for t in weighed.tasks] == [pytest.approx(4 * baseline_time(BIG, TARGET)),
                                                 pytest.approx(baseline_time(SMALL, TARGET))]
    assert weighed.tasks[0].granted == 8 and weighed.tasks[1].granted == 0  # the heavier warms up first


@pytest.mark.parametrize("bad", [
    dict(layers=[LayerSpec("fc1", BIG), LayerSpec("fc2", {"op": "dense", "m": 0, "n": 1, "k": 1})]),
    dict(layers=[LayerSpec("fc1", BIG), LayerSpec("fc2", SMALL, 0)]),
    dict(layers=[LayerSpec("x" * 129, BIG)]),
    dict(layers=[]),
    dict(model=""),
    dict(trials=0),
    dict(per_round=0),
    dict(early_stop=0),
    dict(seed=-1),
])
def test_bad_input_writes_nothing(database: Database, bad: dict[str, Any]) -> None:
    before = row_counts(database)
    with pytest.raises(InvalidInputError):
        create(database, **{"trials": 64, **bad})
    assert row_counts(database) == before == (0, 0, 0, 0)


@pytest.mark.slow
def test_the_driver_spends_one_budget_and_the_heavier_task_gets_more(database: Database) -> None:
    sub = create(database, 96, per_round=8)
    with database.session() as s:  # a task outside any submission keeps its own budget alongside
        plain = tasks_db.create_tasks(s, [Dense(1, 128, 256, "float32")], TARGET, 16, "random")[0].id
    drv = driver(database)
    done = run(database, drv, sub.id)
    assert done.state == "done" and all(t.state == "done" for t in done.tasks)
    big, small = done.tasks
    assert big.trials_done + small.trials_done == 96 == done.trials_done and done.trials_queued == 0
    assert big.trials_done > small.trials_done >= 8  # the dominant layer got most rounds, the other its warm-up
    assert (big.granted, small.granted) == (big.trials_done, small.trials_done)
    with database.session() as s:
        per_config = s.execute(select(JobRow.workload_id, JobRow.config_hash, func.count())
                               .group_by(JobRow.workload_id, JobRow.config_hash)).all()
        n_meas = s.scalar(select(func.count()).select_from(MeasurementRow)
                          .where(MeasurementRow.task_id.in_([big.task_id, small.task_id])))
        plain_task = tasks_db.get_task(s, plain)
    assert all(n == 1 for *_, n in per_config) and n_meas == 96
    assert plain_task.state == "done" and plain_task.trials_done == 16
    assert drv.stats.granted == 96 and drv.stats.submissions_finished == 1


@pytest.mark.slow
def test_a_restarted_driver_continues_the_submission_within_its_budget(database: Database) -> None:
    sub = create(database, 80, per_round=8)
    first = run(database, driver(database), sub.id, until=lambda s: s.trials_done >= 32)
    assert first.state == "active" and first.trials_done >= 32
    # a new driver (a restarted server) knows nothing but the database
    second = driver(database)
    done = run(database, second, sub.id)
    assert done.state == "done" and done.trials_done == 80
    assert sum(t.granted for t in done.tasks) == 80
    assert second.stats.granted == 80 - sum(t.granted for t in first.tasks)
    with database.session() as s:
        n_jobs = s.scalar(select(func.count()).select_from(JobRow))
        n_meas = s.scalar(select(func.count()).select_from(MeasurementRow))
    assert n_jobs == n_meas == 80
    assert done.tasks[0].trials_done > done.tasks[1].trials_done


def test_tasks_that_stop_improving_end_the_submission_before_its_budget(database: Database) -> None:
    sub = create(database, 100_000, per_round=8, early_stop=8,
                 layers=[LayerSpec("fc1", SMALL), LayerSpec("fc2", Dense(1, 32, 64, "float32"))])
    done = run(database, driver(database), sub.id, rounds=2000)
    assert done.state == "done" and all(t.state == "done" for t in done.tasks)
    assert 16 <= done.trials_done < 100_000 and done.trials_queued == 0


def test_cancelling_every_task_cancels_the_submission(database: Database) -> None:
    sub = create(database, 64, per_round=8)
    drv = driver(database)
    drv.run_once()
    with database.session() as s:
        for t in sub.tasks:
            tasks_db.cancel_task(s, t.task_id)
    drv.run_once()
    with database.session() as s:
        after = submissions_db.get_submission(s, sub.id)
    assert after.state == "cancelled" and {t.state for t in after.tasks} == {"cancelled"}



def test_tasks_from_before_submissions_keep_working_across_the_migration(backend_kind: str, tmp_path: Any) -> None:
    """Up from 0003 with a task in the log (written with 0003's columns), then down again."""
    from backends import fresh_url
    from sqlalchemy import text

    from db import migrate

    with fresh_url(backend_kind, tmp_path, upgrade=False) as url:
        migrate.upgrade(url, "0003")
        db = Database(url)
        try:
            with db.engine.begin() as conn:
                conn.execute(text("INSERT INTO targets (id, name, description) VALUES (1, :t, '')"), {"t": TARGET})
                conn.execute(text("INSERT INTO workloads (id, key, op, canonical_json, flops) "
                                  "VALUES (1, :k, 'dense', :c, :f)"),
                             {"k": SMALL.key, "c": SMALL.canonical_json(), "f": int(SMALL.flops)})
                conn.execute(text("INSERT INTO tuning_tasks (id, workload_id, target_id, label, batch, trial_budget, "
                                  "strategy, seed, state, submitter) "
                                  "VALUES (1, 1, 1, 'old', 'b1', 8, 'random', 0, 'active', '')"))
            migrate.upgrade(url)
            with db.session() as s:
                task = tasks_db.get_task(s, 1)
            assert (task.label, task.trial_budget, task.call_count, task.model, task.submission_id) == (
                "old", 8, 1, None, None)
            drv = driver(db)
            for _ in range(20):  # the old task runs on its own budget next to the new code
                drv.run_once()
                if not measure_some(db):
                    break
            with db.session() as s:
                task = tasks_db.get_task(s, 1)
            assert task.state == "done" and task.trials_done == 8
            migrate.downgrade(url, "0003")
            with db.engine.connect() as conn:
                assert conn.execute(text("SELECT label, trial_budget FROM tuning_tasks")).all() == [("old", 8)]
        finally:
            db.dispose()
