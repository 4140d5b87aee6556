"""SQLAlchemy 2 ORM models of the tuning log (the schema the Alembic migrations create).

Only the db package touches these rows; everything outside it gets the dataclasses of db.domain.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from db.states import JobState, SubmissionState, TaskState
from db.timeutil import utcnow

# Explicit constraint names: migrations and model comparisons then agree on every backend.
NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite only auto-increments an INTEGER PRIMARY KEY; PostgreSQL gets 64-bit ids for the big tables.
BigId = BigInteger().with_variant(Integer(), "sqlite")

ROLES = ("submit", "worker", "read", "admin")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


def _created() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), server_default=utcnow(), nullable=False)


class TargetRow(Base):
    __tablename__ = "targets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    description: Mapped[str] = mapped_column(Text, nullable=False, default="")
    created_at: Mapped[datetime] = _created()


class WorkloadRow(Base):
    __tablename__ = "workloads"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(255), unique=True, nullable=False)
    op: Mapped[str] = mapped_column(String(32), nullable=False)
    canonical_json: Mapped[str] = mapped_column(Text, unique=True, nullable=False)
    flops: Mapped[int] = mapped_column(BigInteger, nullable=False)
    created_at: Mapped[datetime] = _created()


class SubmissionRow(Base):
    """A model submission: one trial budget spread over its tasks by the driver's gradient scheduler.

    Its id is also its tasks' ``batch``. Tasks submitted without one (POST /tasks) have no row here."""

    __tablename__ = "submissions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    model: Mapped[str] = mapped_column(String(128), nullable=False)
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"), nullable=False)
    trial_budget: Mapped[int] = mapped_column(Integer, nullable=False)
    per_round: Mapped[int] = mapped_column(Integer, nullable=False)
    early_stop: Mapped[int | None] = mapped_column(Integer, nullable=True)
    strategy: Mapped[str] = mapped_column(String(64), nullable=False)
    seed: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    state: Mapped[str] = mapped_column(String(16), nullable=False, default=SubmissionState.ACTIVE, index=True)
    submitter: Mapped[str] = mapped_column(String(128), nullable=False, default="")
    submitter_token_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _created()


class TaskRow(Base):
    """One tuning task: one workload on one target with a trial budget (a multi-workload
    submission creates one task per workload, so state, budget and best config are per task).

    A task of a model submission (``submission_id`` set) starts with a budget of 0: its budget is
    what the driver has granted it so far out of the submission's one budget."""

    __tablename__ = "tuning_tasks"
    __table_args__ = (Index("ix_tuning_tasks_state_target", "state", "target_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"), nullable=False, index=True)
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"), nullable=False)
    label: Mapped[str] = mapped_column(String(128), nullable=False, default="")
    batch: Mapped[str] = mapped_column(String(64), nullable=False, default="", index=True)
    trial_budget: Mapped[int] = mapped_column(Integer, nullable=False)
    strategy: Mapped[str] = mapped_column(String(64), nullable=False)
    seed: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    state: Mapped[str] = mapped_column(String(16), nullable=False, default=TaskState.ACTIVE)
    submitter: Mapped[str] = mapped_column(String(128), nullable=False, default="")
    # The API token that submitted the task: with admins, the only one that may cancel it.
    submitter_token_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    submission_id: Mapped[str | None] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"),
                                                      nullable=True, index=True)
    # How many times the model runs this workload (layers sharing a workload are one task).
    call_count: Mapped[int] = mapped_column(Integer, nullable=False, default=1, server_default="1")
    # The model's layer names this task stands for (NULL for tasks outside a model submission).
    layer_names: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    # Estimated seconds of one model run spent in this task: call_count x its baseline time.
    weight: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _created()


