"""Text search on the runs page: on PostgreSQL, trigram indexes (``pg_trgm``) of the
executions' ``key``, ``run_error`` and ``last_error``, so that a text found in a few runs among
millions is read from the index instead of reading runs until a page fills.

Where the extension is missing and cannot be created here (a role without the privilege, a
server without the contrib package), the revision still applies, without these indexes: text
search then reads runs newest first until a page fills, as before. ``goatbeat check`` says
which. Other databases get nothing.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | None = None
depends_on: str | None = None

logger = logging.getLogger(__name__)

# Spelled out here (not imported from the live schema) so this revision never changes.
INDEXES = (
    # An expression, never a candidate for the claims' ``key = ANY(...)``.
    ("ix_goatbeat_execution_key_trgm", "lower(key)", None),
    ("ix_goatbeat_execution_run_error_trgm", "run_error", "run_error IS NOT NULL"),
    ("ix_goatbeat_execution_last_error_trgm", "last_error", "last_error IS NOT NULL"),
)


def _trigrams(bind: sa.Connection) -> bool:
    """Whether pg_trgm is there, creating it when it is not and this role may."""
    if bind.execute(sa.text("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")).first():
        return True
    try:
        # In a savepoint: a refusal must not abort the migration's transaction.
        with bind.begin_nested():
            bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
    except sa.exc.DBAPIError as exc:
        logger.warning("pg_trgm cannot be created (%s): the runs page's text search reads "
                       "runs until a page fills", str(exc.orig).strip(),
                       extra={"action": "migrate"})
        return False
    return True


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql" or not _trigrams(bind):
        return
    # Partial where the column is mostly NULL (the errors): only runs with one are indexed.
    for name, column, where in INDEXES:
        op.execute(f"CREATE INDEX IF NOT EXISTS {name} ON goatbeat_execution "
                   f"USING gin ({column} gin_trgm_ops)" + (f" WHERE {where}" if where else ""))


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    # The extension stays: something else may use it.
    for name, _, _ in reversed(INDEXES):
        op.execute(f"DROP INDEX IF EXISTS {name}")
