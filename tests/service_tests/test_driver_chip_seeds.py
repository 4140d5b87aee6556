"""Issue #43: a tuning log from before the split holds one-CG records; they seed the service's search over
the whole chip. A chip task's first jobs are its baseline, then its workload's best one-CG record and that
record's tiles split over the chip's CGs; a one-CG task is not seeded."""

from __future__ import annotations

from typing import Any

from db import jobs as jobs_db
from db import measurements as measurements_db
from db import results as results_db
from db import tasks as tasks_db
from db.domain import ResultIn
from db.engine import Database
from service.driver import TuningDriver
from service.settings import Settings
from tuner.baseline import baseline_config
from tuner.measure.simulator import Simulator
from tuner.space.chip import chip_seeds
from tuner.space.factory import space_for
from tuner.space.space import Config
from tuner.task_kind import kind_of
from tuner.workloads import Dense

WORKLOAD = Dense(64, 256, 512, "float32")
PRESET, CHIP = "sw26010", "sw26010-4cg"
TRIALS = 8
SIM = Simulator()


def _driver(database: Database) -> TuningDriver:
    return TuningDriver(database, Settings(database_url=database.url, driver_enabled=False, queue_depth=TRIALS))


def _task(database: Database, target: str) -> tasks_db.TaskSpec:
    with database.session() as s:
        (info,) = tasks_db.create_tasks(s, [WORKLOAD], target, TRIALS, "random")
        return next(t for t in tasks_db.active_tasks(s) if t.id == info.id)


def _tune(database: Database, target: str) -> tasks_db.TaskSpec:
    """A task of WORKLOAD on ``target``, run to its budget: the driver queues, a simulator worker measures."""
    task, driver = _task(database, target), _driver(database)
    for _ in range(10):
        driver.run_once()
        with database.session() as s:
            got = jobs_db.lease(s, target=target, worker="w", max_jobs=TRIALS, lease_seconds=30)
        if not got.jobs:
            break
        results = []
        for job in got.jobs:
            (m,) = SIM.measure(job.workload, target, [job.config])
            results.append(ResultIn(job_id=job.id, status=m.status, times=m.times, error=m.error, source=m.source))
        with database.session() as s:
            results_db.post_results(s, lease_token=got.token, worker="w", results=results)
    with database.session() as s:
        assert tasks_db.get_task(s, task.id).trials_done == TRIALS
    return task


def _queued(database: Database, task: tasks_db.TaskSpec) -> list[dict[str, Any]]:
    """The task's jobs' configs in the order the driver queued them."""
    with database.session() as s:
        return [c for _, _, c in jobs_db.jobs_of_workload(s, task.workload_id, task.target_id, 0)]


def _valid(target: str, configs: list[Config]) -> list[Config]:
    """The configs that are valid points of WORKLOAD's space on ``target``, as that space spells them."""
    space = space_for(WORKLOAD, target)
    rows = [space.encode(c) for c in configs]
    return [space.decode(r) for r in rows if bool(space.analyze(r[None, :]).valid[0])]


def test_a_chip_task_measures_the_one_cg_best_record_and_its_splits_after_the_baseline(database: Database) -> None:
    _tune(database, PRESET)
    with database.session() as s:
        record = measurements_db.best_config(s, WORKLOAD.key, PRESET)
    chip = _task(database, CHIP)
    _driver(database).run_once()
    jobs = _queued(database, chip)
    baseline = baseline_config(space_for(WORKLOAD, CHIP))
    seeds = [c for c in _valid(CHIP, chip_seeds(record.config, 4)) if c != baseline]  # the baseline is queued once
    assert any(c["cgs"] == 4 for c in seeds)  # the record's tiles split over the chip, not the record alone
    assert jobs[0] == baseline
    assert jobs[1:1 + len(seeds)] == seeds
    assert len(jobs) == TRIALS  # the seeds are measured within the task's trials


def test_a_chip_task_without_one_cg_records_and_a_one_cg_task_start_unseeded(database: Database) -> None:
    # the log holds WORKLOAD's chip records only: the chip task had nothing to start from
    chip = _tune(database, CHIP)
    assert _queued(database, chip)[:TRIALS] == _unseeded(CHIP, chip.seed)
    # and a one-CG task does not take the chip's records as seeds: it starts as it always has
    one = _task(database, PRESET)
    _driver(database).run_once()
    assert _queued(database, one) == _unseeded(PRESET, one.seed)


def _unseeded(target: str, seed: int) -> list[Config]:
    """What a fresh task's strategy queues first with nothing in the log: the baseline, then its proposals."""
    strategy = kind_of(WORKLOAD).strategy(space_for(WORKLOAD, target), "random", seed=seed)
    strategy.queue_start()
    return strategy.ask_next(TRIALS)
