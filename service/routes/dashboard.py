"""The web dashboard: its static files (service/ui, served at /ui, / redirects there) and the read-only
JSON views it needs beyond the task and worker endpoints: a task's trials one by one, the leases
workers hold, tasks grouped by submission with a per-layer baseline comparison (a model submission's
end-to-end estimate counts each layer as many times as the model calls it), and the key of a
workload spec. A read token is enough for all of them; the static files need none (the page asks for
a token when the API answers 401).
"""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path as FsPath
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Path, Query
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from db import history
from db import tasks as tasks_db
from db.domain import TaskInfo
from db.refs import parse_workload, target_name
from db.states import SubmissionState
from service.auth import Reader
from service.deps import Db
from service.errors import AUTH, responses
from tuner.baseline import baseline_time
from tuner.workloads import Rate, rate, rate_of

UI_DIR = FsPath(__file__).resolve().parents[1] / "ui"

# Ids are 32-bit integer columns: larger path values are refused (422) before they reach PostgreSQL.
TaskId = Annotated[int, Path(ge=1, le=2**31 - 1, description="task id")]
Batch = Annotated[str, Path(min_length=1, max_length=64, description="submission id (the tasks' batch)")]

router = APIRouter(prefix="/api/v1", tags=["dashboard"], responses=responses(*AUTH))
root = APIRouter(include_in_schema=False)


# --- wire schemas -----------------------------------------------------------------------------
class TrialOut(BaseModel):
    trial: int
    job_id: int
    status: str = Field(description="measurement status, or given_up when no worker ever posted a result")
    mean_time: float | None
    gflops: float | None
    worker: str
    error: str
    finished_at: datetime | None


class WorkerTallyOut(BaseModel):
    worker: str
    trials: int
    ok: int
    failed: int
    best_time: float | None
    best_gflops: float | None
    last_at: datetime | None


class TaskTrialsOut(BaseModel):
    task_id: int
    flops: int
    trials: list[TrialOut] = Field(description="finished trials in completion order")
    workers: list[WorkerTallyOut]


class WorkerLeasesOut(BaseModel):
    worker: str
    jobs: int
    task_ids: list[int]
    next_expiry: datetime | None


class LeasesOut(BaseModel):
    database_time: datetime = Field(description="the clock lease expiries are decided by")
    leases: list[WorkerLeasesOut]


# a submission as the tuning log knows it (db.history.SubmissionInfo), field for field; these fields
# carry their descriptions into the API's schema (no docstring: the schema carries no description)
@pydantic_dataclass(frozen=True, kw_only=True)
class SubmissionOut(history.SubmissionInfo):
    trial_budget: int = Field(description="a model submission's one budget, else the sum of its tasks' budgets")
    model: str | None = Field(description="the model's name; null for tasks submitted one per workload")
    state: SubmissionState | None = Field(
        description="a model submission's state; null for tasks submitted one per workload")
    calls: int = Field(description="layer calls of one model run (the sum of the tasks' call counts)")


class LayerOut(BaseModel):
    task_id: int
    label: str
    layer_names: list[str] = Field(description="the model's layers this task stands for")
    call_count: int = Field(description="how many times one model run calls this task's workload")
    workload_key: str
    workload_label: str = Field(description="a short name of the workload (operator, shapes, dtype)")
    workload: dict[str, Any]
    state: str
    untuned_reason: str | None = Field(
        None, description="set when the task ended without any successful measurement: why")
    trials_done: int
    trial_budget: int = Field(description="in a model submission: the trials granted to this task so far")
    baseline_time: float | None = Field(description="one call under the OpenACC-like schedule, on the simulator")
    tuned_time: float | None = Field(description="one call: the best time among this task's trials")
    speedup: float | None
    gflops: float | None
    gbps: float | None = Field(None, description="a memory-bound task's tuned rate in GB/s (see TaskOut.best_gbps)")
    share: float | None = Field(description="share of the tuned end-to-end time (call count x time)")


@pydantic_dataclass(frozen=True, kw_only=True)
class SubmissionReportOut(SubmissionOut):
    # every field is a Field(): a dataclass's plain fields would move behind them, reordering the body
    layers: list[LayerOut] = Field()
    baseline_total: float | None = Field(
        description="end-to-end baseline estimate: sum of call count x baseline time over the layers")
    tuned_total: float | None = Field(
        description="end-to-end tuned estimate: sum of call count x tuned time (baseline where nothing is tuned yet)")
    speedup: float | None = Field()
    untuned: int = Field(description="layers with no successful trial yet (counted at their baseline)")


class TargetOut(BaseModel):
    name: str
    description: str


class WorkloadKeyOut(BaseModel):
    key: str
    op: str
    flops: int
    workload: dict[str, Any]


# --- helpers ----------------------------------------------------------------------------------
def _gflops(flops: int, seconds: float | None) -> float | None:
    return flops / seconds / 1e9 if seconds and math.isfinite(seconds) and seconds > 0 else None


def _baseline(task: TaskInfo) -> float | None:
    """One call's simulated time under the OpenACC-like schedule (the baseline `swtune demo` and
    tune-model report): from the weight the driver stored, else simulated here (cached)."""
    if task.weight is not None and task.call_count > 0:
        return task.weight / task.call_count
    try:
        return baseline_time(task.workload, task.target)
    except Exception:  # noqa: BLE001 - no baseline for this workload: the page shows "-"
        return None


