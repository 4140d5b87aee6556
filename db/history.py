"""Read-only history queries for the dashboard and the service CLI: a task's trials one by one, the
leases workers hold now, and tuning tasks grouped by submission (the ``batch`` of one POST /tasks, or
a model submission's id, whose record adds the model name, its one budget and call counts).

Everything here only reads; it returns the frozen dataclasses below, never ORM rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from sqlalchemy import and_, func, select
from sqlalchemy.orm import Session

from db.errors import NotFoundError, found_one
from db.orm import JobRow, MeasurementRow, SubmissionRow, TargetRow, TaskRow
from db.states import FINISHED_JOBS, JobState, SubmissionState
from db.timeutil import as_utc, utcnow
from tuner.measure.base import OK

# Longest error text a trial carries to a browser: the full text stays in the tuning log.
ERROR_CHARS = 300


class TrialOutcome(str, Enum):
    """How a finished trial ended, beyond the measurement statuses (ok, ldm_overflow, ...)."""

    GIVEN_UP = "given_up"  # its leases expired max_attempts times: no worker ever posted a result


@dataclass(frozen=True)
class TrialPoint:
    """One finished trial of a task, in completion order (``trial`` counts from 1)."""

    trial: int
    job_id: int
    status: str  # a measurement status (tuner.measure.base.STATUSES) or TrialOutcome.GIVEN_UP
    mean_time: float | None  # None unless status is ok
    worker: str
    error: str
    finished_at: datetime | None

    @property
    def ok(self) -> bool:
        return self.status == OK and self.mean_time is not None


@dataclass(frozen=True)
class WorkerTally:
    """What one worker measured for a task."""

    worker: str
    trials: int
    ok: int
    failed: int
    best_time: float | None
    last_at: datetime | None


@dataclass(frozen=True)
class WorkerLeases:
    """The jobs a worker holds right now: how many, of which tasks, and the nearest lease expiry."""

    worker: str
    jobs: int
    task_ids: tuple[int, ...]
    next_expiry: datetime | None


@dataclass(frozen=True)
class SubmissionInfo:
    """The tasks created by one submission: a model submission (db.submissions, one budget), or one
    POST /tasks (a list of workloads, a budget each: ``model`` and ``state`` are None)."""

    batch: str
    target: str
    submitter: str
    created_at: datetime | None
    tasks: int
    states: dict[str, int]
    labels: tuple[str, ...]
    trial_budget: int  # a model submission's one budget, else the sum of its tasks' budgets
    trials_done: int
    model: str | None = None
    state: SubmissionState | None = None
    calls: int = 0  # layer calls of one model run: the sum of the tasks' call counts


def task_trials(session: Session, task_id: int) -> list[TrialPoint]:
    """Every finished trial (job done or failed) of a task in completion order, with its measurement.

    A job is joined to its measurement by (workload, target, config hash), as the task curve is: a
    config measured earlier (another task, an import) counts for this task too, with that worker."""
    if session.get(TaskRow, task_id) is None:
        raise NotFoundError(f"tuning task {task_id} does not exist")
    stmt = (select(JobRow.id, JobRow.state, JobRow.worker, JobRow.error, JobRow.finished_at,
                   MeasurementRow.status, MeasurementRow.mean_time, MeasurementRow.worker,
                   MeasurementRow.error, MeasurementRow.created_at)
            .outerjoin(MeasurementRow, and_(MeasurementRow.workload_id == JobRow.workload_id,
                                             MeasurementRow.target_id == JobRow.target_id,
                                             MeasurementRow.config_hash == JobRow.config_hash))
            .where(JobRow.task_id == task_id, JobRow.state.in_(FINISHED_JOBS))
            .order_by(JobRow.finished_at, JobRow.id))
    points = []
    for i, (job_id, _job_state, job_worker, job_error, finished, m_status, m_time, m_worker, m_error,
            m_at) in enumerate(session.execute(stmt).all()):
        if m_status is None:  # failed job: no result ever arrived
            status, time, worker, error = TrialOutcome.GIVEN_UP.value, None, job_worker or "", job_error
        else:
            status, worker, error = m_status, m_worker or job_worker or "", m_error
            time = float(m_time) if m_status == OK and m_time is not None else None
        points.append(TrialPoint(trial=i + 1, job_id=job_id, status=status, mean_time=time, worker=worker,
                                 error=(error or "")[:ERROR_CHARS], finished_at=as_utc(finished or m_at)))
    return points


def tally_by_worker(points: Sequence[TrialPoint]) -> list[WorkerTally]:
    """Trials per worker (most trials first)."""
    groups: dict[str, list[TrialPoint]] = defaultdict(list)
    for p in points:
        groups[p.worker].append(p)
    out = []
    for worker, ps in groups.items():
        times = [p.mean_time for p in ps if p.ok and p.mean_time is not None]
        stamps = [p.finished_at for p in ps if p.finished_at is not None]
        out.append(WorkerTally(worker=worker, trials=len(ps), ok=len(times), failed=len(ps) - len(times),
                               best_time=min(times) if times else None, last_at=max(stamps) if stamps else None))
    return sorted(out, key=lambda t: (-t.trials, t.worker))


def database_now(session: Session) -> datetime:
    """The database clock, the one lease expiries are decided by."""
    now = as_utc(session.scalar(select(utcnow())))
    assert now is not None
    return now


def current_leases(session: Session) -> list[WorkerLeases]:
    """The jobs leased right now, grouped by worker (a worker holding nothing is absent)."""
    stmt = (select(JobRow.worker, JobRow.task_id, JobRow.lease_expires_at)
            .where(JobRow.state == JobState.LEASED).order_by(JobRow.worker, JobRow.id))
    jobs: dict[str, int] = defaultdict(int)
    tasks: dict[str, set[int]] = defaultdict(set)
    expiry: dict[str, datetime] = {}
    for worker, task_id, expires in session.execute(stmt).all():
        name = worker or ""
        jobs[name] += 1
        tasks[name].add(task_id)
        at = as_utc(expires)
        if at is not None and (name not in expiry or at < expiry[name]):
            expiry[name] = at
    return [WorkerLeases(worker=w, jobs=n, task_ids=tuple(sorted(tasks[w])), next_expiry=expiry.get(w))
            for w, n in sorted(jobs.items())]


def list_submissions(session: Session, *, limit: int = 100) -> list[SubmissionInfo]:
    """Submissions, newest first."""
    newest = (select(TaskRow.batch).group_by(TaskRow.batch)
              .order_by(func.max(TaskRow.id).desc()).limit(limit))
    return _submissions(session, list(session.scalars(newest).all()))


def get_submission(session: Session, batch: str) -> SubmissionInfo:
    return found_one(_submissions(session, [batch]), f"submission {batch!r}")


def _submissions(session: Session, batches: list[str]) -> list[SubmissionInfo]:
    """Two queries whatever the number of submissions: their tasks, and their finished jobs."""
    if not batches:
        return []
    rows = session.execute(select(TaskRow.batch, TaskRow.state, TaskRow.label, TaskRow.trial_budget,
                                  TaskRow.call_count, TaskRow.submitter, TaskRow.created_at, TargetRow.name)
                           .join(TargetRow, TargetRow.id == TaskRow.target_id)
                           .where(TaskRow.batch.in_(batches)).order_by(TaskRow.id)).all()
    done = dict(session.execute(select(TaskRow.batch, func.count(JobRow.id))
                                .join(TaskRow, TaskRow.id == JobRow.task_id)
                                .where(TaskRow.batch.in_(batches), JobRow.state.in_(FINISHED_JOBS))
                                .group_by(TaskRow.batch)).all())
    records = {r.id: r for r in session.scalars(select(SubmissionRow).where(SubmissionRow.id.in_(batches))).all()}
    by_batch: dict[str, list[Any]] = defaultdict(list)
    for r in rows:
        by_batch[r.batch].append(r)
    out = []
    for batch in batches:
        tasks = by_batch.get(batch)
        if not tasks:
            continue
        states: dict[str, int] = defaultdict(int)
        for r in tasks:
            states[r.state] += 1
        first = tasks[0]
        record = records.get(batch)
        out.append(SubmissionInfo(batch=batch, target=first.name, submitter=first.submitter,
                                  created_at=as_utc(first.created_at), tasks=len(tasks), states=dict(states),
                                  labels=tuple(r.label for r in tasks),
                                  trial_budget=record.trial_budget if record else sum(r.trial_budget for r in tasks),
                                  trials_done=int(done.get(batch, 0)), model=record.model if record else None,
                                  state=SubmissionState(record.state) if record else None,
                                  calls=sum(r.call_count for r in tasks)))
    return out
