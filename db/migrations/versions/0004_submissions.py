"""Model submissions: one trial budget per model, and per task its layer names, call count and weight.

A submission row owns the one budget the driver spreads over its tasks; its tasks point to it with
``submission_id`` (NULL for tasks submitted one per workload, which keep their own budgets) and carry
how many times the model runs their workload (``call_count``, 1 for older tasks).

Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.migrations.columns import create_table, created, foreign_key, optional, required, search_columns

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    create_table(
        "submissions",
        required("model", sa.String(128)),
        required("target_id", sa.Integer()),
        required("trial_budget", sa.Integer()),
        required("per_round", sa.Integer()),
        optional("early_stop", sa.Integer()),
        *search_columns(),
        optional("submitter_token_id", sa.Integer()),
        created(),
        created("updated_at"),
        foreign_key("submissions", "target_id", "targets"),
        id_type=sa.String(64),
    )
    op.create_index("ix_submissions_state", "submissions", ["state"])
    with op.batch_alter_table("tuning_tasks") as batch:
        batch.add_column(optional("submission_id", sa.String(64)))
        batch.add_column(sa.Column("call_count", sa.Integer(), nullable=False, server_default="1"))
        batch.add_column(optional("layer_names", sa.JSON()))
        batch.add_column(optional("weight", sa.Float()))
        batch.create_foreign_key("fk_tuning_tasks_submission_id_submissions", "submissions", ["submission_id"],
                                 ["id"], ondelete="CASCADE")
        batch.create_index("ix_tuning_tasks_submission_id", ["submission_id"])


def downgrade() -> None:
    with op.batch_alter_table("tuning_tasks") as batch:
        batch.drop_index("ix_tuning_tasks_submission_id")
        batch.drop_constraint("fk_tuning_tasks_submission_id_submissions", type_="foreignkey")
        batch.drop_column("weight")
        batch.drop_column("layer_names")
        batch.drop_column("call_count")
        batch.drop_column("submission_id")
    op.drop_index("ix_submissions_state", table_name="submissions")
    op.drop_table("submissions")
