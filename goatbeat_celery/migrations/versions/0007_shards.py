"""Shards: ``goatbeat_schedule.shard_hash``, the hash a schedule's shard is taken from.

Revision ID: 0007
Revises: 0006
Create Date: 2027-04-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from goatbeat_celery.core.rules.shards import shard_hash

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None

#: Rows filled per statement batch.
BATCH = 1000


def upgrade() -> None:
    # Nullable: older replicas' inserts (which do not name the column) still succeed during a
    # rolling upgrade, and a row without a hash counts as shard 0.
    op.add_column("goatbeat_schedule", sa.Column("shard_hash", sa.BigInteger(), nullable=True))
    table = sa.table("goatbeat_schedule", sa.column("name", sa.Text()),
                     sa.column("shard_hash", sa.BigInteger()))
    bind = op.get_bind()
    names = list(bind.execute(sa.select(table.c.name)).scalars())
    update = (sa.update(table).where(table.c.name == sa.bindparam("b_name"))
              .values(shard_hash=sa.bindparam("b_hash")))
    for start in range(0, len(names), BATCH):
        bind.execute(update, [{"b_name": name, "b_hash": shard_hash(name)}
                              for name in names[start:start + BATCH]])


def downgrade() -> None:
    with op.batch_alter_table("goatbeat_schedule") as batch:
        batch.drop_column("shard_hash")
