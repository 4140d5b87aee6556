"""Wire schemas of the REST API (pydantic v2): what clients send and receive under /api/v1.

Input models are strict: JSON types are never coerced ("1" is not 1, true is not a time), and every
integer is bounded by the column that stores it. The measurement itself (config in the space, times
above the physical floor ...) is checked once, by db.validation, behind these types.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from db.domain import WorkerInfo
from db.states import TaskState
from db.submissions import SubmissionHead
from tuner.measure.base import SOURCES, STATUSES

Status = Literal[STATUSES]  # type: ignore[valid-type]
Source = Literal[SOURCES]  # type: ignore[valid-type]
# NaN, infinities, zero and negative times are refused at the door (422) and nothing is stored.
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
WorkerName = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:@-]+$")]
LeaseToken = Annotated[str, Field(min_length=8, max_length=64)]
TargetName = Annotated[str, Field(min_length=1, max_length=64, description="sw26010 or sw26010-pro")]
WorkloadKey = Annotated[str, Field(min_length=1, max_length=255)]
# Ids as the columns allow: measure_jobs.id is int8 (int64), tuning_tasks.id int4.
MAX_JOB_ID = 2**63 - 1
MAX_TASK_ID = 2**31 - 1
JobId = Annotated[int, Field(ge=1, le=MAX_JOB_ID)]
TaskId = Annotated[int, Field(ge=1, le=MAX_TASK_ID)]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


# --- tasks ------------------------------------------------------------------------------------
class TaskCreate(_In):
    workloads: list[dict[str, Any]] = Field(
        min_length=1, max_length=1000, description="workload specs, e.g. {'op': 'dense', 'm': 1, 'n': 4096, 'k': 9216}")
    labels: list[Annotated[str, Field(max_length=128)]] | None = Field(
        None, description="one per workload, e.g. layer names")
    target: TargetName
    trials: int = Field(ge=1, le=1_000_000, description="trial budget per workload")
    strategy: str | None = Field(None, max_length=64,
                                 description="search strategy; default: model if available, else random")
    seed: int = Field(0, ge=0, le=2**31 - 1)


class TaskCreated(BaseModel):
    task_ids: list[int]
    workload_keys: list[str]
    batch: str
    strategy: str


class TaskOut(BaseModel):
    id: int
    state: TaskState
    untuned_reason: str | None = Field(
        None, description="set when the task ended (done or cancelled) without any successful measurement: why, "
                          "e.g. 'untuned: no trial was run (the budget gave it none)'; its workload stays untuned")
    workload_key: str
    workload_label: str = Field(description="a short name of the workload (operator, shapes, dtype); the key for "
                                                "built-in operators, whose key is that already")
    workload: dict[str, Any]
    target: str
    label: str
    batch: str
    strategy: str
    seed: int
    trial_budget: int = Field(description="the task's budget; in a model submission, the trials granted to it so far "
                                          "out of the submission's one budget")
    trials_done: int = Field(description="jobs done or failed: trials used for good")
    failed: int
    pending: int
    leased: int
    best_time: float | None
    best_gflops: float | None
    best_gbps: float | None = Field(None, description="a memory-bound task's best rate: its operands and results "
                                                      "moved once per call, in GB/s (GFLOPS rate the others)")
    best_config: dict[str, Any] | None
    # [trial, best time so far] pairs; a list of two numbers (not a tuple) keeps the schema valid OpenAPI 3.1
    curve: list[Annotated[list[int | float], Field(min_length=2, max_length=2)]] = Field(
        description="[trial, best time so far] per finished trial")
    submitter: str
    created_at: datetime | None
    updated_at: datetime | None
    model: str | None = Field(None, description="the model of the submission this task belongs to, if any")
    call_count: int = Field(1, description="how many times the model runs this task's workload")
    layer_names: list[str] = Field(default_factory=list, description="the model's layers this task stands for")


# --- model submissions ------------------------------------------------------------------------
LayerName = Annotated[str, Field(min_length=1, max_length=128)]


class LayerIn(_In):
    name: LayerName
    workload: dict[str, Any] = Field(description="workload spec, e.g. {'op': 'conv2d', ...}")
    calls: int = Field(1, ge=1, le=1_000_000, description="how many times the model runs this layer")


class SubmissionCreate(_In):
    """A whole model: one trial budget (``budget``), spread over its layers' tasks by the gradient task
    scheduler. Layers running the same workload become one task whose call count is the sum of theirs.

    ``trials`` is the field's old name, kept so that older clients work: it means the whole model's
    budget too (unlike ``trials`` of POST /tasks, per workload); the answer then carries a warning.
    Give exactly one of them."""

    model: LayerName = Field(description="the model's name, e.g. resnet50")
    layers: list[LayerIn] = Field(min_length=1, max_length=1000)
    target: TargetName
    budget: int | None = Field(None, ge=1, le=1_000_000,
                               description="the trial budget of the whole model, spread over its tasks")
    trials: int | None = Field(None, ge=1, le=1_000_000, json_schema_extra={"deprecated": True},
                               description="deprecated: the old name of budget (the whole model's budget)")
    per_round: int = Field(16, ge=1, le=512, description="trials a task is granted at a time")
    early_stop: int | None = Field(None, ge=1, le=1_000_000,
                                   description="a task stops after this many trials without improvement")
    strategy: str | None = Field(None, max_length=64,
                                 description="search strategy; default: model if available, else random")
    seed: int = Field(0, ge=0, le=2**31 - 1)

    @model_validator(mode="after")
    def _one_budget(self) -> SubmissionCreate:
        if (self.budget is None) == (self.trials is None):
            raise ValueError("give the whole model's trial budget as 'budget' ('trials' is its deprecated name), "
                             "exactly one of them")
        return self

    @property
    def whole_budget(self) -> int:
        return self.budget if self.budget is not None else int(self.trials or 0)


class SubmissionTaskOut(BaseModel):
    task_id: int
    label: str
    layer_names: list[str]
    call_count: int = Field(description="how many times the model runs this task's workload")
    weight: float | None = Field(description="estimated seconds per model run: call_count x baseline time")
    workload_key: str
    workload_label: str = Field(description="a short name of the workload (operator, shapes, dtype); the key for "
                                                "built-in operators, whose key is that already")
    workload: dict[str, Any]
    state: TaskState
    untuned_reason: str | None = Field(
        None, description="set when the task ended (done or cancelled) without any successful measurement: why, "
                          "e.g. 'untuned: no trial was run (the budget gave it none)'; its workload stays untuned")
    trial_budget: int = Field(description="trials granted to this task so far out of the submission's budget")
    trials_done: int
    queued: int
    best_time: float | None


# a submission's head as the tuning log knows it (db.submissions.SubmissionHead), then its tasks; every field
# declared here is a Field(): a dataclass's plain fields would move behind them, reordering the body
@pydantic_dataclass(frozen=True, kw_only=True)
class SubmissionRecordOut(SubmissionHead):
    id: str = Field(description="the submission id, also its tasks' batch")
    trial_budget: int = Field(description="the one budget of the whole model")
    trials_done: int = Field()
    trials_queued: int = Field()
    tasks: list[SubmissionTaskOut] = Field()
    warnings: list[str] = Field(default_factory=list,
                                description="on creation: a budget too small for every task, a deprecated field")


# --- workers ----------------------------------------------------------------------------------
class LeaseRequest(_In):
    worker: WorkerName
    target: TargetName
    max_jobs: int = Field(8, ge=1, le=512)
    wait_seconds: float = Field(0.0, ge=0, le=120, description="long-poll: wait up to this long for work")
    backend: str = Field("", max_length=32)


class JobOut(BaseModel):
    id: int
    task_id: int
    workload: dict[str, Any]
    workload_key: str
    target: str
    config: dict[str, Any]
    config_hash: str
    attempt: int


class LeaseOut(BaseModel):
    lease_token: str
    lease_seconds: float
    jobs: list[JobOut]
    profile: dict[str, Any] | None = Field(
        None, description="the target's active simulator profile (GET /api/v1/profiles/{target}) for a worker "
                          "leasing as the simulator backend or naming none: measure with it and name its version "
                          "in each result's details.profile_version; null for other backends and empty leases")


class HeartbeatIn(_In):
    lease_token: LeaseToken
    worker: WorkerName


class HeartbeatOut(BaseModel):
    job_ids: list[int]
    lease_seconds: float


class ReleaseIn(_In):
    lease_token: LeaseToken
    worker: WorkerName
    job_ids: list[JobId] | None = Field(None, max_length=512, description="default: every job of the lease")


class ReleaseOut(BaseModel):
    released: list[int]


class ResultFields(_In):
    status: Status
    times: list[Seconds] = Field(default_factory=list, max_length=1000)
    error: str = Field("", max_length=20_000)
    source: Source
    details: dict[str, Any] = Field(default_factory=dict)


class ResultPost(ResultFields):
    lease_token: LeaseToken
    worker: WorkerName


class ResultItem(ResultFields):
    job_id: JobId


class ResultsPost(_In):
    lease_token: LeaseToken
    worker: WorkerName
    results: list[ResultItem] = Field(min_length=1, max_length=1024)


class ResultOut(BaseModel):
    job_id: int
    outcome: Literal["stored", "duplicate", "lease_lost", "forbidden", "not_found"]
    measurement_id: int | None = None


class ResultsOut(BaseModel):
    results: list[ResultOut]


# a worker as the tuning log knows it, field for field (no docstring: the schema carries no description)
@pydantic_dataclass(frozen=True)
class WorkerOut(WorkerInfo):
    pass


# --- simulator profiles -----------------------------------------------------------------------
ProfileVersion = Annotated[int, Field(ge=0, le=2**31 - 1, description="a profile version (0: the built-in one)")]


class ProfileVersionOut(BaseModel):
    version: int
    active: bool
    fit: dict[str, Any] = Field(description="what the profile was fitted to, and its errors")


class ProfilesOut(BaseModel):
    target: str
    active_version: int = Field(description="the version simulator workers measure with (0: the built-in profile)")
    active: dict[str, Any] = Field(description="the active profile's document (as POST /api/v1/profiles takes it)")
    versions: list[ProfileVersionOut] = Field(description="every stored version, oldest first (0 is not stored)")


class ProfileStoredOut(BaseModel):
    target: str
    version: int
    active: bool
    profile: dict[str, Any] = Field(description="the stored document, with the version the tuning log gave it")


# --- compile-time lookup ----------------------------------------------------------------------
class BestOut(BaseModel):
    workload_key: str
    target: str
    config: dict[str, Any]
    config_hash: str
    mean_time: float
    times: list[float]
    gflops: float
    source: str = Field(description="what timed the served config: 'hardware' whenever a Sunway node timed this "
                                    "workload (hardware times win over simulated ones), else e.g. 'simulator'")
    worker: str
    measured_at: datetime | None
    profile_version: int | None = Field(
        None, description="a simulated time: the simulator profile it came from (0: the built-in one); null for "
                          "any other source")
    interval_s: list[float] | None = Field(
        None, description="a simulated time under a fitted profile: [low, high], the 95% interval of the config's "
                          "simulated time that the profile's parameter uncertainty gives (its bootstrap draws); "
                          "null otherwise")


class BestBatchIn(_In):
    target: TargetName
    workload_keys: list[WorkloadKey] = Field(min_length=1, max_length=2000)


class BestBatchOut(BaseModel):
    target: str
    found: dict[str, BestOut]
    missing: list[str]


class ReadyOut(BaseModel):
    status: Literal["ready", "unavailable"]
    revision: str | None = None
    detail: str | None = None


class HealthOut(BaseModel):
    status: Literal["ok"]


class ImportOut(BaseModel):
    imported: int
    skipped: int
