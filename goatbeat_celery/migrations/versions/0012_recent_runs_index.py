"""Indexes for the dashboard's overview: the executions by occurrence (the newest runs of every
schedule, read for the lateness chart and ``history`` without a name) and the set-aside
schedules by name.

Revision ID: 0012
Revises: 0011
Create Date: 2027-06-15
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None

SET_ASIDE = "fault IS NOT NULL"


def upgrade() -> None:
    # Without it, the newest runs are found by sorting the whole history at each view.
    op.create_index("ix_goatbeat_execution_recent", "goatbeat_execution",
                    ["occurrence_at", "key"])
    # Partial: a handful of rows, and none of the claims' writes touch it.
    op.create_index("ix_goatbeat_schedule_set_aside", "goatbeat_schedule", ["name"],
                    postgresql_where=sa.text(SET_ASIDE), sqlite_where=sa.text(SET_ASIDE))


def downgrade() -> None:
    op.drop_index("ix_goatbeat_schedule_set_aside", table_name="goatbeat_schedule")
    op.drop_index("ix_goatbeat_execution_recent", table_name="goatbeat_execution")