# --- routes -----------------------------------------------------------------------------------
@router.get("/tasks/{task_id}/trials", response_model=TaskTrialsOut, responses=responses(404, 422))
def task_trials(task_id: TaskId, db: Db, _: Reader) -> TaskTrialsOut:
    """A task's finished trials one by one (the points of its tuning curve) and a tally per worker."""
    with db.session() as s:
        flops = tasks_db.get_task(s, task_id, curve=False).workload.flops
        points = history.task_trials(s, task_id)
    return TaskTrialsOut(
        task_id=task_id, flops=flops,
        trials=[TrialOut(trial=p.trial, job_id=p.job_id, status=p.status, mean_time=p.mean_time,
                         gflops=_gflops(flops, p.mean_time), worker=p.worker, error=p.error,
                         finished_at=p.finished_at) for p in points],
        workers=[WorkerTallyOut(worker=t.worker, trials=t.trials, ok=t.ok, failed=t.failed, best_time=t.best_time,
                                best_gflops=_gflops(flops, t.best_time), last_at=t.last_at)
                 for t in history.tally_by_worker(points)])


@router.get("/workers/leases", response_model=LeasesOut)
def worker_leases(db: Db, _: Reader) -> LeasesOut:
    """The jobs each worker holds right now (workers holding none are absent)."""
    with db.session() as s:
        now = history.database_now(s)
        leases = history.current_leases(s)
    return LeasesOut(database_time=now, leases=[
        WorkerLeasesOut(worker=held.worker, jobs=held.jobs, task_ids=list(held.task_ids), next_expiry=held.next_expiry)
        for held in leases])


@router.get("/submissions", response_model=list[SubmissionOut], responses=responses(422))
def submissions(db: Db, _: Reader, limit: int = Query(100, ge=1, le=1000)) -> list[SubmissionOut]:
    """Tasks grouped by the submission that created them, newest first."""
    with db.session() as s:
        return [SubmissionOut(**vars(i)) for i in history.list_submissions(s, limit=limit)]


@router.get("/submissions/{batch}", response_model=SubmissionReportOut, responses=responses(404, 422))
def submission(batch: Batch, db: Db, _: Reader) -> SubmissionReportOut:
    """A submission's per-layer table (baseline vs tuned time per call, call counts, speedup, GFLOPS)
    and the end-to-end estimate: every layer counted as many times as the model calls it."""
    with db.session() as s:
        info = history.get_submission(s, batch)
        tasks = tasks_db.list_tasks(s, batch=batch, limit=max(info.tasks, 1))
    rows = []
    for t in tasks:
        base = _baseline(t)
        tuned = t.best_time if t.best_time and math.isfinite(t.best_time) else None
        rows.append((t, base, tuned))
    with_base = [(t, base, tuned) for t, base, tuned in rows if base is not None]
    base_total = sum(t.call_count * base for t, base, _ in with_base) if with_base else None
    tuned_total = sum(t.call_count * (tuned or base) for t, base, tuned in with_base) if with_base else None
    layers = [LayerOut(task_id=t.id, label=t.label, layer_names=list(t.layer_names), call_count=t.call_count,
                       workload_key=t.workload_key, workload_label=t.workload.label,
                       workload=t.workload.to_json(), state=t.state, untuned_reason=t.untuned_reason,
                       trials_done=t.trials_done, trial_budget=t.trial_budget, baseline_time=base,
                       tuned_time=tuned, speedup=base / tuned if base and tuned else None,
                       gflops=_gflops(t.workload.flops, tuned),
                       gbps=rate(t.workload, tuned) if rate_of(t.workload) == Rate.GBPS else None,
                       share=(t.call_count * (tuned or base) / tuned_total
                              if base is not None and tuned_total else None))
              for t, base, tuned in rows]
    return SubmissionReportOut(**vars(info), layers=layers, baseline_total=base_total,
                               tuned_total=tuned_total,
                               speedup=base_total / tuned_total if base_total and tuned_total else None,
                               untuned=sum(1 for layer in layers if layer.tuned_time is None))


@router.get("/workloads/key", response_model=WorkloadKeyOut, responses=responses(422))
def workload_key(_: Reader, workload: str = Query(min_length=2, max_length=4096,
                                                  description="a workload spec as JSON"),
                 target: str | None = Query(None, description="checked when given")) -> WorkloadKeyOut:
    """The key a workload spec is stored and looked up under (what GET /schedules/best takes)."""
    wl = parse_workload(workload)
    if target is not None:
        target_name(target)
    return WorkloadKeyOut(key=wl.key, op=wl.op, flops=int(wl.flops), workload=wl.to_json())


@router.get("/targets", response_model=list[TargetOut])
def targets(_: Reader) -> list[TargetOut]:
    """The target presets (for the lookup form)."""
    from tuner.targets import TARGETS

    return [TargetOut(name=t.name, description=t.description) for t in TARGETS.values()]


@root.get("/")
def index() -> RedirectResponse:
    return RedirectResponse("/ui/")


def install(app: FastAPI) -> None:
    """The dashboard's routes and its static files (one call from the app factory)."""
    app.include_router(router)
    app.include_router(root)
    app.mount("/ui", StaticFiles(directory=UI_DIR, html=True), name="ui")
