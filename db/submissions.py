"""Model submissions: one trial budget for a whole model, spread over its tasks by the driver.

A submission is a model name, a target, one total trial budget and its tasks: one per distinct
workload, with the model's layer names that run it, how many times the model calls it
(``call_count``) and its ``weight``, the estimated seconds of one model run it accounts for
(call count x baseline time; the driver fills it in). Its id is also its tasks' ``batch``.

The budget is spent by grants: each task of a submission starts with a trial budget of 0 and the
driver raises it, a round at a time, for the task the gradient scheduler picks (service.driver).
Everything the driver decides from is here, in the database, so a restarted driver picks up where
the last one stopped. This module stores and reads; the scheduling policy lives in the driver.
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from db.domain import JobCounts
from db.errors import InvalidInputError, found_one
from db.orm import JobRow, MeasurementRow, SubmissionRow, TargetRow, TaskRow, WorkloadRow
from db.refs import parse_workload, target_id, target_name, workload_id, workload_of
from db.states import FINISHED_JOBS, JobState, SubmissionState, TaskState
from db.tasks import MAX_BUDGET, MAX_SEED, check_strategy, job_counts
from db.timeutil import as_utc, utcnow
from tuner.measure.base import OK
from tuner.workloads import Workload

MAX_LAYERS = 1000  # layers (and so tasks) of one submission
MAX_NAME = 128  # model and layer names (the columns' width)
MAX_CALLS = 1_000_000
MAX_PER_ROUND = 512
ID_CHARS = 64  # submissions.id


@dataclass(frozen=True)
class LayerSpec:
    """One layer of a model as submitted: its name, its workload and how many times the model runs it."""

    name: str
    workload: Workload | dict[str, Any] | str
    calls: int = 1


@dataclass(frozen=True)
class SubmissionTask(JobCounts):
    """A task of a submission: the layers it stands for and its progress."""

    task_id: int
    workload: Workload
    label: str
    layer_names: tuple[str, ...]
    call_count: int
    weight: float | None  # estimated seconds per model run: call_count x baseline time (None: no estimate)
    state: TaskState
    granted: int  # the task's trial budget: what the driver has granted it so far
    done: int
    failed: int
    pending: int
    leased: int
    best_time: float | None


@dataclass(frozen=True)
class SubmissionHead:
    """A model submission as it was asked for (model, target, budget, search) and its state, without
    its tasks: what the API answers about it beside them."""

    id: str
    model: str
    target: str
    trial_budget: int
    per_round: int
    early_stop: int | None
    strategy: str
    seed: int
    state: SubmissionState
    submitter: str
    created_at: datetime | None


@dataclass(frozen=True)
class Submission(SubmissionHead):
    updated_at: datetime | None
    tasks: tuple[SubmissionTask, ...]

    @property
    def trials_done(self) -> int:
        return sum(t.trials_done for t in self.tasks)

    @property
    def trials_queued(self) -> int:
        return sum(t.queued for t in self.tasks)

    @property
    def spent(self) -> int:
        """Trials of the budget used or promised: an active task's grant, or what a stopped task used."""
        return sum(max(t.granted, t.trials_done + t.queued) if t.state == TaskState.ACTIVE else t.trials_done + t.queued
                   for t in self.tasks)


