"""Why a schedule is set aside (its fault, since when, how many times), starting deadlines
(a schedule's own, and the instant each execution expires), and JSON columns that keep the
order of object keys on PostgreSQL (json rather than jsonb).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql, postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None

# Types spelled out here (not imported from the live schema) so this revision never changes.
INSTANT = (sa.DateTime(timezone=True).with_variant(sa.String(26), "sqlite")
           # UTC to the microsecond.
           .with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb"))
SECONDS = sa.Float(precision=53)
JSON_COLUMNS = ("args", "kwargs", "options", "trigger")


def upgrade() -> None:
    # Nullable or defaulted: existing rows need no rewrite, and older replicas' inserts (which
    # do not name these columns) still succeed during a rolling upgrade.
    op.add_column("goatbeat_schedule", sa.Column("fault", sa.Text(), nullable=True))
    op.add_column("goatbeat_schedule", sa.Column("fault_at", INSTANT, nullable=True))
    op.add_column("goatbeat_schedule", sa.Column("faults", sa.Integer(), nullable=False,
                                                 server_default=sa.text("0")))
    op.add_column("goatbeat_schedule",
                  sa.Column("starting_deadline_seconds", SECONDS, nullable=True))
    op.add_column("goatbeat_execution", sa.Column("expires_at", INSTANT, nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        # jsonb keeps object keys sorted its own way; json keeps the text as written, so a task
        # receives its kwargs in their order (rows written before keep the order jsonb gave).
        for column in JSON_COLUMNS:
            op.alter_column("goatbeat_schedule", column, type_=postgresql.JSON(),
                            existing_type=postgresql.JSONB(), existing_nullable=False,
                            postgresql_using=f"{column}::text::json")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for column in JSON_COLUMNS:
            op.alter_column("goatbeat_schedule", column, type_=postgresql.JSONB(),
                            existing_type=postgresql.JSON(), existing_nullable=False,
                            postgresql_using=f"{column}::jsonb")
    with op.batch_alter_table("goatbeat_execution") as batch:
        batch.drop_column("expires_at")
    with op.batch_alter_table("goatbeat_schedule") as batch:
        batch.drop_column("starting_deadline_seconds")
        batch.drop_column("faults")
        batch.drop_column("fault_at")
        batch.drop_column("fault")
