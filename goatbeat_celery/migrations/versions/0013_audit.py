"""The audit log: ``goatbeat_audit``, one row per change of a schedule.

Revision ID: 0013
Revises: 0012
Create Date: 2027-07-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql, postgresql

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | None = None
depends_on: str | None = None

# Types spelled out here (not imported from the live schema) so this revision never changes.
IDENTIFIER = (sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
              # A key MySQL can index (255 utf8mb4 characters: 1020 of its 3072 bytes), in
              # code-point order as "C" sorts.
              .with_variant(sa.String(255, collation="utf8mb4_bin"), "mysql", "mariadb"))
INSTANT = (sa.DateTime(timezone=True).with_variant(sa.String(26), "sqlite")
           # UTC to the microsecond.
           .with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb"))
JSON = (sa.JSON().with_variant(postgresql.JSON(), "postgresql")
        # Text on MySQL, whose JSON type reorders object keys (kwargs keep their order).
        .with_variant(mysql.LONGTEXT(), "mysql", "mariadb"))
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # A new table only: replicas of the previous version never read it and keep running
    # during a rolling upgrade (their changes are not logged until they are upgraded).
    op.create_table(
        "goatbeat_audit",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("schedule_name", IDENTIFIER, nullable=False),
        sa.Column("at", INSTANT, nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("changes", JSON, nullable=False),
    )
    op.create_index("ix_goatbeat_audit_schedule", "goatbeat_audit", ["schedule_name", "id"])
    op.create_index("ix_goatbeat_audit_at", "goatbeat_audit", ["at"])


def downgrade() -> None:
    op.drop_index("ix_goatbeat_audit_at", table_name="goatbeat_audit")
    op.drop_index("ix_goatbeat_audit_schedule", table_name="goatbeat_audit")
    op.drop_table("goatbeat_audit")
