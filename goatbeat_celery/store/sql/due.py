"""What is due, and whether any work waits: the leader's reads between claims."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from goatbeat_celery.core.protocols import DueReads
from goatbeat_celery.core.rules.shards import Shard
from goatbeat_celery.core.types.claims import DueBatch, Waiting
from goatbeat_celery.store.schema import (
    OPEN_ALERT_PREDICATE,
    alert_table,
    backfill_table,
    execution_table,
    schedule_table,
)
from goatbeat_celery.store.sql.base import SQLStoreBase
from goatbeat_celery.store.sql.predicates import (
    _IN_SHARD,
    _IS_ACTIVE_BACKFILL,
    _IS_CLAIMED,
    _IS_ENABLED,
    _IS_IN_FLIGHT,
    _IS_RUNNING,
    _IS_UNSETTLED,
    _IS_UNSTARTED,
    due_params,
)
from goatbeat_celery.store.sql.rows import _schedule, waiting_from_row

S = schedule_table
E = execution_table
A = alert_table
B = backfill_table
_OPEN_ALERT = sa.text(OPEN_ALERT_PREDICATE)


class SQLDue(SQLStoreBase, DueReads):
    """The due read (one round trip) and the look for waiting work."""

    def _due_statement(self, sharded: bool = False, ahead: bool = False) -> sa.Select[Any]:
        """Built once each way: the clock expression is constant; the limit, a shard's index
        and count, and the instant read ahead to (``ahead``) are parameters."""
        stmt = self._due_stmts.get((sharded, ahead))
        if stmt is None:
            stmt = self._due_stmts[sharded, ahead] = self._build_due(sharded, ahead)
        return stmt

    def _build_due(self, sharded: bool, ahead: bool) -> sa.Select[Any]:
        now = self._now_sql()
        enabled: sa.ColumnElement[bool] | sa.TextClause = _IS_ENABLED
        if sharded:
            enabled = sa.and_(enabled, _IN_SHARD)
        due_by: sa.ColumnElement[datetime] = (
            sa.bindparam("due_until", type_=S.c.next_run_at.type) if ahead else now)
        due = (
            sa.select(S)
            .where(enabled, S.c.next_run_at <= due_by)
            .order_by(S.c.next_run_at, S.c.name)
            .limit(sa.bindparam("due_limit", type_=sa.Integer()))
            .subquery("due")
        )
        earliest = (sa.select(sa.func.min(S.c.next_run_at)).where(enabled)
                    .scalar_subquery())
        head = sa.select(now.label("store_now"), earliest.label("next_due")).subquery("head")
        # One round trip: the head row always comes back, joined to the due rows if any.
        return (
            sa.select(head, due)
            .select_from(head.outerjoin(due, sa.true()))
            .order_by(due.c.next_run_at, due.c.name)
        )

    def due_schedules(self, limit: int, *, shard: Shard | None = None,
                      until: datetime | None = None) -> DueBatch:
        with self._read("read due schedules") as conn:
            rows = self._fetch_due(conn, limit, shard, until)
        store_now, next_due = rows[0][0], rows[0][1]
        schedules = tuple(_schedule(row[2:]) for row in rows if row[2] is not None)
        # Kept for the claim that follows: a row it locks at the same version holds what was
        # read here, so a store may take a dispatch's task and arguments from it instead of
        # reading and decoding them again (PostgresStore does).
        self._due_read = {schedule.name: schedule for schedule in schedules}
        return DueBatch(now=store_now, schedules=schedules, next_due_at=next_due)

    def _fetch_due(self, conn: sa.Connection, limit: int, shard: Shard | None = None,
                   until: datetime | None = None) -> Sequence[Sequence[Any]]:
        """Rows of the due statement, converted: the clock, the earliest due instant, then the
        schedule's columns in table order."""
        return conn.execute(self._due_statement(shard is not None, until is not None),
                            due_params(limit, shard, until)).all()

    def waiting(self) -> Waiting:
        with self._read("look for waiting work") as conn:
            row = conn.execute(self._waiting_statement()).one()
        return waiting_from_row(row)

    def _waiting_statement(self) -> sa.Select[Any]:
        """The one statement of :meth:`waiting`; each part through its partial index."""
        def some(table: sa.Table, *where: sa.ColumnElement[bool] | sa.TextClause
                 ) -> sa.Exists:
            return sa.select(sa.literal_column("1")).select_from(table).where(*where).exists()

        return sa.select(
            self._now_sql(),
            sa.select(sa.func.min(S.c.next_run_at)).where(_IS_ENABLED).scalar_subquery(),
            some(E, _IS_UNSETTLED),
            some(E, _IS_CLAIMED),
            # core.rules.runs.may_be_lost
            sa.or_(some(E, _IS_RUNNING), some(E, _IS_UNSTARTED)),
            sa.or_(some(A, _OPEN_ALERT), some(E, _IS_IN_FLIGHT)),
            some(B, _IS_ACTIVE_BACKFILL),
        )
