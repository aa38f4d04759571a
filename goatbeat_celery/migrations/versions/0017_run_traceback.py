"""Runs across schedules: the executions' ``run_traceback`` (the worker's traceback that goes
with ``run_error``) and the indexes of the dashboard's runs page, newest first by outcome and
by worker.

Revision ID: 0017
Revises: 0016
Create Date: 2027-08-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | None = None
depends_on: str | None = None

# Spelled out here (not imported from the live schema) so this revision never changes.
NOT_STARTED = "run_state IS NULL"


def upgrade() -> None:
    # Nullable with no default: older replicas' writes, which do not name it, stay valid during
    # a rolling upgrade, and no row is rewritten.
    op.add_column("goatbeat_execution", sa.Column("run_traceback", sa.Text(), nullable=True))
    # The runs page reads newest first within one outcome (the worker's report once there is
    # one, beat's dispatch state before) or one worker: without these, a rare outcome (a
    # failure among millions of successes) is found by reading the whole history.
    # InnoDB appends the primary key (``key``) to every secondary index itself, and a key of
    # up to 700 characters would not fit its 3,072-byte limit spelled out beside the others.
    last = [] if op.get_bind().dialect.name in ("mysql", "mariadb") else ["key"]
    op.create_index("ix_goatbeat_execution_run_state", "goatbeat_execution",
                    ["run_state", "occurrence_at", *last])
    op.create_index("ix_goatbeat_execution_dispatch_state", "goatbeat_execution",
                    ["state", "occurrence_at", *last], postgresql_where=sa.text(NOT_STARTED),
                    sqlite_where=sa.text(NOT_STARTED))
    # A worker's name can be longer than InnoDB indexes whole: its first 255 characters do.
    op.create_index("ix_goatbeat_execution_worker", "goatbeat_execution",
                    ["worker", "occurrence_at", *last], mysql_length={"worker": 255})


def downgrade() -> None:
    op.drop_index("ix_goatbeat_execution_worker", table_name="goatbeat_execution")
    op.drop_index("ix_goatbeat_execution_dispatch_state", table_name="goatbeat_execution")
    op.drop_index("ix_goatbeat_execution_run_state", table_name="goatbeat_execution")
    # Plain DROP COLUMN (SQLite 3.35 and later), as 0016 does.
    op.execute("ALTER TABLE goatbeat_execution DROP COLUMN run_traceback")
