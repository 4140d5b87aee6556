"""Initial schema of the tuning log: targets, workloads, tasks, jobs, measurements, workers, tokens.

Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.migrations.columns import BigId, create_table, created, foreign_key, search_columns

revision = "0001"
down_revision = None


def upgrade() -> None:
    create_table(
        "api_tokens",
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        created(),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("token_hash", name="uq_api_tokens_token_hash"),
    )
    create_table(
        "targets",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        created(),
        sa.UniqueConstraint("name", name="uq_targets_name"),
    )
    create_table(
        "workers",
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("target", sa.String(64), nullable=False),
        sa.Column("backend", sa.String(32), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=True),
        sa.Column("jobs_leased", sa.Integer(), nullable=False),
        created(),
        created("last_seen_at"),
        sa.UniqueConstraint("name", name="uq_workers_name"),
    )
    create_table(
        "workloads",
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("op", sa.String(32), nullable=False),
        sa.Column("canonical_json", sa.Text(), nullable=False),
        sa.Column("flops", sa.BigInteger(), nullable=False),
        created(),
        sa.UniqueConstraint("canonical_json", name="uq_workloads_canonical_json"),
        sa.UniqueConstraint("key", name="uq_workloads_key"),
    )
    create_table(
        "measurements",
        sa.Column("workload_id", sa.Integer(), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("config_hash", sa.String(40), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("times", sa.JSON(), nullable=False),
        sa.Column("mean_time", sa.Float(), nullable=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("worker", sa.String(128), nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=True),
        sa.Column("job_id", sa.BigInteger(), nullable=True),
        created(),
        foreign_key("measurements", "target_id", "targets"),
        foreign_key("measurements", "workload_id", "workloads"),
        sa.UniqueConstraint("workload_id", "target_id", "config_hash",
                            name="uq_measurements_workload_id_target_id_config_hash"),
        id_type=BigId,
    )
    op.create_index("ix_measurements_best", "measurements", ["workload_id", "target_id", "status", "mean_time"])
    create_table(
        "tuning_tasks",
        sa.Column("workload_id", sa.Integer(), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(128), nullable=False),
        sa.Column("batch", sa.String(64), nullable=False),
        sa.Column("trial_budget", sa.Integer(), nullable=False),
        *search_columns(),
        created(),
        created("updated_at"),
        foreign_key("tuning_tasks", "target_id", "targets"),
        foreign_key("tuning_tasks", "workload_id", "workloads"),
    )
    op.create_index("ix_tuning_tasks_batch", "tuning_tasks", ["batch"])
    op.create_index("ix_tuning_tasks_state_target", "tuning_tasks", ["state", "target_id"])
    op.create_index("ix_tuning_tasks_workload_id", "tuning_tasks", ["workload_id"])
    create_table(
        "measure_jobs",
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("workload_id", sa.Integer(), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("config_hash", sa.String(40), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("lease_token", sa.String(64), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(128), nullable=True),
        sa.Column("leased_by_token", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=False),
        created(),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        foreign_key("measure_jobs", "target_id", "targets"),
        foreign_key("measure_jobs", "task_id", "tuning_tasks", ondelete="CASCADE"),
        foreign_key("measure_jobs", "workload_id", "workloads"),
        sa.UniqueConstraint("workload_id", "target_id", "config_hash",
                            name="uq_measure_jobs_workload_id_target_id_config_hash"),
        id_type=BigId,
    )
    op.create_index("ix_measure_jobs_expiry", "measure_jobs", ["state", "lease_expires_at"])
    op.create_index("ix_measure_jobs_lease", "measure_jobs", ["target_id", "state", "id"])
    op.create_index("ix_measure_jobs_lease_token", "measure_jobs", ["lease_token"])
    op.create_index("ix_measure_jobs_task_state", "measure_jobs", ["task_id", "state"])


def downgrade() -> None:
    for table in ("measure_jobs", "tuning_tasks", "measurements", "workloads", "workers", "targets", "api_tokens"):
        op.drop_table(table)  # indexes go with their tables
