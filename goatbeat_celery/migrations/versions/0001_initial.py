"""Schedules, executions and leases.

Revision ID: 0001
Revises:
Create Date: 2026-03-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

# Types spelled out here (not imported from the live schema) so this revision never changes.
IDENTIFIER = (sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
              # A key MySQL can index (255 utf8mb4 characters: 1020 of its 3072 bytes), in
              # code-point order as "C" sorts.
              .with_variant(sa.String(255, collation="utf8mb4_bin"), "mysql", "mariadb"))
# An execution key: a name (each character maybe percent-encoded), an instant and a suffix.
KEY = (sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
       .with_variant(sa.String(700, collation="utf8mb4_bin"), "mysql", "mariadb"))
JSON = (sa.JSON().with_variant(JSONB(), "postgresql")
        # Text on MySQL, whose JSON type reorders object keys (kwargs keep their order).
        .with_variant(mysql.LONGTEXT(), "mysql", "mariadb"))
INSTANT = (sa.DateTime(timezone=True).with_variant(sa.String(26), "sqlite")
           # UTC to the microsecond.
           .with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb"))
SECONDS = sa.Float(precision=53)


def upgrade() -> None:
    op.create_table(
        "goatbeat_schedule",
        sa.Column("name", IDENTIFIER, primary_key=True),
        sa.Column("task", sa.Text(), nullable=False),
        sa.Column("args", JSON, nullable=False),
        sa.Column("kwargs", JSON, nullable=False),
        sa.Column("options", JSON, nullable=False),
        sa.Column("trigger", JSON, nullable=False),
        sa.Column("timezone", sa.Text(), nullable=True),
        sa.Column("misfire_policy", sa.String(16), nullable=True),
        sa.Column("misfire_grace_seconds", SECONDS, nullable=True),
        sa.Column("max_catchup", sa.Integer(), nullable=True),
        sa.Column("offset_seconds", SECONDS, nullable=True),
        sa.Column("jitter_seconds", SECONDS, nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("spec_hash", sa.String(64), nullable=False),
        sa.Column("next_occurrence_at", INSTANT, nullable=True),
        sa.Column("next_run_at", INSTANT, nullable=True),
        sa.Column("last_occurrence_at", INSTANT, nullable=True),
        sa.Column("total_runs", sa.BigInteger(), nullable=False),
        sa.Column("total_missed", sa.BigInteger(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("created_at", INSTANT, nullable=False),
        sa.Column("updated_at", INSTANT, nullable=False),
    )
    op.create_index(
        "ix_goatbeat_schedule_due", "goatbeat_schedule", ["next_run_at", "name"],
        postgresql_where=sa.text("enabled"), sqlite_where=sa.text("enabled"),
    )
    op.create_table(
        "goatbeat_execution",
        sa.Column("key", KEY, primary_key=True),
        sa.Column("schedule_name", IDENTIFIER, nullable=False),
        sa.Column("occurrence_at", INSTANT, nullable=False),
        sa.Column("due_at", INSTANT, nullable=False),
        sa.Column("token", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("claimed_at", INSTANT, nullable=False),
        sa.Column("submitted_at", INSTANT, nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("missed", sa.Integer(), nullable=False),
        sa.Column("manual", sa.Boolean(), nullable=False),
    )
    op.create_index(
        "ix_goatbeat_execution_pending", "goatbeat_execution", ["claimed_at", "key"],
        postgresql_where=sa.text("state = 'claimed'"),
        sqlite_where=sa.text("state = 'claimed'"),
    )
    op.create_index(
        "ix_goatbeat_execution_history", "goatbeat_execution", ["schedule_name", "occurrence_at"]
    )
    op.create_index(
        "ix_goatbeat_execution_claimed_at", "goatbeat_execution", ["claimed_at"],
        postgresql_where=sa.text("state <> 'claimed'"),
        sqlite_where=sa.text("state <> 'claimed'"),
    )
    op.create_table(
        "goatbeat_lease",
        sa.Column("name", IDENTIFIER, primary_key=True),
        sa.Column("holder", sa.Text(), nullable=True),
        sa.Column("token", sa.BigInteger(), nullable=False),
        sa.Column("acquired_at", INSTANT, nullable=True),
        sa.Column("expires_at", INSTANT, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("goatbeat_lease")
    op.drop_index("ix_goatbeat_execution_claimed_at", table_name="goatbeat_execution")
    op.drop_index("ix_goatbeat_execution_history", table_name="goatbeat_execution")
    op.drop_index("ix_goatbeat_execution_pending", table_name="goatbeat_execution")
    op.drop_table("goatbeat_execution")
    op.drop_index("ix_goatbeat_schedule_due", table_name="goatbeat_schedule")
    op.drop_table("goatbeat_schedule")
