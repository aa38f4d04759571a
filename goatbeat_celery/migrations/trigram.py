"""The optional trigram indexes of the runs page's text search (revision 0020 creates them on
PostgreSQL where ``pg_trgm`` can be had): named here, below the stores, so that the schema
comparison (:func:`goatbeat_celery.migrations.include_object`) and the store
(:mod:`goatbeat_celery.store.text_search`) read one list. Revision 0020 spells its own copy, so
that it never changes."""

from __future__ import annotations

#: (index name, indexed expression, predicate) of each trigram index on ``goatbeat_execution``.
#: The key's is on ``lower(key)``: on ``key`` itself PostgreSQL may serve ``key = ANY(...)``
#: from it (pg_trgm answers equality too) and read every row sharing a trigram, as it did for
#: the claim's updates on a table without statistics (1.5 s for 600 keys among 3,000, against
#: 7 ms by the primary key); an expression index is never a candidate for ``key = …``.
TRIGRAM_INDEXES = (
    ("ix_goatbeat_execution_key_trgm", "lower(key)", None),
    ("ix_goatbeat_execution_run_error_trgm", "run_error", "run_error IS NOT NULL"),
    ("ix_goatbeat_execution_last_error_trgm", "last_error", "last_error IS NOT NULL"),
)
TRIGRAM_INDEX_NAMES = frozenset(name for name, _, _ in TRIGRAM_INDEXES)

__all__ = ["TRIGRAM_INDEXES", "TRIGRAM_INDEX_NAMES"]
