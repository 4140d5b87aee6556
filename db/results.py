"""Model function for posting measurement results: validated first, idempotent, lease-checked.

A result is stored once per (workload, target, config): a retried post of a finished job returns the
same outcome ("duplicate") and stores nothing new; a post whose lease token no longer holds the job
is refused ("lease_lost", HTTP 409); a post with a valid lease token from a different worker than the
one that leased the job is refused ("forbidden", HTTP 403).
"""

from __future__ import annotations

import math
from typing import Sequence

from sqlalchemy import select, tuple_, update
from sqlalchemy.orm import Session

from db.domain import PostOutcome, ResultIn
from db.errors import ForbiddenError, InvalidInputError, LeaseLostError, NotFoundError
from db.orm import JobRow, MeasurementRow
from db.refs import insert_ignore, is_postgres
from db.timeutil import utcnow
from tuner.measure.base import MeasureResult

MAX_RESULTS_PER_POST = 1024


def validate_result(result: ResultIn) -> MeasureResult:
    """The domain check of one result (times finite and positive, known status and source)."""
    if any(isinstance(t, bool) or not isinstance(t, (int, float)) for t in result.times):
        raise InvalidInputError(f"job {result.job_id}: times must be numbers")
    if any(not math.isfinite(t) or t <= 0 for t in result.times):
        raise InvalidInputError(f"job {result.job_id}: times must be finite and positive, got {list(result.times)}")
    try:
        return MeasureResult(config={}, status=result.status, times=tuple(float(t) for t in result.times),
                             error=result.error, source=result.source, details=dict(result.details))
    except ValueError as exc:
        raise InvalidInputError(f"job {result.job_id}: {exc}") from None


def post_results(session: Session, *, lease_token: str, worker: str, results: Sequence[ResultIn],
                 token_id: int | None = None) -> list[PostOutcome]:
    """Store the results of leased jobs; one outcome per result, in order. Invalid input stores nothing."""
    if not results:
        return []
    if len(results) > MAX_RESULTS_PER_POST:
        raise InvalidInputError(f"at most {MAX_RESULTS_PER_POST} results per post, got {len(results)}")
    if len({r.job_id for r in results}) != len(results):
        raise InvalidInputError("a job id appears twice in one post")
    checked = {r.job_id: validate_result(r) for r in results}  # all or nothing: validate before writing
    stmt = select(JobRow).where(JobRow.id.in_(list(checked))).order_by(JobRow.id)
    if is_postgres(session):
        stmt = stmt.with_for_update()  # serializes with a concurrent reclaim or duplicate post of the same job
    jobs = {j.id: j for j in session.scalars(stmt).all()}

    outcomes: dict[int, PostOutcome] = {}
    to_store: list[JobRow] = []
    duplicates: list[JobRow] = []
    for r in results:
        job = jobs.get(r.job_id)
        if job is None:
            outcomes[r.job_id] = PostOutcome(r.job_id, "not_found")
        elif job.lease_token != lease_token or job.state not in ("leased", "done"):
            outcomes[r.job_id] = PostOutcome(r.job_id, "lease_lost")
        elif job.worker != worker or (token_id is not None and job.leased_by_token not in (None, token_id)):
            outcomes[r.job_id] = PostOutcome(r.job_id, "forbidden")
        elif job.state == "done":
            duplicates.append(job)  # a retried post: answer as before, store nothing
        else:
            to_store.append(job)

    if to_store:
        rows = []
        for job in to_store:
            m = checked[job.id]
            rows.append(dict(workload_id=job.workload_id, target_id=job.target_id, config_hash=job.config_hash,
                             config=job.config, times=list(m.times), mean_time=m.mean_time if m.ok else None,
                             status=m.status, error=m.error, worker=worker, source=m.source, details=m.details,
                             task_id=job.task_id, job_id=job.id))
        returned = session.execute(insert_ignore(session, MeasurementRow).values(rows).returning(
            MeasurementRow.id, MeasurementRow.workload_id, MeasurementRow.target_id, MeasurementRow.config_hash))
        inserted = {(w, t, h): mid for mid, w, t, h in returned}
        session.execute(update(JobRow).where(JobRow.id.in_([j.id for j in to_store]))
                        .values(state="done", finished_at=utcnow(), lease_expires_at=None))
        for job in to_store:
            key = (job.workload_id, job.target_id, job.config_hash)
            if key not in inserted:
                duplicates.append(job)  # measured before (e.g. imported from another site)
            else:
                outcomes[job.id] = PostOutcome(job.id, "stored", inserted[key])

    if duplicates:
        keys = [(j.workload_id, j.target_id, j.config_hash) for j in duplicates]
        found = {(w, t, h): mid for mid, w, t, h in session.execute(
            select(MeasurementRow.id, MeasurementRow.workload_id, MeasurementRow.target_id, MeasurementRow.config_hash)
            .where(tuple_(MeasurementRow.workload_id, MeasurementRow.target_id, MeasurementRow.config_hash).in_(keys)))}
        for job in duplicates:
            outcomes[job.id] = PostOutcome(job.id, "duplicate", found.get((job.workload_id, job.target_id,
                                                                           job.config_hash)))
    return [outcomes[r.job_id] for r in results]


def post_result(session: Session, *, lease_token: str, worker: str, result: ResultIn,
                token_id: int | None = None) -> PostOutcome:
    """Single-result form: refusals become exceptions (404, 409, 403)."""
    (outcome,) = post_results(session, lease_token=lease_token, worker=worker, results=[result], token_id=token_id)
    if outcome.outcome == "not_found":
        raise NotFoundError(f"job {result.job_id} does not exist")
    if outcome.outcome == "lease_lost":
        raise LeaseLostError(f"lease lost: job {result.job_id} is no longer held by this lease token "
                             "(it expired and was reclaimed, was released, or was never leased with it)")
    if outcome.outcome == "forbidden":
        raise ForbiddenError(f"job {result.job_id} was leased by another worker")
    return outcome
