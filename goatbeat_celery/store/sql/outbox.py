"""The outbox: events delivered off the scheduling path, taken under expiring claims."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from goatbeat_celery.core.protocols import Outbox
from goatbeat_celery.core.types.outbox import (
    OutboxEntry,
    OutboxEvent,
    OutboxRetry,
    check_events,
    error_text,
)
from goatbeat_celery.store.schema import MYSQL_DIALECTS, outbox_table
from goatbeat_celery.store.sql.base import SQLStoreBase

O = outbox_table  # noqa: E741
_UNDELIVERED = O.c.delivered_at.is_(None)


def _entry(row: Any) -> OutboxEntry:
    # A row edited by hand reads as something harmless rather than failing the read.
    payload = row.payload if isinstance(row.payload, Mapping) else {"unreadable": row.payload}
    delivered_to = row.delivered_to if isinstance(row.delivered_to, list) else []
    return OutboxEntry(
        event_id=row.event_id, kind=row.kind, payload=payload, created_at=row.created_at,
        attempts=row.attempts, next_attempt_at=row.next_attempt_at,
        delivered_at=row.delivered_at,
        delivered_to=tuple(str(key) for key in delivered_to), last_error=row.last_error,
        claimed_by=row.claimed_by, claimed_until=row.claimed_until)


class SQLOutbox(SQLStoreBase, Outbox):
    """The :class:`~goatbeat_celery.core.protocols.Outbox` part."""

    def enqueue_events(self, events: Sequence[OutboxEvent]) -> int:
        check_events(events)
        with self._write("enqueue outbox events") as txn:
            return self._enqueue_events(txn.conn, events)

    def _enqueue_events(self, conn: sa.Connection, events: Sequence[OutboxEvent]) -> int:
        """Insert ``events`` whose id is new, inside the caller's transaction on ``conn``; the
        caller checked them (:func:`~goatbeat_celery.core.types.outbox.check_events`)."""
        if not events:
            return 0
        now = conn.execute(sa.select(self._now_sql())).scalar_one()
        rows = [{"event_id": e.event_id, "kind": e.kind, "payload": dict(e.payload),
                 "created_at": now, "attempts": 0, "next_attempt_at": now,
                 "delivered_at": None, "delivered_to": None, "last_error": None,
                 "claimed_by": None, "claimed_until": None}
                for e in {e.event_id: e for e in reversed(events)}.values()]
        return len({row.event_id for row in self._insert_new(
            conn, O, rows, conflict=[O.c.event_id], returning=[O.c.event_id])})

    def _due_events(self, now: sa.ColumnElement[datetime] | datetime,
                    limit: int) -> sa.Select[tuple[str]]:
        return (sa.select(O.c.event_id)
                .where(_UNDELIVERED, O.c.next_attempt_at <= now,
                       sa.or_(O.c.claimed_until.is_(None), O.c.claimed_until <= now))
                .order_by(O.c.next_attempt_at, O.c.event_id)
                .limit(limit))

    def take_events(self, *, holder: str, limit: int, hold_for: timedelta) -> list[OutboxEntry]:
        # Deliverers look every second: a read first, so that an empty outbox never takes
        # SQLite's write lock from the leader's claims.
        with self._read("look for outbox events") as conn:
            if conn.execute(self._due_events(self._now_sql(), 1)).first() is None:
                return []
        with self._write("take outbox events") as txn:
            conn = txn.conn
            now: datetime = conn.execute(sa.select(self._now_sql())).scalar_one()
            # In index order on MySQL, whose locking read of a sorted result locks every row
            # it sorts (a concurrent taker would skip them all), not only those returned.
            due = self._due_events(now, limit).with_for_update(skip_locked=True)
            for dialect in MYSQL_DIALECTS:
                due = due.with_hint(O, "FORCE INDEX (ix_goatbeat_outbox_due)", dialect)
            ids = list(conn.execute(due).scalars())
            if not ids:
                return []
            conn.execute(sa.update(O).where(O.c.event_id.in_(ids))
                         .values(claimed_by=holder, claimed_until=now + hold_for))
            rows = conn.execute(sa.select(O).where(O.c.event_id.in_(ids))).all()
        taken = {row.event_id: _entry(row) for row in rows}
        return [taken[event_id] for event_id in ids if event_id in taken]

    def mark_events_delivered(self, event_ids: Sequence[str]) -> int:
        ids = list(dict.fromkeys(event_ids))
        if not ids:
            return 0
        with self._write("mark outbox events delivered") as txn:
            return txn.conn.execute(
                sa.update(O).where(O.c.event_id.in_(ids), _UNDELIVERED)
                .values(delivered_at=self._now_sql(), attempts=O.c.attempts + 1,
                        claimed_by=None, claimed_until=None)
            ).rowcount

    def retry_events(self, retries: Sequence[OutboxRetry], *, holder: str) -> int:
        if not retries:
            return 0
        changed = 0
        with self._write("record failed outbox deliveries") as txn:
            conn = txn.conn
            now: datetime = conn.execute(sa.select(self._now_sql())).scalar_one()
            by_id = {retry.event_id: retry for retry in retries}
            rows = conn.execute(
                sa.select(O.c.event_id, O.c.delivered_to)
                .where(O.c.event_id.in_(list(by_id)), _UNDELIVERED, O.c.claimed_by == holder)
                .with_for_update()
            ).all()
            for row in rows:
                retry = by_id[row.event_id]
                had = row.delivered_to if isinstance(row.delivered_to, list) else []
                changed += conn.execute(
                    sa.update(O).where(O.c.event_id == row.event_id)
                    .values(attempts=O.c.attempts + 1, next_attempt_at=now + retry.delay,
                            last_error=error_text(retry.error),
                            delivered_to=sorted({*map(str, had), *retry.delivered_to}) or None,
                            claimed_by=None, claimed_until=None)
                ).rowcount
        return changed

    def list_events(self, *, delivered: bool | None = None,
                    limit: int = 100) -> list[OutboxEntry]:
        stmt = sa.select(O).order_by(O.c.created_at, O.c.event_id).limit(limit)
        if delivered is not None:
            stmt = stmt.where(_UNDELIVERED if not delivered else O.c.delivered_at.is_not(None))
        with self._read("read outbox events") as conn:
            return [_entry(row) for row in conn.execute(stmt)]

    def _prune_event_deletes(self, before: sa.BindParameter[Any],
                             limit: sa.BindParameter[Any]) -> list[sa.Delete]:
        """The deletes of up to ``limit`` events delivered before ``before`` and up to
        ``limit`` undelivered ones created before it (SQLHistory._prune_deletes)."""
        delivered = (sa.select(O.c.event_id)
                     .where(O.c.delivered_at.is_not(None), O.c.delivered_at < before)
                     .order_by(O.c.delivered_at).limit(limit))
        given_up = (sa.select(O.c.event_id).where(_UNDELIVERED, O.c.created_at < before)
                    .order_by(O.c.created_at).limit(limit))
        return [sa.delete(O).where(O.c.event_id.in_(self._subset(delivered))),
                sa.delete(O).where(O.c.event_id.in_(self._subset(given_up)))]
