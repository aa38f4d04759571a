"""What is due, and what waits for the leader."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from goatbeat_celery.core.rules.shards import Shard
from goatbeat_celery.core.types.claims import DueBatch, Waiting


class DueReads(Protocol):
    """The leader's reads of what is due and what waits for it."""

    def due_schedules(self, limit: int, *, shard: Shard | None = None,
                      until: datetime | None = None) -> DueBatch:
        """Up to ``limit`` enabled schedules with ``next_run_at <= now``, oldest due first,
        the store's ``now``, and the earliest ``next_run_at`` of any enabled schedule.

        With ``until``, those with ``next_run_at <= until`` instead, whatever the store's
        clock (a leader reading ahead of a due instant it will claim at; ``now`` is still the
        store's).

        With ``shard``, only the schedules whose stored ``shard_hash`` modulo
        ``shard.count`` is ``shard.index`` (:func:`goatbeat_celery.core.rules.shards.shard_hash`
        of the name, written with every schedule), for both; shard 0 also has those with no
        hash stored (written by a replica older than the column).

        Reads only; cost grows with ``limit``, never with the number of schedules."""
        ...

    def waiting(self) -> Waiting:
        """The store's clock and what waits for the leader (:class:`Waiting`), all shards
        together, in one round trip. Reads only, through indexes: its cost does not grow with
        the number of schedules or executions."""
        ...
