"""Worker endpoints: lease jobs (long-poll), heartbeat, release, post results; list workers."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Path, Request
from starlette.concurrency import run_in_threadpool

from db import jobs as jobs_db
from db import results as results_db
from db import workers as workers_db
from db.domain import Lease, PostOutcome, ResultIn
from service.auth import Reader, WorkerAuth
from service.deps import AppState, Db
from service.errors import AUTH, BODY, responses
from service.limits import LongPolls
from service.schemas import (
    MAX_JOB_ID,
    HeartbeatIn,
    HeartbeatOut,
    LeaseOut,
    LeaseRequest,
    ReleaseIn,
    ReleaseOut,
    ResultFields,
    ResultOut,
    ResultPost,
    ResultsOut,
    ResultsPost,
    WorkerOut,
)
from service.views import job_out

router = APIRouter(prefix="/api/v1", tags=["workers"], responses=responses(*AUTH))
JobIdPath = Annotated[int, Path(ge=1, le=MAX_JOB_ID, description="job id")]


# OpenAPI link: the ids of leased jobs are what the result route takes.
_LEASE_LINKS = {"PostResult": {"operationId": "post_result_api_v1_jobs__job_id__result_post",
                               "parameters": {"job_id": "$response.body#/jobs/0/id"}}}


@router.post("/jobs/lease", response_model=LeaseOut,
             responses={200: {"description": "the leased jobs (maybe none)", "links": _LEASE_LINKS},
                        **responses(*BODY)})
async def lease(body: LeaseRequest, request: Request, state: AppState, principal: WorkerAuth) -> LeaseOut:
    """Lease up to max_jobs pending jobs of a target; with wait_seconds, wait for work to appear."""
    settings = state.settings

    def once() -> Lease:
        with state.db.session() as s:
            return jobs_db.lease(s, target=body.target, worker=body.worker,
                                 max_jobs=min(body.max_jobs, settings.max_lease_batch),
                                 lease_seconds=settings.lease_seconds, token_id=principal.token_id,
                                 backend=body.backend)

    wait = min(body.wait_seconds, settings.long_poll_max_seconds)
    polls: LongPolls = state.long_polls
    # Past the cap on concurrent long-polls a lease answers at once (maybe with no jobs): the
    # worker simply asks again, and idle connections cannot pile up without bound.
    holding = wait > 0 and polls.enter()
    deadline = time.monotonic() + (wait if holding else 0.0)
    try:
        while True:
            got = await run_in_threadpool(once)
            remaining = deadline - time.monotonic()
            if got.jobs or remaining <= 0 or await request.is_disconnected():
                break
            # Woken at once when this process's driver queues jobs; the periodic re-check finds jobs
            # queued by another replica.
            await state.job_signal.wait(min(settings.long_poll_interval_seconds * 4, remaining))
    finally:
        if holding:
            polls.leave()
    state.metrics.jobs_leased.inc(len(got.jobs))
    return LeaseOut(lease_token=got.token, lease_seconds=got.lease_seconds, jobs=[job_out(j) for j in got.jobs],
                    profile=got.profile.to_json() if got.profile is not None else None)


@router.post("/jobs/heartbeat", response_model=HeartbeatOut, responses=responses(*BODY, 409))
def heartbeat(body: HeartbeatIn, db: Db, state: AppState, principal: WorkerAuth) -> HeartbeatOut:
    with db.session() as s:
        ids = jobs_db.heartbeat(s, lease_token=body.lease_token, worker=body.worker,
                                lease_seconds=state.settings.lease_seconds, token_id=principal.token_id)
    return HeartbeatOut(job_ids=ids, lease_seconds=state.settings.lease_seconds)


@router.post("/jobs/release", response_model=ReleaseOut, responses=responses(*BODY))
def release(body: ReleaseIn, db: Db, state: AppState, principal: WorkerAuth) -> ReleaseOut:
    with db.session() as s:
        ids = jobs_db.release(s, lease_token=body.lease_token, worker=body.worker, job_ids=body.job_ids,
                              token_id=principal.token_id)
    state.job_signal.notify()  # the released jobs are pending again: wake pollers
    return ReleaseOut(released=ids)


def _after_post(state: AppState, outcomes: list[PostOutcome]) -> None:
    for o in outcomes:
        state.metrics.results.labels(o.outcome).inc()
    if any(o.outcome == "stored" for o in outcomes):
        state.lookup_cache.clear()  # a new best may have arrived
        if state.driver is not None:
            state.driver.wake()


def _out(o: PostOutcome) -> ResultOut:
    return ResultOut(job_id=o.job_id, outcome=o.outcome, measurement_id=o.measurement_id)  # type: ignore[arg-type]


def _result_in(job_id: int, body: ResultFields) -> ResultIn:
    return ResultIn(job_id=job_id, status=body.status, times=tuple(body.times), error=body.error,
                    source=body.source, details=body.details)


@router.post("/jobs/{job_id}/result", response_model=ResultOut, responses=responses(*BODY, 404, 409))
def post_result(job_id: JobIdPath, body: ResultPost, db: Db, state: AppState, principal: WorkerAuth) -> ResultOut:
    """Post one job's result: idempotent (a retry answers "duplicate"), 409 when the lease is lost."""
    with db.session() as s:
        outcome = results_db.post_result(s, lease_token=body.lease_token, worker=body.worker,
                                         result=_result_in(job_id, body), token_id=principal.token_id)
    _after_post(state, [outcome])
    return _out(outcome)


@router.post("/jobs/results", response_model=ResultsOut, responses=responses(*BODY))
def post_results(body: ResultsPost, db: Db, state: AppState, principal: WorkerAuth) -> ResultsOut:
    """Post a batch of results of one lease; one outcome per result (refusals do not fail the batch,
    invalid values do: 422 and nothing stored)."""
    with db.session() as s:
        outcomes = results_db.post_results(s, lease_token=body.lease_token, worker=body.worker,
                                           results=[_result_in(r.job_id, r) for r in body.results],
                                           token_id=principal.token_id)
    _after_post(state, outcomes)
    return ResultsOut(results=[_out(o) for o in outcomes])


@router.get("/workers", response_model=list[WorkerOut])
def list_workers(db: Db, _: Reader) -> list[WorkerOut]:
    with db.session() as s:
        return [WorkerOut(**w.__dict__) for w in workers_db.list_workers(s)]