class JobRow(Base):
    """A config to measure. (workload, target, config_hash) is unique: a config is queued once, ever."""

    __tablename__ = "measure_jobs"
    __table_args__ = (
        UniqueConstraint("workload_id", "target_id", "config_hash"),
        Index("ix_measure_jobs_lease", "target_id", "state", "id"),
        Index("ix_measure_jobs_task_state", "task_id", "state"),
        Index("ix_measure_jobs_expiry", "state", "lease_expires_at"),
        Index("ix_measure_jobs_lease_token", "lease_token"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tuning_tasks.id", ondelete="CASCADE"), nullable=False)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"), nullable=False)
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"), nullable=False)
    config: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    config_hash: Mapped[str] = mapped_column(String(40), nullable=False)
    state: Mapped[str] = mapped_column(String(16), nullable=False, default=JobState.PENDING)
    lease_token: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=3)
    worker: Mapped[str | None] = mapped_column(String(128), nullable=True)
    leased_by_token: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error: Mapped[str] = mapped_column(Text, nullable=False, default="")
    created_at: Mapped[datetime] = _created()
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class MeasurementRow(Base):
    """One measured config. Unique per (workload, target, config_hash): a retried post is stored once."""

    __tablename__ = "measurements"
    __table_args__ = (
        UniqueConstraint("workload_id", "target_id", "config_hash"),
        # The compile-time lookup: best successful time per (workload, target) is an index range scan.
        Index("ix_measurements_best", "workload_id", "target_id", "status", "mean_time"),
        # The same per source: the fastest hardware time (which the lookup prefers) is one index probe too,
        # however many simulated rows share its (workload, target).
        Index("ix_measurements_best_source", "workload_id", "target_id", "source", "status", "mean_time"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"), nullable=False)
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"), nullable=False)
    config_hash: Mapped[str] = mapped_column(String(40), nullable=False)
    config: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    times: Mapped[list[float]] = mapped_column(JSON, nullable=False)
    mean_time: Mapped[float | None] = mapped_column(Float, nullable=True)  # NULL for failed configs
    status: Mapped[str] = mapped_column(String(32), nullable=False)
    error: Mapped[str] = mapped_column(Text, nullable=False, default="")
    worker: Mapped[str] = mapped_column(String(128), nullable=False, default="")
    source: Mapped[str] = mapped_column(String(32), nullable=False)
    # the simulator profile a simulated time came from (tuner/profile.py; 0 = built-in); NULL for any other source
    profile_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    details: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False, default=dict)
    task_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    job_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    created_at: Mapped[datetime] = _created()


class ProfileRow(Base):
    """A fitted simulator profile of a target (tuner/profile.py), versioned 1, 2, ...; at most one is active
    per target (none active: the built-in profile, version 0)."""

    __tablename__ = "profiles"
    __table_args__ = (UniqueConstraint("target_id", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"), nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    document: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)  # Profile.to_json(): values, fit, errors
    active: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    created_at: Mapped[datetime] = _created()


class WorkerRow(Base):
    __tablename__ = "workers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True, nullable=False)
    target: Mapped[str] = mapped_column(String(64), nullable=False, default="")
    backend: Mapped[str] = mapped_column(String(32), nullable=False, default="")
    token_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    jobs_leased: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    created_at: Mapped[datetime] = _created()
    last_seen_at: Mapped[datetime] = _created()


class TokenRow(Base):
    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), nullable=False, default="")
    role: Mapped[str] = mapped_column(String(16), nullable=False)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    created_at: Mapped[datetime] = _created()
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class MSWorkloadRow(Base):
    """A TVM MetaSchedule workload (an IRModule as MetaSchedule's JSON), for the PyDatabase adapter:
    one per class of its module equality mode, ``shash`` its hash under that mode."""

    __tablename__ = "ms_workloads"
    __table_args__ = (Index("ix_ms_workloads_module_equality_shash", "module_equality", "shash"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    module_equality: Mapped[str] = mapped_column(String(16), nullable=False, server_default="structural")
    shash: Mapped[str] = mapped_column(String(32), nullable=False)
    workload_json: Mapped[Any] = mapped_column(JSON, nullable=False)
    created_at: Mapped[datetime] = _created()


class MSRecordRow(Base):
    """A MetaSchedule tuning record, keyed by its workload and (unlike upstream) its target; ``valid``
    and ``mean_run_secs`` are upstream's verdict and sort key (tuner.bridge.ms_rules)."""

    __tablename__ = "ms_records"
    __table_args__ = (Index("ix_ms_records_workload_target", "workload_id", "target"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("ms_workloads.id"), nullable=False)
    target: Mapped[str] = mapped_column(Text, nullable=False, default="")
    record_json: Mapped[Any] = mapped_column(JSON, nullable=False)
    valid: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=false())
    mean_run_secs: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[datetime] = _created()
