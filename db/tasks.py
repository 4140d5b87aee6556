"""Model functions for tuning tasks: create, read (with progress and best-so-far curve), cancel."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, func, select, update
from sqlalchemy.orm import Session

from db.domain import TaskInfo
from db.errors import ConflictError, ForbiddenError, InvalidInputError, NotFoundError
from db.orm import JobRow, MeasurementRow, SubmissionRow, TargetRow, TaskRow, WorkloadRow
from db.refs import parse_workload, target_id, target_name, workload_id, workload_of
from db.states import FINISHED_JOBS, JobState, TaskState
from db.timeutil import as_utc, utcnow
from tuner.search import strategy_names
from tuner.task_kind import kind_of
from tuner.workloads import Workload

MAX_BUDGET = 1_000_000
MAX_SEED = 2**31 - 1  # tuning_tasks.seed is a 32-bit column
MAX_TASK_ID = 2**31 - 1  # tuning_tasks.id is int4 on PostgreSQL


@dataclass(frozen=True)
class TaskSpec:
    """What the driver needs to run a task."""

    id: int
    workload: Workload
    workload_id: int
    target: str
    target_id: int
    trial_budget: int
    strategy: str
    seed: int
    submission_id: str | None = None  # set: the budget is granted by the submission's scheduler


def check_strategy(strategy: str, known: Iterable[str] | None, workloads: Sequence[Workload]) -> None:
    """InvalidInputError unless ``strategy`` is registered (one of ``known``, when given) and the kind of
    every workload runs it (a kind never swaps in another strategy)."""
    names = sorted(known) if known is not None else strategy_names()
    if strategy not in names:
        raise InvalidInputError(f"unknown search strategy {strategy!r}; expected one of {names}")
    for i, wl in enumerate(workloads):
        kind = kind_of(wl)
        if not kind.runs_strategy(strategy):
            runs = [s for s in names if kind.runs_strategy(s)]
            raise InvalidInputError(f"workloads[{i}]: a {kind.name} task does not run the search strategy "
                                    f"{strategy!r}; it runs {runs}")


def create_tasks(session: Session, workloads: Sequence[Workload | dict[str, Any] | str], target: str,
                 trials: int, strategy: str, *, labels: Sequence[str] | None = None, seed: int = 0,
                 submitter: str = "", known_strategies: Iterable[str] | None = None,
                 submitter_token_id: int | None = None) -> list[TaskInfo]:
    """One task per workload, all in one transaction: any invalid input creates nothing."""
    if not workloads:
        raise InvalidInputError("a task needs at least one workload")
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
        raise InvalidInputError(f"seed must be an integer in [0, {MAX_SEED}], got {seed!r}")
    if len(submitter) > 128 or (labels is not None and any(len(x) > 128 for x in labels)):
        raise InvalidInputError("submitter names and labels have at most 128 characters")
    if isinstance(trials, bool) or not isinstance(trials, int) or not 1 <= trials <= MAX_BUDGET:
        raise InvalidInputError(f"trials must be an integer in [1, {MAX_BUDGET}], got {trials!r}")
    if labels is not None and len(labels) != len(workloads):
        raise InvalidInputError(f"got {len(labels)} labels for {len(workloads)} workloads")
    parsed: list[Workload] = []
    for i, spec in enumerate(workloads):
        try:
            parsed.append(parse_workload(spec))
        except InvalidInputError as exc:
            raise InvalidInputError(f"workloads[{i}]: {exc}") from None
    check_strategy(strategy, known_strategies, parsed)
    tname = target_name(target)
    batch = uuid.uuid4().hex[:16]
    tid = target_id(session, tname)
    rows = []
    for i, wl in enumerate(parsed):
        row = TaskRow(workload_id=workload_id(session, wl), target_id=tid, label=(labels[i] if labels else ""),
                      batch=batch, trial_budget=trials, strategy=strategy, seed=seed, state=TaskState.ACTIVE,
                      submitter=submitter, submitter_token_id=submitter_token_id)
        session.add(row)
        rows.append(row)
    session.flush()
    return [get_task(session, row.id, curve=False) for row in rows]


def _task_rows(session: Session, where: Any,
               limit: int | None = None) -> list[tuple[TaskRow, str, str, str | None]]:
    """(task, workload canonical JSON, target name, model name or None) per task."""
    stmt = (select(TaskRow, WorkloadRow.canonical_json, TargetRow.name, SubmissionRow.model)
            .join(WorkloadRow, WorkloadRow.id == TaskRow.workload_id)
            .join(TargetRow, TargetRow.id == TaskRow.target_id)
            .outerjoin(SubmissionRow, SubmissionRow.id == TaskRow.submission_id)
            .where(where))
    if limit is None:
        return [tuple(r) for r in session.execute(stmt.order_by(TaskRow.id)).all()]  # type: ignore[misc]
    # A capped listing shows the newest tasks (what a user watching the queue wants), oldest first.
    newest = session.execute(stmt.order_by(TaskRow.id.desc()).limit(limit)).all()
    return [tuple(r) for r in reversed(newest)]  # type: ignore[misc]


def job_counts(session: Session, task_ids: Sequence[int]) -> dict[int, dict[str, int]]:
    """Jobs per state for each task (a task with no jobs maps to zeros)."""
    counts: dict[int, dict[str, int]] = {t: dict.fromkeys(JobState, 0) for t in task_ids}
    if not task_ids:
        return counts
    stmt = (select(JobRow.task_id, JobRow.state, func.count()).where(JobRow.task_id.in_(task_ids))
            .group_by(JobRow.task_id, JobRow.state))
    for task_id, state, n in session.execute(stmt):
        counts[task_id][state] = n
    return counts


Curve = list[tuple[int, float | None, dict[str, Any] | None]]  # (trial number, mean time or None, config)


def _curves(session: Session, task_ids: Sequence[int]) -> dict[int, Curve]:
    """Per task, per finished trial in completion order: (trial number, mean time or None if failed,
    config). One query for all the tasks: a listing polled every half second must not cost a query per task."""
    curves: dict[int, Curve] = {t: [] for t in task_ids}
    if not task_ids:
        return curves
    stmt = (select(JobRow.task_id, MeasurementRow.mean_time, MeasurementRow.config)
            .outerjoin(MeasurementRow, and_(MeasurementRow.workload_id == JobRow.workload_id,
                                             MeasurementRow.target_id == JobRow.target_id,
                                             MeasurementRow.config_hash == JobRow.config_hash))
            .where(JobRow.task_id.in_(task_ids), JobRow.state.in_(FINISHED_JOBS))
            .order_by(JobRow.task_id, JobRow.finished_at, JobRow.id))
    for task_id, t, config in session.execute(stmt):
        trials = curves[task_id]
        trials.append((len(trials) + 1, t, config))
    return curves


def _info(row: TaskRow, canonical: str, target: str, model: str | None, counts: dict[str, int],
          trials: Curve, curve: bool) -> TaskInfo:
    best_time: float | None = None
    best_config: dict[str, Any] | None = None
    points: list[tuple[int, float]] = []
    for trial, t, config in trials:
        if t is not None and math.isfinite(t) and (best_time is None or t < best_time):
            best_time, best_config = t, config
        if best_time is not None:
            points.append((trial, best_time))
    return TaskInfo(
        id=row.id, workload=workload_of(canonical), target=target, label=row.label, batch=row.batch,
        trial_budget=row.trial_budget, strategy=row.strategy, seed=row.seed, state=TaskState(row.state),
        submitter=row.submitter, created_at=as_utc(row.created_at), updated_at=as_utc(row.updated_at),
        pending=counts[JobState.PENDING], leased=counts[JobState.LEASED], done=counts[JobState.DONE],
        failed=counts[JobState.FAILED],
        best_time=best_time, best_config=best_config, curve=tuple(points) if curve else (),
        submission_id=row.submission_id, model=model, call_count=row.call_count,
        layer_names=tuple(row.layer_names or ()), weight=row.weight,
    )


def get_task(session: Session, task_id: int, *, curve: bool = True) -> TaskInfo:
    if not 1 <= task_id <= MAX_TASK_ID:
        raise NotFoundError(f"tuning task {task_id} does not exist")
    rows = _task_rows(session, TaskRow.id == task_id)
    if not rows:
        raise NotFoundError(f"tuning task {task_id} does not exist")
    row, canonical, target, model = rows[0]
    return _info(row, canonical, target, model, job_counts(session, [task_id])[task_id],
                 _curves(session, [task_id])[task_id], curve)


def list_tasks(session: Session, *, state: TaskState | None = None, batch: str | None = None,
               limit: int = 100) -> list[TaskInfo]:
    where: ColumnElement[bool] = TaskRow.id.is_not(None)
    if state:
        where = and_(where, TaskRow.state == state)
    if batch:
        where = and_(where, TaskRow.batch == batch)
    rows = _task_rows(session, where, limit)
    ids = [r[0].id for r in rows]
    counts, curves = job_counts(session, ids), _curves(session, ids)
    return [_info(row, canonical, target, model, counts[row.id], curves[row.id], curve=False)
            for row, canonical, target, model in rows]


def cancel_task(session: Session, task_id: int, *, token_id: int | None = None, admin: bool = True) -> TaskInfo:
    """Stop a task: its pending jobs are dropped; leased ones may still post (their results are kept).

    Only the token that submitted the task (``token_id``) or an admin may cancel it."""
    if not 1 <= task_id <= MAX_TASK_ID:
        raise NotFoundError(f"tuning task {task_id} does not exist")
    row = session.get(TaskRow, task_id, with_for_update=True)
    if row is None:
        raise NotFoundError(f"tuning task {task_id} does not exist")
    if not admin and (token_id is None or row.submitter_token_id != token_id):
        raise ForbiddenError(f"tuning task {task_id} belongs to another submitter; only its submitter "
                             "or an admin may cancel it")
    if row.state == TaskState.DONE:
        raise ConflictError(f"tuning task {task_id} is already done")
    if row.state == TaskState.ACTIVE:
        session.execute(delete(JobRow).where(JobRow.task_id == task_id, JobRow.state == JobState.PENDING))
        session.execute(update(TaskRow).where(TaskRow.id == task_id)
                        .values(state=TaskState.CANCELLED, updated_at=utcnow()))
        session.expire(row)
    return get_task(session, task_id)


def active_tasks(session: Session) -> list[TaskSpec]:
    stmt = (select(TaskRow, WorkloadRow.canonical_json, TargetRow.name)
            .join(WorkloadRow, WorkloadRow.id == TaskRow.workload_id)
            .join(TargetRow, TargetRow.id == TaskRow.target_id)
            .where(TaskRow.state == TaskState.ACTIVE).order_by(TaskRow.id))
    return [TaskSpec(id=row.id, workload=workload_of(canonical), workload_id=row.workload_id, target=target,
                     target_id=row.target_id, trial_budget=row.trial_budget, strategy=row.strategy, seed=row.seed,
                     submission_id=row.submission_id)
            for row, canonical, target in session.execute(stmt).all()]


def finish_task(session: Session, task_id: int) -> bool:
    """Mark an active task done; False if it was not active (cancelled or already done)."""
    result = session.execute(update(TaskRow).where(TaskRow.id == task_id, TaskRow.state == TaskState.ACTIVE)
                             .values(state=TaskState.DONE, updated_at=utcnow()))
    return bool(result.rowcount)  # type: ignore[attr-defined]


def lock_task(session: Session, task_id: int) -> TaskState | None:
    """Row-lock a task for the rest of the transaction (PostgreSQL; SQLite's write lock already
    serializes writers) and return its state, or None if it is gone."""
    state = session.scalar(select(TaskRow.state).where(TaskRow.id == task_id).with_for_update())
    return None if state is None else TaskState(state)
