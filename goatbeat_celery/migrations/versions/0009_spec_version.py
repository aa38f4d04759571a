"""Definition versions: ``goatbeat_schedule.spec_version``, which only a change of what the
schedule does moves (claims, reports and pauses move ``version`` alone), so that a person's
edit is checked against other edits and never against the schedule's own runs.

Revision ID: 0009
Revises: 0008
Create Date: 2027-05-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # A server default: older replicas' inserts, which do not name the column, stay valid
    # during a rolling upgrade; every existing definition starts at version 1.
    op.add_column("goatbeat_schedule",
                  sa.Column("spec_version", sa.BigInteger(), nullable=False,
                            server_default=sa.text("1")))


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite 3.35 and later have it): a batch rebuild of the table on
    # SQLite would drop the triggers that keep the tag index.
    op.execute("ALTER TABLE goatbeat_schedule DROP COLUMN spec_version")
