"""Model functions for measure jobs: enqueue, lease, heartbeat, release, reclaim expired leases.

A lease for a simulator worker carries its target's active simulator profile (db.profiles): the worker
measures with it, and its results name the version.

Lifecycle: pending -> leased -> done | failed. Leases are decided by the database clock. On
PostgreSQL a lease picks rows with SELECT ... FOR UPDATE SKIP LOCKED so concurrent workers never
wait on each other; on SQLite (one writer at a time) a guarded UPDATE (state='pending' in the WHERE
clause, rowcount checked) does the same job.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from sqlalchemy import case, func, select, update
from sqlalchemy.orm import Session

from db.domain import Job, Lease
from db.errors import ForbiddenError, InvalidInputError, LeaseLostError
from db.orm import JobRow, TargetRow, WorkloadRow
from db.profiles import active_profile
from db.refs import insert_ignore, is_postgres, target_id, workload_of
from db.states import JobState
from db.timeutil import utcnow, utcnow_plus
from db.workers import touch_worker
from tuner.backends.registry import BackendName
from tuner.space.space import config_hash

MAX_LEASE_BATCH = 512
# The backends a lease hands the target's active simulator profile to: the simulator, and a worker that
# did not name its backend (an older agent, a test), which may be one.
PROFILED_BACKENDS = frozenset({"", BackendName.SIMULATOR.value})


def enqueue(session: Session, task_id: int, workload_id: int, target_id_: int,
            configs: Sequence[dict[str, Any]], max_attempts: int) -> list[dict[str, Any]]:
    """Queue configs; a config already queued or done for this (workload, target) is skipped.
    Returns the configs actually queued."""
    if not configs:
        return []
    values: list[dict[str, Any]] = [dict(task_id=task_id, workload_id=workload_id, target_id=target_id_, config=dict(c),
                   config_hash=config_hash(c), state=JobState.PENDING, attempts=0, max_attempts=max_attempts, error="")
              for c in configs]
    inserted: set[str] = set()
    for start in range(0, len(values), 1000):  # PostgreSQL takes at most 65535 parameters a statement
        stmt = insert_ignore(session, JobRow).values(values[start:start + 1000]).returning(JobRow.config_hash)
        inserted.update(session.scalars(stmt).all())
    return [v["config"] for v in values if v["config_hash"] in inserted]


def reclaim_expired(session: Session) -> tuple[int, int]:
    """Expired leases go back to pending, or to failed once their attempts are used up.
    Returns (returned to pending, failed)."""
    pick = select(JobRow.id).where(JobRow.state == JobState.LEASED, JobRow.lease_expires_at < utcnow())
    if is_postgres(session):
        pick = pick.with_for_update(skip_locked=True)
    ids = list(session.scalars(pick).all())
    if not ids:
        return 0, 0
    exhausted = JobRow.attempts >= JobRow.max_attempts
    rows = session.execute(
        update(JobRow).where(JobRow.id.in_(ids), JobRow.state == JobState.LEASED)
        .values(state=case((exhausted, JobState.FAILED), else_=JobState.PENDING),
                error=case((exhausted, "lease expired on its last attempt (worker lost)"), else_=JobRow.error),
                finished_at=case((exhausted, utcnow()), else_=None),
                lease_token=None, lease_expires_at=None, worker=None, leased_by_token=None)
        .returning(JobRow.state)).scalars().all()
    failed = sum(1 for s in rows if s == JobState.FAILED)
    return len(rows) - failed, failed


def _jobs_for_token(session: Session, token: str) -> list[Job]:
    stmt = (select(JobRow, WorkloadRow.canonical_json, TargetRow.name)
            .join(WorkloadRow, WorkloadRow.id == JobRow.workload_id)
            .join(TargetRow, TargetRow.id == JobRow.target_id)
            .where(JobRow.lease_token == token, JobRow.state == JobState.LEASED).order_by(JobRow.id))
    return [Job(id=row.id, task_id=row.task_id, workload=workload_of(canonical), target=target, config=row.config,
                config_hash=row.config_hash, attempts=row.attempts, state=JobState(row.state))
            for row, canonical, target in session.execute(stmt).all()]


def lease(session: Session, *, target: str, worker: str, max_jobs: int, lease_seconds: float,
          token_id: int | None = None, backend: str = "") -> Lease:
    """Lease up to ``max_jobs`` pending jobs of ``target`` under one new lease token (maybe none)."""
    if not 1 <= max_jobs <= MAX_LEASE_BATCH:
        raise InvalidInputError(f"max_jobs must be in [1, {MAX_LEASE_BATCH}], got {max_jobs}")
    if not worker:
        raise InvalidInputError("a worker name is required")
    tid = target_id(session, target)
    reclaim_expired(session)
    token = secrets.token_urlsafe(24)
    pick = (select(JobRow.id).where(JobRow.target_id == tid, JobRow.state == JobState.PENDING)
            .order_by(JobRow.id).limit(max_jobs))
    if is_postgres(session):
        pick = pick.with_for_update(skip_locked=True)
    ids = list(session.scalars(pick).all())
    leased = 0
    if ids:
        result = session.execute(
            update(JobRow).where(JobRow.id.in_(ids), JobRow.state == JobState.PENDING)  # the guard: still pending
            .values(state=JobState.LEASED, lease_token=token, lease_expires_at=utcnow_plus(float(lease_seconds)),
                    attempts=JobRow.attempts + 1, worker=worker, leased_by_token=token_id))
        leased = result.rowcount  # type: ignore[attr-defined]
    touch_worker(session, worker, target=target, backend=backend, token_id=token_id, leased=leased)
    if not leased:
        return Lease(token=token, lease_seconds=lease_seconds, jobs=())
    # read in the lease's transaction: the profile a worker measures with is the one active when it leased
    profile = active_profile(session, target) if backend in PROFILED_BACKENDS else None
    return Lease(token=token, lease_seconds=lease_seconds, jobs=tuple(_jobs_for_token(session, token)),
                 profile=profile)


def _check_holder(session: Session, token: str, worker: str, token_id: int | None,
                  job_ids: Sequence[int] | None = None) -> list[int]:
    """Ids of the leased jobs this lease token holds, after checking the caller is their lessee."""
    stmt = select(JobRow.id, JobRow.worker, JobRow.leased_by_token).where(
        JobRow.lease_token == token, JobRow.state == JobState.LEASED)
    if job_ids is not None:
        stmt = stmt.where(JobRow.id.in_(list(job_ids)))
    if is_postgres(session):
        stmt = stmt.with_for_update()
    rows = session.execute(stmt).all()
    for _id, holder, holder_token in rows:
        if holder != worker:
            raise ForbiddenError(f"lease is held by worker {holder!r}, not {worker!r}")
        if token_id is not None and holder_token is not None and holder_token != token_id:
            raise ForbiddenError(f"lease of worker {worker!r} was taken with another API token; "
                                 "only that token may use it")
    return [r[0] for r in rows]


def heartbeat(session: Session, *, lease_token: str, worker: str, lease_seconds: float,
              token_id: int | None = None) -> list[int]:
    """Extend every job the lease still holds; LeaseLostError if it holds none."""
    ids = _check_holder(session, lease_token, worker, token_id)
    if not ids:
        raise LeaseLostError("lease lost: it holds no job any more (expired, released or finished)")
    session.execute(update(JobRow).where(JobRow.id.in_(ids))
                    .values(lease_expires_at=utcnow_plus(float(lease_seconds))))
    touch_worker(session, worker, token_id=token_id)
    return ids


def release(session: Session, *, lease_token: str, worker: str, job_ids: Sequence[int] | None = None,
            token_id: int | None = None) -> list[int]:
    """Hand jobs back (a stopping worker): pending again, and the attempt does not count."""
    ids = _check_holder(session, lease_token, worker, token_id, job_ids)
    if ids:
        session.execute(update(JobRow).where(JobRow.id.in_(ids))
                        .values(state=JobState.PENDING, lease_token=None, lease_expires_at=None, worker=None,
                                leased_by_token=None, attempts=func.max(JobRow.attempts - 1, 0)
                                if not is_postgres(session) else func.greatest(JobRow.attempts - 1, 0)))
    return ids


def jobs_of_workload(session: Session, workload_id: int, target_id_: int,
                     after_id: int = 0) -> list[tuple[int, str, dict[str, Any]]]:
    """(id, state, config) of every job of a (workload, target) with id > after_id, oldest first."""
    stmt = (select(JobRow.id, JobRow.state, JobRow.config)
            .where(JobRow.workload_id == workload_id, JobRow.target_id == target_id_, JobRow.id > after_id)
            .order_by(JobRow.id))
    return [tuple(r) for r in session.execute(stmt).all()]


def count_jobs(session: Session, **filters: Any) -> dict[str, int]:
    stmt = select(JobRow.state, func.count()).group_by(JobRow.state)
    for name, value in filters.items():
        stmt = stmt.where(getattr(JobRow, name) == value)
    return {state: n for state, n in session.execute(stmt).all()}
