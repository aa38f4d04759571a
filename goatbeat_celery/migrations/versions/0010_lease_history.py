"""Lease history: ``goatbeat_lease.previous_holder`` and ``changed_at``, who held a lease before
its current (or last) holder and until when, so that ``status`` can say who led before.

Revision ID: 0010
Revises: 0009
Create Date: 2027-06-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None

INSTANT = (sa.DateTime(timezone=True).with_variant(sa.String(26), "sqlite")
           # UTC to the microsecond.
           .with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb"))


def upgrade() -> None:
    # Nullable, no default: older replicas' writes, which do not name the columns, stay valid
    # during a rolling upgrade (they leave the history as it was).
    op.add_column("goatbeat_lease", sa.Column("previous_holder", sa.Text(), nullable=True))
    op.add_column("goatbeat_lease", sa.Column("changed_at", INSTANT, nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE goatbeat_lease DROP COLUMN changed_at")
    op.execute("ALTER TABLE goatbeat_lease DROP COLUMN previous_holder")
