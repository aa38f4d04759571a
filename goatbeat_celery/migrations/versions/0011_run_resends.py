"""Resends per schedule: ``goatbeat_schedule.run_resends``, how many times a run of the schedule
that no worker started is sent again (NULL: the setting ``goatbeat_run_resends``).

Revision ID: 0011
Revises: 0010
Create Date: 2027-07-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # Nullable, no default: every schedule keeps following the setting, and older replicas'
    # writes, which do not name the column, stay valid during a rolling upgrade.
    op.add_column("goatbeat_schedule", sa.Column("run_resends", sa.Integer(), nullable=True))


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite 3.35 and later have it): a batch rebuild of the table on
    # SQLite would drop the triggers that keep the tag index.
    op.execute("ALTER TABLE goatbeat_schedule DROP COLUMN run_resends")
