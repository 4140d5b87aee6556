"""Small builders shared by the storage tests."""

from __future__ import annotations

from typing import Any

import numpy as np

from db import jobs as jobs_db
from db import tasks as tasks_db
from db.engine import Database
from tuner.space.space import ScheduleSpace
from tuner.workloads import Dense

WORKLOAD = Dense(16, 64, 128, "float32")
TARGET = "sw26010"


def configs(n: int, seed: int = 0, workload: Any = WORKLOAD) -> list[dict[str, Any]]:
    space = ScheduleSpace(workload, TARGET)
    return [space.decode(r) for r in space.sample(n, np.random.default_rng(seed))]


def task_with_jobs(db: Database, n_jobs: int, *, trials: int = 100, max_attempts: int = 3,
                   workload: Any = WORKLOAD) -> int:
    with db.session() as s:
        task = tasks_db.create_tasks(s, [workload], TARGET, trials, "random")[0]
        spec = next(t for t in tasks_db.active_tasks(s) if t.id == task.id)
        jobs_db.enqueue(s, task.id, spec.workload_id, spec.target_id, configs(n_jobs, workload=workload), max_attempts)
    return task.id
