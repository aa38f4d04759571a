"""Alerts: the table ``goatbeat_alert`` (one row per alert, at most one open per schedule and
rule) and the schedule's own thresholds, ``alert_late_seconds``, ``alert_failures``,
``max_runtime_seconds``, ``alert_silent_seconds``, ``alert_missed`` and ``alert_lost`` (NULL:
the settings).

Revision ID: 0016
Revises: 0015
Create Date: 2027-07-15
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | None = None
depends_on: str | None = None

OPEN = "state = 'open'"
# Types spelled out here (not imported from the live schema) so this revision never changes.
IDENTIFIER = (sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
              # A key MySQL can index (255 utf8mb4 characters: 1020 of its 3072 bytes), in
              # code-point order as "C" sorts.
              .with_variant(sa.String(255, collation="utf8mb4_bin"), "mysql", "mariadb"))
INSTANT = (sa.DateTime(timezone=True).with_variant(sa.String(26), "sqlite")
           # UTC to the microsecond.
           .with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb"))
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_COLUMNS = (("alert_late_seconds", sa.Float(precision=53)), ("alert_failures", sa.Integer()),
            ("max_runtime_seconds", sa.Float(precision=53)),
            ("alert_silent_seconds", sa.Float(precision=53)), ("alert_missed", sa.Integer()),
            ("alert_lost", sa.Integer()))


def upgrade() -> None:
    # A new table and nullable columns with no default: every schedule follows the settings,
    # and older replicas' writes, which do not name the columns, stay valid during a rolling
    # upgrade.
    for name, type_ in _COLUMNS:
        op.add_column("goatbeat_schedule", sa.Column(name, type_, nullable=True))
    op.create_table(
        "goatbeat_alert",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("schedule_name", IDENTIFIER, nullable=False),
        sa.Column("rule", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=True),
        sa.Column("first_at", INSTANT, nullable=False),
        sa.Column("last_at", INSTANT, nullable=False),
        sa.Column("resolved_at", INSTANT, nullable=True),
        sa.Column("count", sa.Integer(), nullable=False),
    )
    if op.get_bind().dialect.name in ("mysql", "mariadb"):
        # No partial index there: a generated column holds the rule of open alerts only, and
        # rows where it is NULL never collide in a unique index.
        op.execute("ALTER TABLE goatbeat_alert ADD COLUMN open_rule VARCHAR(16) "
                   f"AS (CASE WHEN {OPEN} THEN rule END) VIRTUAL")
        op.create_index("ix_goatbeat_alert_open", "goatbeat_alert",
                        ["schedule_name", "open_rule"], unique=True)
    else:
        op.create_index("ix_goatbeat_alert_open", "goatbeat_alert", ["schedule_name", "rule"],
                        unique=True, postgresql_where=sa.text(OPEN), sqlite_where=sa.text(OPEN))
    op.create_index("ix_goatbeat_alert_schedule", "goatbeat_alert", ["schedule_name", "id"])


def downgrade() -> None:
    op.drop_index("ix_goatbeat_alert_schedule", table_name="goatbeat_alert")
    op.drop_index("ix_goatbeat_alert_open", table_name="goatbeat_alert")
    op.drop_table("goatbeat_alert")
    # Plain DROP COLUMN (SQLite 3.35 and later): a batch rebuild on SQLite would drop the
    # triggers that keep the tag index.
    for name, _ in reversed(_COLUMNS):
        op.execute(f"ALTER TABLE goatbeat_schedule DROP COLUMN {name}")
