"""Rotation across clusters: the queues a schedule rotates over (``rotate``, a JSON array) and
whether an unconsumed owner hands over (``rotate_handover``), and the queue each run was sent
to (the executions' ``cluster``).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql, postgresql

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | None = None
depends_on: str | None = None


# Spelled out here (not imported from the live schema) so this revision never changes: as
# 0006's calendars, json (text) on PostgreSQL and text on MySQL.
JSON = (sa.JSON().with_variant(postgresql.JSON(), "postgresql")
        .with_variant(mysql.LONGTEXT(), "mysql", "mariadb"))


def upgrade() -> None:
    # Nullable with no default: older replicas' writes, which do not name them, stay valid
    # during a rolling upgrade (NULL: not rotated), and no row is rewritten.
    op.add_column("goatbeat_schedule", sa.Column("rotate", JSON, nullable=True))
    op.add_column("goatbeat_schedule", sa.Column("rotate_handover", sa.Boolean(), nullable=True))
    op.add_column("goatbeat_execution", sa.Column("cluster", sa.Text(), nullable=True))


def downgrade() -> None:
    # Plain DROP COLUMN (SQLite 3.35 and later), as 0016 does.
    op.execute("ALTER TABLE goatbeat_execution DROP COLUMN cluster")
    op.execute("ALTER TABLE goatbeat_schedule DROP COLUMN rotate_handover")
    op.execute("ALTER TABLE goatbeat_schedule DROP COLUMN rotate")
