"""Tables of the MetaSchedule database adapter: ms_workloads, ms_records.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.timeutil import utcnow

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "ms_workloads",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("shash", sa.String(32), nullable=False),
        sa.Column("workload_json", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=utcnow(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_ms_workloads"),
    )
    op.create_index("ix_ms_workloads_shash", "ms_workloads", ["shash"])
    op.create_table(
        "ms_records",
        sa.Column("id", BigId, nullable=False),
        sa.Column("workload_id", sa.Integer(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("record_json", sa.JSON(), nullable=False),
        sa.Column("mean_run_secs", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=utcnow(), nullable=False),
        sa.ForeignKeyConstraint(["workload_id"], ["ms_workloads.id"], name="fk_ms_records_workload_id_ms_workloads"),
        sa.PrimaryKeyConstraint("id", name="pk_ms_records"),
    )
    op.create_index("ix_ms_records_workload_target", "ms_records", ["workload_id", "target"])


def downgrade() -> None:
    op.drop_index("ix_ms_records_workload_target", table_name="ms_records")
    op.drop_table("ms_records")
    op.drop_index("ix_ms_workloads_shash", table_name="ms_workloads")
    op.drop_table("ms_workloads")
