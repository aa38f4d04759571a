"""The trigram indexes of the runs page's text search, on PostgreSQL where ``pg_trgm`` can be
had (migration 0020 creates them; :data:`~goatbeat_celery.store.schema.metadata` creates them
the same way, for a database built from it).

They are optional: without them the search reads runs newest first until a page fills, which
costs about the runs read. So they stay out of the schema comparison
(:func:`goatbeat_celery.migrations.include_object`), and ``goatbeat check`` reports whether they
are there (:func:`text_search_indexed`).
"""

from __future__ import annotations

import logging

import sqlalchemy as sa

from goatbeat_celery.migrations.trigram import TRIGRAM_INDEX_NAMES, TRIGRAM_INDEXES

logger = logging.getLogger(__name__)

def create_trigram_indexes(conn: sa.Connection) -> bool:
    """Create the trigram indexes on PostgreSQL (and ``pg_trgm`` when this role may); False
    when the extension cannot be had or the database is another kind."""
    if conn.dialect.name != "postgresql":
        return False
    found = conn.execute(sa.text("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'"))
    if found.first() is None:
        try:
            # In a savepoint: a refusal must not abort the caller's transaction.
            with conn.begin_nested():
                conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
        except sa.exc.DBAPIError as exc:
            logger.warning("pg_trgm cannot be created (%s): the runs page's text search reads "
                           "runs until a page fills", str(exc.orig).strip(),
                           extra={"action": "create schema"})
            return False
    for name, column, where in TRIGRAM_INDEXES:
        conn.execute(sa.text(
            f"CREATE INDEX IF NOT EXISTS {name} ON goatbeat_execution "
            f"USING gin ({column} gin_trgm_ops)" + (f" WHERE {where}" if where else "")))
    return True


def text_search_indexed(conn: sa.Connection) -> bool:
    """Whether every trigram index exists (PostgreSQL; False elsewhere)."""
    if conn.dialect.name != "postgresql":
        return False
    found = conn.execute(sa.text(
        "SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() "
        "AND tablename = 'goatbeat_execution' AND indexname = ANY(:names)"),
        {"names": sorted(TRIGRAM_INDEX_NAMES)}).scalar_one()
    return bool(found == len(TRIGRAM_INDEXES))
