"""Run tracking: what workers did with each execution (``run_*`` columns beside beat's dispatch
``state``), and the partial indexes the leader's search for lost runs reads. Run policies: each
schedule's overlap, mode, failure backoff and pause (and what they keep), whether a run's end
was applied to its schedule, and the indexes of runs in flight and of ends to apply.

Revision ID: 0003
Revises: 0002
Create Date: 2027-01-15
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

# Types spelled out here (not imported from the live schema) so this revision never changes.
INSTANT = (sa.DateTime(timezone=True).with_variant(sa.String(26), "sqlite")
           # UTC to the microsecond.
           .with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb"))
SECONDS = sa.Float(precision=53)
RUNNING = "run_state IN ('running', 'retrying')"
UNSTARTED = "state = 'submitted' AND run_state IS NULL"
IN_FLIGHT = ("state IN ('claimed', 'submitted', 'held') "
             "AND (run_state IS NULL OR run_state IN ('running', 'retrying'))")
UNSETTLED = "NOT settled"


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
    _upgrade_run_policies()


def _upgrade_run_policies() -> None:
    """The run policies (core.rules.policies): nullable or defaulted columns, as above."""
    schedule_columns: list[sa.Column[object]] = [
        sa.Column("overlap", sa.String(16), nullable=True),
        sa.Column("mode", sa.String(16), nullable=True),
        sa.Column("failure_backoff_seconds", SECONDS, nullable=True),
        sa.Column("failure_backoff_factor", SECONDS, nullable=True),
        sa.Column("failure_backoff_max_seconds", SECONDS, nullable=True),
        sa.Column("pause_after_failures", sa.Integer(), nullable=True),
        sa.Column("consecutive_failures", sa.Integer(), nullable=False,
                  server_default=sa.text("0")),
        sa.Column("paused_reason", sa.Text(), nullable=True),
        sa.Column("total_skipped", sa.BigInteger(), nullable=False,
                  server_default=sa.text("0")),
    ]
    for column in schedule_columns:
        op.add_column("goatbeat_schedule", column)
    op.add_column("goatbeat_execution", sa.Column("settled", sa.Boolean(), nullable=True))
    op.create_index(
        "ix_goatbeat_execution_in_flight", "goatbeat_execution", ["schedule_name", "claimed_at"],
        postgresql_where=sa.text(IN_FLIGHT), sqlite_where=sa.text(IN_FLIGHT),
    )
    op.create_index(
        "ix_goatbeat_execution_unsettled", "goatbeat_execution", ["key"],
        postgresql_where=sa.text(UNSETTLED), sqlite_where=sa.text(UNSETTLED),
    )


def _downgrade_run_policies() -> None:
    op.drop_index("ix_goatbeat_execution_unsettled", table_name="goatbeat_execution")
    op.drop_index("ix_goatbeat_execution_in_flight", table_name="goatbeat_execution")
    with op.batch_alter_table("goatbeat_execution") as batch:
        batch.drop_column("settled")
    with op.batch_alter_table("goatbeat_schedule") as batch:
        for name in ("total_skipped", "paused_reason", "consecutive_failures",
                     "pause_after_failures", "failure_backoff_max_seconds",
                     "failure_backoff_factor", "failure_backoff_seconds", "mode", "overlap"):
            batch.drop_column(name)


def downgrade() -> None:
    _downgrade_run_policies()
    op.drop_index("ix_goatbeat_execution_unstarted", table_name="goatbeat_execution")
    op.drop_index("ix_goatbeat_execution_running", table_name="goatbeat_execution")
    with op.batch_alter_table("goatbeat_execution") as batch:
        for name in ("run_error", "runtime", "heartbeat_at", "finished_at", "started_at",
                     "run_attempts", "worker", "run_id", "run_state"):
            batch.drop_column(name)
