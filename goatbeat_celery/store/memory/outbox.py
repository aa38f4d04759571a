"""The memory store's outbox: events delivered off the scheduling path."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from goatbeat_celery.core.protocols import Outbox
from goatbeat_celery.core.types.outbox import (
    OutboxEntry,
    OutboxEvent,
    OutboxRetry,
    check_events,
    error_text,
)
from goatbeat_celery.store.memory.base import MemoryStoreBase


class MemoryOutbox(MemoryStoreBase, Outbox):
    """The :class:`~goatbeat_celery.core.protocols.Outbox` part."""

    def enqueue_events(self, events: Sequence[OutboxEvent]) -> int:
        check_events(events)
        with self._lock:
            return self._enqueue_events_locked(events)

    def _enqueue_events_locked(self, events: Sequence[OutboxEvent]) -> int:
        """Insert ``events`` whose id is new; the caller holds ``self._lock`` and checked them
        (:func:`~goatbeat_celery.core.types.outbox.check_events`)."""
        now = self.now()
        inserted = 0
        for event in events:
            if event.event_id in self._outbox:
                continue
            # A deep copy, as a database row would be: the caller's dict may change later.
            self._outbox[event.event_id] = OutboxEntry(
                event_id=event.event_id, kind=event.kind, payload=copy.deepcopy(
                    dict(event.payload)), created_at=now, attempts=0, next_attempt_at=now,
                delivered_at=None, delivered_to=(), last_error=None, claimed_by=None,
                claimed_until=None)
            inserted += 1
        return inserted

    def take_events(self, *, holder: str, limit: int, hold_for: timedelta) -> list[OutboxEntry]:
        with self._lock:
            now = self.now()
            due = sorted((e for e in self._outbox.values()
                          if e.delivered_at is None and e.next_attempt_at <= now
                          and (e.claimed_until is None or e.claimed_until <= now)),
                         key=lambda e: (e.next_attempt_at, e.event_id))[:limit]
            taken = []
            for entry in due:
                claimed = replace(entry, claimed_by=holder, claimed_until=now + hold_for)
                self._outbox[entry.event_id] = claimed
                taken.append(claimed)
            return taken

    def mark_events_delivered(self, event_ids: Sequence[str]) -> int:
        with self._lock:
            now = self.now()
            changed = 0
            for event_id in dict.fromkeys(event_ids):
                entry = self._outbox.get(event_id)
                if entry is None or entry.delivered_at is not None:
                    continue
                self._outbox[event_id] = replace(entry, delivered_at=now,
                                                 attempts=entry.attempts + 1, claimed_by=None,
                                                 claimed_until=None)
                changed += 1
            return changed

    def retry_events(self, retries: Sequence[OutboxRetry], *, holder: str) -> int:
        with self._lock:
            now = self.now()
            changed = 0
            for retry in retries:
                entry = self._outbox.get(retry.event_id)
                if entry is None or entry.delivered_at is not None \
                        or entry.claimed_by != holder:
                    continue
                self._outbox[retry.event_id] = replace(
                    entry, attempts=entry.attempts + 1, next_attempt_at=now + retry.delay,
                    last_error=error_text(retry.error),
                    delivered_to=tuple(sorted({*entry.delivered_to, *retry.delivered_to})),
                    claimed_by=None, claimed_until=None)
                changed += 1
            return changed

    def list_events(self, *, delivered: bool | None = None,
                    limit: int = 100) -> list[OutboxEntry]:
        with self._lock:
            rows = [e for e in self._outbox.values()
                    if delivered is None or e.delivered == delivered]
        rows.sort(key=lambda e: (e.created_at, e.event_id))
        return rows[:limit]

    def _prune_events_locked(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` events delivered before ``before`` and up to ``limit``
        undelivered ones created before it; the caller holds ``self._lock``."""
        delivered = sorted((e for e in self._outbox.values()
                            if e.delivered_at is not None and e.delivered_at < before),
                           key=lambda e: (e.delivered_at or before, e.event_id))[:limit]
        given_up = sorted((e for e in self._outbox.values()
                           if e.delivered_at is None and e.created_at < before),
                          key=lambda e: (e.created_at, e.event_id))[:limit]
        for entry in (*delivered, *given_up):
            del self._outbox[entry.event_id]
        return len(delivered) + len(given_up)
