"""Model function for posting measurement results: validated first, idempotent, lease-checked.

A result is stored once per (workload, target, config): a retried post of a finished job returns the
same outcome ("duplicate") and stores nothing new; a post whose lease token no longer holds the job
is refused ("lease_lost", HTTP 409); a post with a valid lease token from a different worker than the
one that leased the job is refused ("forbidden", HTTP 403).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, tuple_, update
from sqlalchemy.orm import Session

from db.domain import PostOutcome, ResultIn
from db.errors import ForbiddenError, InvalidInputError, LeaseLostError, NotFoundError
from db.orm import JobRow, MeasurementRow, TargetRow, WorkerRow, WorkloadRow
from db.profiles import get_profile
from db.refs import insert_ignore, is_postgres, workload_of
from db.states import JobState
from db.timeutil import utcnow
from db.validation import CheckedMeasurement, check_measurement
from tuner.measure.base import SOURCES, STATUSES

MAX_RESULTS_PER_POST = 1024


def validate_result(result: ResultIn, job: JobRow, workload_json: str, target: str, *, worker: str,
                    backend: str | None) -> CheckedMeasurement:
    """The measurement check (db.validation) of one result against the job it answers."""
    try:
        return check_measurement(workload_of(workload_json), target, config=job.config, status=result.status,
                                 times=list(result.times), error=result.error, source=result.source,
                                 details=result.details, worker=worker, backend=backend)
    except InvalidInputError as exc:
        raise InvalidInputError(f"job {result.job_id}: {exc}") from None


def _check_profiles(session: Session, named: dict[int, tuple[str, int | None]]) -> None:
    """A simulated time names a profile its target has (0, the built-in one, always exists): a version
    that does not exist is the worker's error, and the whole post is refused. One query per distinct
    (target, version), not per result."""
    seen: set[tuple[str, int]] = set()
    for job_id, (target, version) in sorted(named.items()):
        if not version or (target, version) in seen:
            continue
        try:
            get_profile(session, target, version)
        except NotFoundError:
            raise InvalidInputError(f"job {job_id}: {target} has no profile version {version} (the simulator "
                                    "profile details.profile_version names)") from None
        seen.add((target, version))


def post_results(session: Session, *, lease_token: str, worker: str, results: Sequence[ResultIn],
                 token_id: int | None = None) -> list[PostOutcome]:
    """Store the results of leased jobs; one outcome per result, in order. Invalid input stores nothing."""
    if not results:
        return []
    if len(results) > MAX_RESULTS_PER_POST:
        raise InvalidInputError(f"at most {MAX_RESULTS_PER_POST} results per post, got {len(results)}")
    if len({r.job_id for r in results}) != len(results):
        raise InvalidInputError("a job id appears twice in one post")
    for r in results:  # the names are checked even for a job that turns out not to exist
        if r.status not in STATUSES or r.source not in SOURCES:
            raise InvalidInputError(f"job {r.job_id}: unknown status {r.status!r} or source {r.source!r}")
    stmt = (select(JobRow, WorkloadRow.canonical_json, TargetRow.name)
            .join(WorkloadRow, WorkloadRow.id == JobRow.workload_id)
            .join(TargetRow, TargetRow.id == JobRow.target_id)
            .where(JobRow.id.in_([r.job_id for r in results])).order_by(JobRow.id))
    if is_postgres(session):
        # serializes with a concurrent reclaim or duplicate post of the same job
        stmt = stmt.with_for_update(of=JobRow)
    by_id = {j.id: (j, wl, tname) for j, wl, tname in session.execute(stmt).all()}
    jobs = {i: f[0] for i, f in by_id.items()}
    backend = session.scalar(select(WorkerRow.backend).where(WorkerRow.name == worker))
    # all or nothing: every result of a known job is validated before anything is written
    checked = {r.job_id: validate_result(r, *by_id[r.job_id], worker=worker, backend=backend)
               for r in results if r.job_id in by_id}
    _check_profiles(session, {job_id: (by_id[job_id][2], m.profile_version) for job_id, m in checked.items()})

    outcomes: dict[int, PostOutcome] = {}
    to_store: list[JobRow] = []
    duplicates: list[JobRow] = []
    for r in results:
        job = jobs.get(r.job_id)
        if job is None:
            outcomes[r.job_id] = PostOutcome(r.job_id, "not_found")
        elif job.lease_token != lease_token or job.state not in (JobState.LEASED, JobState.DONE):
            outcomes[r.job_id] = PostOutcome(r.job_id, "lease_lost")
        elif job.worker != worker or (token_id is not None and job.leased_by_token not in (None, token_id)):
            outcomes[r.job_id] = PostOutcome(r.job_id, "forbidden")
        elif job.state == JobState.DONE:
            duplicates.append(job)  # a retried post: answer as before, store nothing
        else:
            to_store.append(job)

    if to_store:
        rows = []
        for job in to_store:
            m = checked[job.id]
            rows.append(dict(workload_id=job.workload_id, target_id=job.target_id, config_hash=job.config_hash,
                             config=job.config, times=list(m.times), mean_time=m.mean_time,
                             status=m.status, error=m.error, worker=worker, source=m.source, details=m.details,
                             profile_version=m.profile_version, task_id=job.task_id, job_id=job.id))
        returned = session.execute(insert_ignore(session, MeasurementRow).values(rows).returning(
            MeasurementRow.id, MeasurementRow.workload_id, MeasurementRow.target_id, MeasurementRow.config_hash))
        inserted = {(w, t, h): mid for mid, w, t, h in returned}
        session.execute(update(JobRow).where(JobRow.id.in_([j.id for j in to_store]))
                        .values(state=JobState.DONE, finished_at=utcnow(), lease_expires_at=None))
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
