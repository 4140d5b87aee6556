"""Tables of the MetaSchedule database adapter: ms_workloads, ms_records.

Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.migrations.columns import BigId, create_table, created, foreign_key, optional, required

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    create_table(
        "ms_workloads",
        required("shash", sa.String(32)),
        required("workload_json", sa.JSON()),
        created(),
    )
    op.create_index("ix_ms_workloads_shash", "ms_workloads", ["shash"])
    create_table(
        "ms_records",
        required("workload_id", sa.Integer()),
        required("target", sa.Text()),
        required("record_json", sa.JSON()),
        optional("mean_run_secs", sa.Float()),
        created(),
        foreign_key("ms_records", "workload_id", "ms_workloads"),
        id_type=BigId,
    )
    op.create_index("ix_ms_records_workload_target", "ms_records", ["workload_id", "target"])


def downgrade() -> None:
    op.drop_index("ix_ms_records_workload_target", table_name="ms_records")
    op.drop_table("ms_records")
    op.drop_index("ix_ms_workloads_shash", table_name="ms_workloads")
    op.drop_table("ms_workloads")
