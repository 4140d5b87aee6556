"""Simulator profiles: fitted versions per target, and the profile each simulated measurement came from.

``profiles`` holds each fitted profile (tuner/profile.py) as its JSON document (values, intervals, the
fit's data and errors) with a version 1, 2, ... per target and at most one active. ``measurements`` gains
``profile_version``: the profile a simulated time came from (0: the built-in one), NULL for any other
source. Every simulated row before profiles existed was measured with the built-in profile: backfilled 0.
``ix_measurements_best_source`` lets the compile-time lookup find the fastest hardware time (preferred over
simulated ones) with one index probe.

Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.migrations.columns import create_table, created, foreign_key, optional, required

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    create_table(
        "profiles",
        required("target_id", sa.Integer()),
        required("version", sa.Integer()),
        required("document", sa.JSON()),
        required("active", sa.Boolean()),
        created(),
        foreign_key("profiles", "target_id", "targets"),
        sa.UniqueConstraint("target_id", "version", name="uq_profiles_target_id_version"),
    )
    with op.batch_alter_table("measurements") as batch:
        batch.add_column(optional("profile_version", sa.Integer()))
    op.execute("UPDATE measurements SET profile_version = 0 WHERE source = 'simulator'")
    op.create_index("ix_measurements_best_source", "measurements",
                    ["workload_id", "target_id", "source", "status", "mean_time"])


def downgrade() -> None:
    op.drop_index("ix_measurements_best_source", table_name="measurements")
    with op.batch_alter_table("measurements") as batch:
        batch.drop_column("profile_version")
    op.drop_table("profiles")
