"""Events delivered off the scheduling path."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Protocol

from goatbeat_celery.core.types.outbox import OutboxEntry, OutboxEvent, OutboxRetry


class Outbox(Protocol):
    """Events delivered off the scheduling path (:mod:`goatbeat_celery.core.types.outbox`).

    An event is written once per ``event_id``, in the transaction of what it reports: the SQL
    stores' ``_enqueue_events(conn, events)`` and the memory store's
    ``_enqueue_events_locked(events)`` write inside a transaction (under the lock) their caller
    holds already; :meth:`enqueue_events` is the same in a transaction of its own. Delivery is
    at least once: an event is taken under a claim that expires (:meth:`take_events`), so that
    two replicas never deliver it at once and a deliverer that dies leaves it to another.
    Instants are the store's clock. None of these writes notifies anyone.
    """

    def enqueue_events(self, events: Sequence[OutboxEvent]) -> int:
        """Insert ``events`` whose ``event_id`` is new (an id already present, delivered or
        not, inserts nothing until it is pruned), due at once: ``attempts`` 0,
        ``next_attempt_at`` and ``created_at`` = store-now. One transaction; returns how many
        were inserted. Invalid events raise ConfigurationError listing every problem, and
        nothing is written."""
        ...

    def take_events(self, *, holder: str, limit: int, hold_for: timedelta) -> list[OutboxEntry]:
        """Claim up to ``limit`` events due for delivery, in one transaction: not delivered,
        ``next_attempt_at`` <= store-now, and no live claim (``claimed_until`` <= store-now or
        none), earliest ``next_attempt_at`` first (then ``event_id``). Each is written
        ``claimed_by`` = ``holder``, ``claimed_until`` = store-now + ``hold_for`` and returned
        as written. Rows another transaction is claiming are skipped, not waited for."""
        ...

    def mark_events_delivered(self, event_ids: Sequence[str]) -> int:
        """Record that every destination took these events: ``delivered_at`` = store-now,
        ``attempts`` + 1, the claim cleared. Only events not delivered yet change (whoever
        holds their claim: a delivery that succeeded is true news); returns how many."""
        ...

    def retry_events(self, retries: Sequence[OutboxRetry], *, holder: str) -> int:
        """Record failed deliveries: for each event still undelivered and claimed by
        ``holder``, ``attempts`` + 1, ``next_attempt_at`` = store-now + its ``delay``,
        ``last_error``, ``delivered_to`` joined with the retry's, the claim cleared. An event
        whose claim another holder took meanwhile is left to it. Returns how many changed."""
        ...

    def list_events(self, *, delivered: bool | None = None,
                    limit: int = 100) -> list[OutboxEntry]:
        """Up to ``limit`` events, oldest first (``created_at``, then ``event_id``), only
        delivered ones or undelivered ones when ``delivered`` says so. Reads only."""
        ...
