"""Domain values the db package returns: frozen dataclasses, never ORM rows."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from db.states import JobState, TaskState
from tuner.profile import Profile
from tuner.workloads import Workload


def untuned_reason(state: TaskState, trials_done: int, best_time: float | None) -> str | None:
    """Why a task that ended (done or cancelled) has no successful measurement, or None when it has
    one or is still active. Such a task's "done" means "stopped", not "tuned": compile runs its
    workload untuned."""
    if state == TaskState.ACTIVE or (best_time is not None and math.isfinite(best_time)):
        return None
    if trials_done == 0:
        return "untuned: no trial was run (the budget gave it none)" if state == TaskState.DONE else \
            "untuned: cancelled before any trial"
    return f"untuned: none of its {trials_done} trials succeeded"


class OfWorkload:
    """A record of one workload, named by the workload's key (TaskInfo, Measurement, BestConfig)."""

    workload: Workload

    @property
    def workload_key(self) -> str:
        return self.workload.key


class JobCounts:
    """A task's jobs by state and its best time, and what follows from them: the base of a task's view
    (TaskInfo, db.submissions.SubmissionTask)."""

    state: TaskState
    pending: int
    leased: int
    done: int
    failed: int
    best_time: float | None

    @property
    def trials_done(self) -> int:
        """Jobs that used a trial for good: measured (ok or failed config) or given up after attempts."""
        return self.done + self.failed

    @property
    def untuned_reason(self) -> str | None:
        return untuned_reason(self.state, self.trials_done, self.best_time)

    @property
    def queued(self) -> int:
        return self.pending + self.leased


@dataclass(frozen=True)
class TaskInfo(JobCounts, OfWorkload):
    """A tuning task with its progress; ``curve`` is (trial number, best time so far) per trial."""

    id: int
    workload: Workload
    target: str
    label: str
    batch: str
    trial_budget: int
    strategy: str
    seed: int
    state: TaskState
    submitter: str
    created_at: datetime | None
    updated_at: datetime | None
    pending: int = 0
    leased: int = 0
    done: int = 0
    failed: int = 0
    best_time: float | None = None
    best_config: dict[str, Any] | None = None
    curve: tuple[tuple[int, float], ...] = ()
    # Set for a task of a model submission (db.submissions); its trial_budget is then what the
    # driver has granted it so far out of the submission's one budget.
    submission_id: str | None = None
    model: str | None = None
    call_count: int = 1  # how many times the model runs this workload
    layer_names: tuple[str, ...] = ()
    weight: float | None = None  # estimated seconds per model run: call_count x baseline time


@dataclass(frozen=True)
class Job:
    """A leased measurement job as a worker sees it."""

    id: int
    task_id: int
    workload: Workload
    target: str
    config: dict[str, Any]
    config_hash: str
    attempts: int
    state: JobState = JobState.LEASED


@dataclass(frozen=True)
class Lease:
    token: str
    lease_seconds: float
    jobs: tuple[Job, ...]
    # The target's active simulator profile, for a worker measuring with the simulator (None otherwise, and
    # when nothing was leased): its results name this version.
    profile: Profile | None = None


@dataclass(frozen=True)
class ResultIn:
    """A result as posted by a worker for one job (validated before anything is stored)."""

    job_id: int
    status: str
    times: tuple[float, ...] = ()
    error: str = ""
    source: str = "simulator"
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PostOutcome:
    """What happened to one posted result: stored, duplicate (already stored: idempotent),
    lease_lost (the token does not hold the job), forbidden (another worker's lease), not_found."""

    job_id: int
    outcome: str
    measurement_id: int | None = None


@dataclass(frozen=True)
class Measurement(OfWorkload):
    id: int
    workload: Workload
    target: str
    config: dict[str, Any]
    config_hash: str
    times: tuple[float, ...]
    mean_time: float | None
    status: str
    error: str
    worker: str
    source: str
    details: dict[str, Any]
    task_id: int | None
    job_id: int | None
    created_at: datetime | None
    profile_version: int | None = None  # a simulated time: the simulator profile it came from (0: built-in)


@dataclass(frozen=True)
class BestConfig(OfWorkload):
    """The fastest successful measurement of a (workload, target): what a compiler applies."""

    workload: Workload
    target: str
    config: dict[str, Any]
    config_hash: str
    mean_time: float
    times: tuple[float, ...]
    source: str  # "hardware" whenever a Sunway node timed this workload: hardware times win over simulated ones
    worker: str
    measured_at: datetime | None
    n_measured: int
    profile_version: int | None = None  # a simulated time: the simulator profile it came from (0: built-in)

    @property
    def gflops(self) -> float:
        return self.workload.flops / self.mean_time / 1e9 if self.mean_time > 0 else math.nan


@dataclass(frozen=True)
class ImportStats:
    imported: int
    skipped: int


@dataclass(frozen=True)
class WorkerInfo:
    name: str
    target: str
    backend: str
    jobs_leased: int
    created_at: datetime | None
    last_seen_at: datetime | None


@dataclass(frozen=True)
class TokenInfo:
    id: int
    name: str
    role: str
    created_at: datetime | None
    revoked_at: datetime | None
