"""MetaSchedule workloads remember their module equality mode; records their validity by upstream's rules.

``ms_workloads.module_equality`` is the mode ("structural", "ignore-tensor", "anchor-block") a workload
was deduplicated under, and ``shash`` its hash under that mode: a database finds its workloads by
both (``ix_ms_workloads_module_equality_shash`` replaces the index on ``shash`` alone). Every workload
stored before was deduplicated structurally: backfilled "structural".

``ms_records.valid`` and ``mean_run_secs`` are upstream's verdict and sort key for get_top_k
(tuner.bridge.ms_rules: failed only at exactly 1e10, a trace with instructions before its first
postproc, the plain mean), so a top-k query orders in SQL. Both are recomputed for the stored records.

Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.migrations.columns import BigId
from tuner.bridge.ms_rules import rank

revision = "0006"
down_revision = "0005"

BATCH = 500

records = sa.table("ms_records", sa.column("id", BigId), sa.column("record_json", sa.JSON()),
                   sa.column("valid", sa.Boolean()), sa.column("mean_run_secs", sa.Float()))


def upgrade() -> None:
    with op.batch_alter_table("ms_workloads") as batch:
        batch.add_column(sa.Column("module_equality", sa.String(16), nullable=False, server_default="structural"))
        batch.drop_index("ix_ms_workloads_shash")
        batch.create_index("ix_ms_workloads_module_equality_shash", ["module_equality", "shash"])
    with op.batch_alter_table("ms_records") as batch:
        batch.add_column(sa.Column("valid", sa.Boolean(), nullable=False, server_default=sa.false()))
    _rank_stored_records()


def _rank_stored_records() -> None:
    conn = op.get_bind()
    last = None
    while True:
        query = sa.select(records.c.id, records.c.record_json).order_by(records.c.id).limit(BATCH)
        rows = conn.execute(query if last is None else query.where(records.c.id > last)).all()
        if not rows:
            return
        for row in rows:
            verdict = rank(row.record_json)
            conn.execute(records.update().where(records.c.id == row.id)
                         .values(valid=verdict.valid, mean_run_secs=verdict.mean_run_secs))
        last = rows[-1].id


def downgrade() -> None:
    with op.batch_alter_table("ms_records") as batch:
        batch.drop_column("valid")
    with op.batch_alter_table("ms_workloads") as batch:
        batch.drop_index("ix_ms_workloads_module_equality_shash")
        batch.drop_column("module_equality")
        batch.create_index("ix_ms_workloads_shash", ["shash"])
