"""A task belongs to its submitter: the id of the API token that submitted it.

Only that token or an admin may cancel the task. Tasks created before this revision (or in the
embedded no-auth mode) have no owner token and can be cancelled by admins only.

Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.migrations.columns import optional

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    with op.batch_alter_table("tuning_tasks") as batch:
        batch.add_column(optional("submitter_token_id", sa.Integer()))


def downgrade() -> None:
    with op.batch_alter_table("tuning_tasks") as batch:
        batch.drop_column("submitter_token_id")
