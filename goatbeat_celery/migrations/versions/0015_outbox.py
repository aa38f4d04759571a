"""The outbox: ``goatbeat_outbox``, events (alerts) delivered off the scheduling path.

Revision ID: 0015
Revises: 0014
Create Date: 2027-07-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql, postgresql

revision: str = "0015"
down_revision: str | None = "0014"
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
UNDELIVERED = "delivered_at IS NULL"
DELIVERED = "delivered_at IS NOT NULL"


def upgrade() -> None:
    # A new table only: replicas of the previous version never read it, and keep running
    # during a rolling upgrade.
    op.create_table(
        "goatbeat_outbox",
        sa.Column("event_id", IDENTIFIER, primary_key=True),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("created_at", INSTANT, nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", INSTANT, nullable=False),
        sa.Column("delivered_at", INSTANT, nullable=True),
        sa.Column("delivered_to", JSON, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("claimed_by", sa.Text(), nullable=True),
        sa.Column("claimed_until", INSTANT, nullable=True),
    )
    op.create_index("ix_goatbeat_outbox_due", "goatbeat_outbox",
                    ["next_attempt_at", "event_id"], postgresql_where=sa.text(UNDELIVERED),
                    sqlite_where=sa.text(UNDELIVERED))
    op.create_index("ix_goatbeat_outbox_delivered", "goatbeat_outbox", ["delivered_at"],
                    postgresql_where=sa.text(DELIVERED), sqlite_where=sa.text(DELIVERED))


def downgrade() -> None:
    op.drop_index("ix_goatbeat_outbox_delivered", table_name="goatbeat_outbox")
    op.drop_index("ix_goatbeat_outbox_due", table_name="goatbeat_outbox")
    op.drop_table("goatbeat_outbox")
