"""Initial schema of the tuning log: targets, workloads, tasks, jobs, measurements, workers, tokens.

Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.migrations.columns import BigId, create_table, created, foreign_key, optional, required, search_columns

revision = "0001"
down_revision = None


def upgrade() -> None:
    create_table(
        "api_tokens",
        required("name", sa.String(128)),
        required("role", sa.String(16)),
        required("token_hash", sa.String(64)),
        created(),
        optional("revoked_at", sa.DateTime(timezone=True)),
        sa.UniqueConstraint("token_hash", name="uq_api_tokens_token_hash"),
    )
    create_table(
        "targets",
        required("name", sa.String(64)),
        required("description", sa.Text()),
        created(),
        sa.UniqueConstraint("name", name="uq_targets_name"),
    )
    create_table(
        "workers",
        required("name", sa.String(128)),
        required("target", sa.String(64)),
        required("backend", sa.String(32)),
        optional("token_id", sa.Integer()),
        required("jobs_leased", sa.Integer()),
        created(),
        created("last_seen_at"),
        sa.UniqueConstraint("name", name="uq_workers_name"),
    )
    create_table(
        "workloads",
        required("key", sa.String(255)),
        required("op", sa.String(32)),
        required("canonical_json", sa.Text()),
        required("flops", sa.BigInteger()),
        created(),
        sa.UniqueConstraint("canonical_json", name="uq_workloads_canonical_json"),
        sa.UniqueConstraint("key", name="uq_workloads_key"),
    )
    create_table(
        "measurements",
        required("workload_id", sa.Integer()),
        required("target_id", sa.Integer()),
        required("config_hash", sa.String(40)),
        required("config", sa.JSON()),
        required("times", sa.JSON()),
        optional("mean_time", sa.Float()),
        required("status", sa.String(32)),
        required("error", sa.Text()),
        required("worker", sa.String(128)),
        required("source", sa.String(32)),
        required("details", sa.JSON()),
        optional("task_id", sa.Integer()),
        optional("job_id", sa.BigInteger()),
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
        required("workload_id", sa.Integer()),
        required("target_id", sa.Integer()),
        required("label", sa.String(128)),
        required("batch", sa.String(64)),
        required("trial_budget", sa.Integer()),
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
        required("task_id", sa.Integer()),
        required("workload_id", sa.Integer()),
        required("target_id", sa.Integer()),
        required("config", sa.JSON()),
        required("config_hash", sa.String(40)),
        required("state", sa.String(16)),
        optional("lease_token", sa.String(64)),
        optional("lease_expires_at", sa.DateTime(timezone=True)),
        required("attempts", sa.Integer()),
        required("max_attempts", sa.Integer()),
        optional("worker", sa.String(128)),
        optional("leased_by_token", sa.Integer()),
        required("error", sa.Text()),
        created(),
        optional("finished_at", sa.DateTime(timezone=True)),
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
