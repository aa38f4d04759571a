"""Exclusion calendars: the ``goatbeat_calendar`` table and the calendars a schedule observes.

Revision ID: 0006
Revises: 0005
Create Date: 2027-03-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql, postgresql

revision: str = "0006"
down_revision: str | None = "0005"
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


def upgrade() -> None:
    op.create_table(
        "goatbeat_calendar",
        sa.Column("name", IDENTIFIER, primary_key=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("entries", JSON, nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("created_at", INSTANT, nullable=False),
        sa.Column("updated_at", INSTANT, nullable=False),
    )
    # Nullable, NULL meaning "none": existing rows run as they did, and older replicas'
    # inserts (which do not name the column) still succeed during a rolling upgrade.
    op.add_column("goatbeat_schedule", sa.Column("calendars", JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("goatbeat_schedule") as batch:
        batch.drop_column("calendars")
    op.drop_table("goatbeat_calendar")
