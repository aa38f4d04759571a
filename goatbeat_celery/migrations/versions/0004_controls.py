"""Schedule controls: bounds (``start_at``, ``end_at``), a run limit (``max_runs``), the end of
a pause (``paused_until``), a description and tags.

Revision ID: 0004
Revises: 0003
Create Date: 2027-02-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql, postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None

# Types spelled out here (not imported from the live schema) so this revision never changes.
INSTANT = (sa.DateTime(timezone=True).with_variant(sa.String(26), "sqlite")
           # UTC to the microsecond.
           .with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb"))
JSON = (sa.JSON().with_variant(postgresql.JSON(), "postgresql")
        # Text on MySQL, whose JSON type reorders object keys (kwargs keep their order).
        .with_variant(mysql.LONGTEXT(), "mysql", "mariadb"))
COLUMNS = ("start_at", "end_at", "max_runs", "paused_until", "description", "tags")


def upgrade() -> None:
    # All nullable, NULL meaning "not set": existing rows need no rewrite and keep running as
    # they did, and older replicas' inserts (which do not name these columns) still succeed
    # during a rolling upgrade.
    columns: list[sa.Column[object]] = [
        sa.Column("start_at", INSTANT, nullable=True),
        sa.Column("end_at", INSTANT, nullable=True),
        sa.Column("max_runs", sa.Integer(), nullable=True),
        sa.Column("paused_until", INSTANT, nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("tags", JSON, nullable=True),
    ]
    for column in columns:
        op.add_column("goatbeat_schedule", column)


def downgrade() -> None:
    with op.batch_alter_table("goatbeat_schedule") as batch:
        for name in reversed(COLUMNS):
            batch.drop_column(name)
