"""Run tracking: what workers did with each execution (``run_*`` columns beside beat's dispatch
``state``), and the partial indexes the leader's search for lost runs reads.

Revision ID: 0003
Revises: 0002
Create Date: 2027-01-15
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

# Types spelled out here (not imported from the live schema) so this revision never changes.
INSTANT = sa.DateTime(timezone=True).with_variant(sa.String(26), "sqlite")
SECONDS = sa.Float(precision=53)
RUNNING = "run_state IN ('running', 'retrying')"
UNSTARTED = "state = 'submitted' AND run_state IS NULL"


def upgrade() -> None:
    # Nullable or defaulted: existing rows need no rewrite, and older replicas' inserts (which
    # do not name these columns) still succeed during a rolling upgrade.
    columns: list[sa.Column[object]] = [
        sa.Column("run_state", sa.String(16), nullable=True),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("worker", sa.Text(), nullable=True),
        sa.Column("run_attempts", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("started_at", INSTANT, nullable=True),
        sa.Column("finished_at", INSTANT, nullable=True),
        sa.Column("heartbeat_at", INSTANT, nullable=True),
        sa.Column("runtime", SECONDS, nullable=True),
        sa.Column("run_error", sa.Text(), nullable=True),
    ]
    for column in columns:
        op.add_column("goatbeat_execution", column)
    op.create_index(
        "ix_goatbeat_execution_running", "goatbeat_execution", ["heartbeat_at"],
        postgresql_where=sa.text(RUNNING), sqlite_where=sa.text(RUNNING),
    )
    op.create_index(
        "ix_goatbeat_execution_unstarted", "goatbeat_execution", ["submitted_at"],
        postgresql_where=sa.text(UNSTARTED), sqlite_where=sa.text(UNSTARTED),
    )


def downgrade() -> None:
    op.drop_index("ix_goatbeat_execution_unstarted", table_name="goatbeat_execution")
    op.drop_index("ix_goatbeat_execution_running", table_name="goatbeat_execution")
    with op.batch_alter_table("goatbeat_execution") as batch:
        for name in ("run_error", "runtime", "heartbeat_at", "finished_at", "started_at",
                     "run_attempts", "worker", "run_id", "run_state"):
            batch.drop_column(name)
