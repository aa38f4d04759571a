"""The HTTP API's tokens: the ``goatbeat_api_token`` table (a secret's digest, its scopes and
the name prefix it is limited to).

Revision ID: 0014
Revises: 0013
Create Date: 2027-07-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0014"
down_revision: str | None = "0013"
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


def upgrade() -> None:
    op.create_table(
        "goatbeat_api_token",
        sa.Column("name", IDENTIFIER, primary_key=True),
        sa.Column("digest", sa.String(64), nullable=False, unique=True),
        sa.Column("scopes", sa.Text(), nullable=False),
        sa.Column("prefix", sa.Text(), nullable=True),
        sa.Column("created_at", INSTANT, nullable=False),
        sa.Column("revoked_at", INSTANT, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("goatbeat_api_token")
