"""Acknowledged and silenced alerts: ``goatbeat_alert``'s ``acknowledged_at``,
``acknowledged_by`` and ``ack_note`` (who acknowledged an open alert, when, why) and
``silenced_until`` and ``silenced_by`` (nothing is told of it before then).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | None = None
depends_on: str | None = None

# Spelled out here (not imported from the live schema) so this revision never changes.
INSTANT = (sa.DateTime(timezone=True).with_variant(sa.String(26), "sqlite")
           # UTC to the microsecond.
           .with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb"))
COLUMNS = (("acknowledged_at", INSTANT), ("acknowledged_by", sa.Text()),
           ("ack_note", sa.Text()), ("silenced_until", INSTANT), ("silenced_by", sa.Text()))


def upgrade() -> None:
    # Nullable with no default: no alert is acknowledged nor silenced, no row is rewritten,
    # and older replicas' writes, which do not name the columns, stay valid during a rolling
    # upgrade.
    for name, type_ in COLUMNS:
        op.add_column("goatbeat_alert", sa.Column(name, type_, nullable=True))


def downgrade() -> None:
    # Plain DROP COLUMN (SQLite 3.35 and later), as 0017 does.
    for name, _ in reversed(COLUMNS):
        op.execute(f"ALTER TABLE goatbeat_alert DROP COLUMN {name}")
