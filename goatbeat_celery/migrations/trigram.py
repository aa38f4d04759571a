"""The optional trigram indexes of the runs page's text search (revision 0020 creates them on
PostgreSQL where ``pg_trgm`` can be had): named here, below the stores, so that the schema
comparison (:func:`goatbeat_celery.migrations.include_object`) and the store
(:mod:`goatbeat_celery.store.text_search`) read one list. Revision 0020 spells its own copy, so
that it never changes."""

from __future__ import annotations

#: (index name, column, predicate) of each trigram index on ``goatbeat_execution``.
TRIGRAM_INDEXES = (
    ("ix_goatbeat_execution_key_trgm", "key", None),
    ("ix_goatbeat_execution_run_error_trgm", "run_error", "run_error IS NOT NULL"),
    ("ix_goatbeat_execution_last_error_trgm", "last_error", "last_error IS NOT NULL"),
)
TRIGRAM_INDEX_NAMES = frozenset(name for name, _, _ in TRIGRAM_INDEXES)

__all__ = ["TRIGRAM_INDEXES", "TRIGRAM_INDEX_NAMES"]