def _check_int(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInputError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    return value


def _check_name(what: str, value: Any) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_NAME:
        raise InvalidInputError(f"{what} must be a string of 1 to {MAX_NAME} characters")
    return value


def _merge(layers: Sequence[LayerSpec]) -> list[tuple[Workload, list[str], int]]:
    """Layers that run the same workload become one task whose call count is the sum of theirs
    (a config is queued once per workload and target, so two tasks on one workload would compete)."""
    merged: dict[str, tuple[Workload, list[str], int]] = {}
    for i, layer in enumerate(layers):
        name = _check_name(f"layers[{i}].name", layer.name)
        calls = _check_int(f"layers[{i}].calls", layer.calls, 1, MAX_CALLS)
        try:
            wl = parse_workload(layer.workload)
        except InvalidInputError as exc:
            raise InvalidInputError(f"layers[{i}]: {exc}") from None
        if wl.key in merged:
            _, names, n = merged[wl.key]
            names.append(name)
            merged[wl.key] = (wl, names, n + calls)
        else:
            merged[wl.key] = (wl, [name], calls)
    return list(merged.values())


def create_submission(session: Session, model: str, layers: Sequence[LayerSpec], target: str, trials: int,
                      strategy: str, *, per_round: int = 16, early_stop: int | None = None, seed: int = 0,
                      submitter: str = "", submitter_token_id: int | None = None,
                      known_strategies: Iterable[str] | None = None) -> Submission:
    """A submission and one task per distinct workload, in one transaction: bad input writes nothing.

    Weights are left unset: estimating them simulates every task's baseline schedule, which is the
    driver's work (``set_weights``), not a request's."""
    _check_name("model", model)
    if not layers or len(layers) > MAX_LAYERS:
        raise InvalidInputError(f"a submission needs 1 to {MAX_LAYERS} layers, got {len(layers)}")
    _check_int("trials", trials, 1, MAX_BUDGET)
    _check_int("per_round", per_round, 1, MAX_PER_ROUND)
    if early_stop is not None:
        _check_int("early_stop", early_stop, 1, MAX_BUDGET)
    _check_int("seed", seed, 0, MAX_SEED)
    if len(submitter) > MAX_NAME:
        raise InvalidInputError(f"submitter names have at most {MAX_NAME} characters")
    tname = target_name(target)
    tasks = _merge(layers)
    check_strategy(strategy, known_strategies, [wl for wl, _, _ in tasks])
    sid = uuid.uuid4().hex[:16]
    tid = target_id(session, tname)
    session.add(SubmissionRow(id=sid, model=model, target_id=tid, trial_budget=trials, per_round=per_round,
                              early_stop=early_stop, strategy=strategy, seed=seed, state=SubmissionState.ACTIVE,
                              submitter=submitter, submitter_token_id=submitter_token_id))
    session.flush()  # the tasks' foreign key needs the row on PostgreSQL
    for wl, names, calls in tasks:
        label = names[0] if len(names) == 1 else f"{names[0]} (+{len(names) - 1})"
        session.add(TaskRow(workload_id=workload_id(session, wl), target_id=tid, label=label[:MAX_NAME], batch=sid,
                            trial_budget=0, strategy=strategy, seed=seed, state=TaskState.ACTIVE, submitter=submitter,
                            submitter_token_id=submitter_token_id, submission_id=sid, call_count=calls,
                            layer_names=names, weight=None))
    session.flush()
    return get_submission(session, sid)


def _best_times(session: Session, task_ids: Sequence[int]) -> dict[int, float]:
    """The best successful time among each task's finished jobs (as the task curve counts them)."""
    if not task_ids:
        return {}
    stmt = (select(JobRow.task_id, MeasurementRow.mean_time)
            .join(MeasurementRow, (MeasurementRow.workload_id == JobRow.workload_id)
                  & (MeasurementRow.target_id == JobRow.target_id)
                  & (MeasurementRow.config_hash == JobRow.config_hash))
            .where(JobRow.task_id.in_(task_ids), JobRow.state == JobState.DONE,
                   MeasurementRow.status == OK))
    best: dict[int, float] = {}
    for task_id, t in session.execute(stmt).all():
        if t is not None and math.isfinite(t) and (task_id not in best or t < best[task_id]):
            best[task_id] = float(t)
    return best


def get_submission(session: Session, submission_id: str) -> Submission:
    return found_one(_submissions(session, [submission_id]), f"submission {submission_id!r}")


def _submissions(session: Session, ids: Sequence[str]) -> list[Submission]:
    ids = [i for i in ids if isinstance(i, str) and 0 < len(i) <= ID_CHARS]
    if not ids:
        return []
    subs = session.execute(select(SubmissionRow, TargetRow.name)
                           .join(TargetRow, TargetRow.id == SubmissionRow.target_id)
                           .where(SubmissionRow.id.in_(ids))).all()
    if not subs:
        return []
    rows = list(session.scalars(select(TaskRow).where(TaskRow.submission_id.in_([s.id for s, _ in subs]))
                                .order_by(TaskRow.id)).all())
    ids_of_tasks = [r.id for r in rows]
    counts = job_counts(session, ids_of_tasks)
    best = _best_times(session, ids_of_tasks)
    canon = dict(session.execute(select(WorkloadRow.id, WorkloadRow.canonical_json)
                                 .where(WorkloadRow.id.in_({r.workload_id for r in rows}))).all())
    by_sub: dict[str, list[SubmissionTask]] = defaultdict(list)
    for r in rows:
        c = counts[r.id]
        by_sub[r.submission_id or ""].append(SubmissionTask(
            task_id=r.id, workload=workload_of(canon[r.workload_id]), label=r.label,
            layer_names=tuple(r.layer_names or ()), call_count=r.call_count, weight=r.weight,
            state=TaskState(r.state), granted=r.trial_budget, done=c[JobState.DONE], failed=c[JobState.FAILED],
            pending=c[JobState.PENDING], leased=c[JobState.LEASED],
            best_time=best.get(r.id)))
    order = {sid: i for i, sid in enumerate(ids)}
    out = [Submission(id=s.id, model=s.model, target=tname, trial_budget=s.trial_budget, per_round=s.per_round,
                      early_stop=s.early_stop, strategy=s.strategy, seed=s.seed, state=SubmissionState(s.state),
                      submitter=s.submitter,
                      created_at=as_utc(s.created_at), updated_at=as_utc(s.updated_at),
                      tasks=tuple(by_sub.get(s.id, ())))
           for s, tname in subs]
    return sorted(out, key=lambda s: order[s.id])


def active_submission_ids(session: Session) -> list[str]:
    return list(session.scalars(select(SubmissionRow.id).where(SubmissionRow.state == SubmissionState.ACTIVE)
                                .order_by(SubmissionRow.created_at, SubmissionRow.id)).all())


def lock_submission(session: Session, submission_id: str) -> SubmissionState | None:
    """Row-lock a submission for the rest of the transaction and return its state (None if gone):
    grants are decided under this lock, so two drivers never grant from one budget at once."""
    state = session.scalar(select(SubmissionRow.state).where(SubmissionRow.id == submission_id).with_for_update())
    return None if state is None else SubmissionState(state)


def trial_times(session: Session, submission_id: str) -> dict[int, list[float | None]]:
    """Per task of the submission, its finished trials in completion order: the measured mean time,
    or None for a failed config or a job given up (what the scheduler's history is rebuilt from)."""
    stmt = (select(JobRow.task_id, MeasurementRow.status, MeasurementRow.mean_time)
            .join(TaskRow, TaskRow.id == JobRow.task_id)
            .outerjoin(MeasurementRow, (MeasurementRow.workload_id == JobRow.workload_id)
                       & (MeasurementRow.target_id == JobRow.target_id)
                       & (MeasurementRow.config_hash == JobRow.config_hash))
            .where(TaskRow.submission_id == submission_id, JobRow.state.in_(FINISHED_JOBS))
            .order_by(JobRow.finished_at, JobRow.id))
    out: dict[int, list[float | None]] = defaultdict(list)
    for task_id, status, t in session.execute(stmt).all():
        out[task_id].append(float(t) if status == OK and t is not None and math.isfinite(t) else None)
    return dict(out)


def set_weights(session: Session, weights: dict[int, float]) -> None:
    """Store tasks' weights (estimated seconds per model run: call count x time per call)."""
    for task_id, weight in weights.items():
        if math.isfinite(weight) and weight >= 0:
            session.execute(update(TaskRow).where(TaskRow.id == task_id).values(weight=weight))


def grant(session: Session, task_id: int, trials: int) -> None:
    """Raise an active task's trial budget by ``trials`` (the driver's per-round grant)."""
    session.execute(update(TaskRow).where(TaskRow.id == task_id, TaskRow.state == TaskState.ACTIVE)
                    .values(trial_budget=TaskRow.trial_budget + trials, updated_at=utcnow()))


def finish_submission(session: Session, submission_id: str,
                      state: SubmissionState = SubmissionState.DONE) -> bool:
    """Close a submission (done, or cancelled when every task was): its still active tasks are done.
    False if it was not active."""
    result = session.execute(update(SubmissionRow).where(SubmissionRow.id == submission_id,
                                                         SubmissionRow.state == SubmissionState.ACTIVE)
                             .values(state=state, updated_at=utcnow()))
    if not result.rowcount:  # type: ignore[attr-defined]
        return False
    session.execute(update(TaskRow).where(TaskRow.submission_id == submission_id, TaskRow.state == TaskState.ACTIVE)
                    .values(state=TaskState.DONE, updated_at=utcnow()))
    return True
