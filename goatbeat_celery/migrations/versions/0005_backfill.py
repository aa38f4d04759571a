"""Backfills: stored requests to run a schedule's occurrences of a past range.

Revision ID: 0005
Revises: 0004
Create Date: 2027-03-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None

# Types spelled out here (not imported from the live schema) so this revision never changes.
IDENTIFIER = (sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
              # A key MySQL can index (255 utf8mb4 characters: 1020 of its 3072 bytes), in
              # code-point order as "C" sorts.
              .with_variant(sa.String(255, collation="utf8mb4_bin"), "mysql", "mariadb"))
INSTANT = (sa.DateTime(timezone=True).with_variant(sa.String(26), "sqlite")
           # UTC to the microsecond.
           .with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb"))
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # A new table only: existing rows are untouched, and replicas of the previous version,
    # which never read it, keep running during a rolling upgrade.
    op.create_table(
        "goatbeat_backfill",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("schedule_name", IDENTIFIER, nullable=False),
        sa.Column("start_at", INSTANT, nullable=False),
        sa.Column("end_at", INSTANT, nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("newest_first", sa.Boolean(), nullable=False),
        sa.Column("per_tick", sa.Integer(), nullable=True),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("examined", sa.Integer(), nullable=False),
        sa.Column("claimed", sa.Integer(), nullable=False),
        sa.Column("cursor_at", INSTANT, nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at", INSTANT, nullable=False),
        sa.Column("finished_at", INSTANT, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
    )
    op.create_index(
        "ix_goatbeat_backfill_active", "goatbeat_backfill", ["id"],
        postgresql_where=sa.text("state = 'active'"), sqlite_where=sa.text("state = 'active'"),
    )
    op.create_index("ix_goatbeat_backfill_schedule", "goatbeat_backfill",
                    ["schedule_name", "id"])


def downgrade() -> None:
    op.drop_index("ix_goatbeat_backfill_schedule", table_name="goatbeat_backfill")
    op.drop_index("ix_goatbeat_backfill_active", table_name="goatbeat_backfill")
    op.drop_table("goatbeat_backfill")
