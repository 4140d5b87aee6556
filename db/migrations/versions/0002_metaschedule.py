"""Tables of the MetaSchedule database adapter: ms_workloads, ms_records.

Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.migrations.columns import BigId, created, foreign_key, primary_key

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.create_table(
        "ms_workloads",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("shash", sa.String(32), nullable=False),
        sa.Column("workload_json", sa.JSON(), nullable=False),
        created(),
        primary_key("ms_workloads"),
    )
    op.create_index("ix_ms_workloads_shash", "ms_workloads", ["shash"])
    op.create_table(
        "ms_records",
        sa.Column("id", BigId, nullable=False),
        sa.Column("workload_id", sa.Integer(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("record_json", sa.JSON(), nullable=False),
        sa.Column("mean_run_secs", sa.Float(), nullable=True),
        created(),
        foreign_key("ms_records", "workload_id", "ms_workloads"),
        primary_key("ms_records"),
    )
    op.create_index("ix_ms_records_workload_target", "ms_records", ["workload_id", "target"])


def downgrade() -> None:
    op.drop_index("ix_ms_records_workload_target", table_name="ms_records")
    op.drop_table("ms_records")
    op.drop_index("ix_ms_workloads_shash", table_name="ms_workloads")
    op.drop_table("ms_workloads")
