"""Alerts: the evidence the leader judges them by, and their rows (core.protocols.AlertLog)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from goatbeat_celery.core.protocols import AlertLog
from goatbeat_celery.core.rules.alerts import (
    Alert,
    AlertAction,
    AlertChange,
    AlertEvent,
    AlertRule,
    AlertState,
    outbox_event,
    resolved_refusal,
    silence_passed,
    told,
)
from goatbeat_celery.core.types.alert_evidence import AlertPage, AlertScope
from goatbeat_celery.core.types.audit import AuditNote
from goatbeat_celery.core.types.errors import AlertNotFound, ScheduleConflict
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.store.schema import (
    OPEN_ALERT_PREDICATE,
    alert_table,
    execution_table,
    schedule_table,
)
from goatbeat_celery.store.sql.execution_rows import _execution
from goatbeat_celery.store.sql.outbox import SQLOutbox
from goatbeat_celery.store.sql.predicates import (
    _IS_CLAIMED,
    _IS_IN_FLIGHT,
    _IS_UNSETTLED,
    _NOT_CLAIMED,
)
from goatbeat_celery.store.sql.rows import _schedule

A = alert_table
E = execution_table
S = schedule_table

_OPEN = A.c.state == AlertState.OPEN.value
#: In flight but not yet taken by the broker (core.rules.alerts.run_watched without tracking).
_NOT_SENT = sa.text("goatbeat_execution.state <> 'submitted'")


def _in_scope(scope: AlertScope) -> sa.ColumnElement[bool]:
    """The schedules of ``scope`` (core.types.alert_evidence.AlertScope), each part read through its
    own index: open alerts, runs in flight, runs not yet settled, claims by time."""
    def names_of(table: sa.Table, *where: sa.ColumnElement[bool] | sa.TextClause
                 ) -> sa.ColumnElement[bool]:
        return S.c.name.in_(sa.select(table.c.schedule_name).where(*where))

    parts = [names_of(A, _OPEN)]
    if scope.changed_since is None:
        parts.append(sa.select(sa.literal_column("1")).select_from(E)
                     .where(E.c.schedule_name == S.c.name).exists())
    else:
        since = scope.changed_since
        watched = [_IS_IN_FLIGHT] if scope.runs_tracked else [_IS_IN_FLIGHT, _NOT_SENT]
        parts += [names_of(E, *watched), names_of(E, _IS_UNSETTLED),
                  # Two conditions, one per partial index on claimed_at.
                  names_of(E, _IS_CLAIMED, E.c.claimed_at >= since),
                  names_of(E, _NOT_CLAIMED, E.c.claimed_at >= since)]
    if scope.names:
        parts.append(S.c.name.in_(sorted(scope.names)))
    if scope.silent_own:
        parts.append(S.c.alert_silent_seconds.is_not(None))
    return sa.or_(*parts)


def _alert(row: Any) -> Alert:
    return Alert(id=row.id, schedule_name=row.schedule_name, rule=AlertRule(row.rule),
                 state=AlertState(row.state), reason=row.reason, first_at=row.first_at,
                 last_at=row.last_at, count=row.count, key=row.key,
                 resolved_at=row.resolved_at, acknowledged_at=row.acknowledged_at,
                 acknowledged_by=row.acknowledged_by, ack_note=row.ack_note,
                 silenced_until=row.silenced_until, silenced_by=row.silenced_by)


class SQLAlerts(SQLOutbox, AlertLog):
    """The alert log; each change's outbox event is written in its transaction."""

    def alert_evidence(self, *, after: str | None, limit: int, depth: int,
                       scope: AlertScope | None = None) -> AlertPage:
        constant = after is None and (scope is None or (scope.changed_since is None
                                                        and not scope.names))
        stmt = self._alert_pages.get((limit, scope)) if constant else None
        if stmt is None:
            stmt = self._alert_page(after, limit, scope)
            if constant:
                self._alert_pages[(limit, scope)] = stmt
        with self._read("read the evidence of alerts") as conn:
            rows = conn.execute(stmt).all()
            now: datetime = rows[0][0]
            found = [row[1:] for row in rows if row[1] is not None]  # a name is never null
            page = found[:limit]
            schedules = [_schedule(row) for row in page]
            names = [schedule.name for schedule in schedules]
            runs = self._recent_runs(conn, names, depth)
            last = names[-1] if len(found) > limit else None
            # The open alerts of the page's range of names: those of a schedule deleted since
            # are in it too, for the leader to resolve.
            within = sa.select(A).where(_OPEN).order_by(A.c.id)
            if after is not None:
                within = within.where(A.c.schedule_name > after)
            if last is not None:
                within = within.where(A.c.schedule_name <= last)
            open_alerts = [_alert(row) for row in conn.execute(within)]
        return AlertPage(now=now, schedules=tuple((s, tuple(runs.get(s.name, ())))
                                                  for s in schedules),
                         open_alerts=tuple(open_alerts), last=last)

    def _alert_page(self, after: str | None, limit: int,
                    scope: AlertScope | None) -> sa.Select[Any]:
        """Up to ``limit + 1`` schedules in scope after ``after``, by name; the store's clock
        comes back joined to them, so an empty page (an idle leader's) is one statement."""
        stmt = sa.select(S).order_by(S.c.name).limit(limit + 1)
        if after is not None:
            stmt = stmt.where(S.c.name > after)
        if scope is not None:
            stmt = stmt.where(_in_scope(scope))
        page_rows = stmt.subquery("page")
        head = sa.select(self._now_sql().label("alert_now")).subquery("head")
        return (sa.select(head, page_rows).select_from(head.outerjoin(page_rows, sa.true()))
                .order_by(page_rows.c.name))

    def _recent_runs(self, conn: sa.Connection, names: Sequence[str],
                     depth: int) -> dict[str, list[Execution]]:
        """Each of ``names``' ``depth`` newest executions, newest occurrence first, through the
        history index."""
        found: dict[str, list[Execution]] = {name: [] for name in names}
        if not names:
            return found
        if self._LATERAL:
            recent = (sa.select(E).where(E.c.schedule_name == S.c.name)
                      .order_by(E.c.occurrence_at.desc(), E.c.key.desc()).limit(depth)
                      .lateral("recent"))
            for chunk in self._chunks(names):
                stmt = (sa.select(recent).select_from(S).join(recent, sa.true())
                        .where(self._in(S.c.name, chunk))
                        .order_by(recent.c.schedule_name, recent.c.occurrence_at.desc(),
                                  recent.c.key.desc()))
                for row in conn.execute(stmt):
                    found[row.schedule_name].append(_execution(row))
            return found
        each = (sa.select(E).where(E.c.schedule_name == sa.bindparam("name"))
                .order_by(E.c.occurrence_at.desc(), E.c.key.desc()).limit(depth))
        for name in names:
            found[name] = [_execution(row) for row in conn.execute(each, {"name": name})]
        return found

    def record_alerts(self, changes: Sequence[AlertChange], *,
                      lease: LeaseGrant) -> list[AlertEvent]:
        events: list[AlertEvent] = []
        with self._write("record alerts") as txn:
            conn = txn.conn
            now = self._fence(conn, lease)
            for change in changes:
                written: Any = None
                action: AlertAction = change.action
                which = (A.c.schedule_name == change.schedule_name,
                         A.c.rule == change.rule.value, _OPEN)
                if change.action == "open":
                    inserted = self._insert_new(
                        conn, A, {
                            "schedule_name": change.schedule_name, "rule": change.rule.value,
                            "state": AlertState.OPEN.value, "reason": change.reason,
                            "key": change.key, "first_at": now, "last_at": now, "count": 1},
                        conflict=[A.c.schedule_name, A.c.rule],
                        conflict_where=OPEN_ALERT_PREDICATE, returning=list(A.c))
                    written = inserted[0] if inserted else None
                    action = "open" if written is not None else "repeat"
                if (written is None and change.action in ("open", "repeat")
                        and change.key is not None):
                    written = self._update_row(
                        conn, sa.update(A).where(*which, sa.or_(A.c.key.is_(None),
                                                                A.c.key != change.key))
                        .values(count=A.c.count + 1, last_at=now, key=change.key,
                                reason=change.reason), A)
                elif change.action == "resolve":
                    written = self._update_row(
                        conn, sa.update(A).where(*which)
                        .values(state=AlertState.RESOLVED.value, resolved_at=now, last_at=now),
                        A)
                elif change.action == "remind" and change.silenced_until is not None:
                    # Only the silence the leader saw end: one set anew since is kept.
                    written = self._update_row(
                        conn, sa.update(A).where(
                            *which, A.c.silenced_until == change.silenced_until,
                            A.c.silenced_until <= now)
                        .values(silenced_until=None, silenced_by=None), A)
                if written is not None:
                    alert = _alert(written)
                    events.append(AlertEvent(
                        action=action, alert=alert, told=told(action, alert, now),
                        silence_ended=(change.silenced_until if action == "remind" else None)))
            # Each change's event goes out with it, or not at all (docs/webhooks.md).
            self._enqueue_events(conn, [outbox_event(event) for event in events
                                        if event.told])
        return events

    def get_alert(self, alert_id: int) -> Alert | None:
        with self._read("read an alert") as conn:
            row = conn.execute(sa.select(A).where(A.c.id == alert_id)).one_or_none()
        return None if row is None else _alert(row)

    def acknowledge_alert(self, alert_id: int, *, by: str, note: str | None,
                          audit: AuditNote) -> Alert:
        with self._write("acknowledge an alert") as txn:
            now = txn.conn.execute(sa.select(self._now_sql())).scalar_one()
            current = self._open_alert(txn.conn, alert_id, "acknowledged")
            written = self._update_row(
                txn.conn, sa.update(A).where(A.c.id == alert_id, _OPEN)
                .values(acknowledged_at=now, acknowledged_by=by, ack_note=note), A)
            if written is None:  # resolved by the leader between the read and the write
                raise ScheduleConflict(resolved_refusal(current, "acknowledged"))
            self._record(txn.conn, [(current.schedule_name, audit)], now)
            return _alert(written)

    def silence_alert(self, alert_id: int, *, until: datetime, by: str,
                      audit: AuditNote) -> Alert:
        with self._write("silence an alert") as txn:
            now = txn.conn.execute(sa.select(self._now_sql())).scalar_one()
            if until <= now:
                raise ScheduleConflict(silence_passed(until, now))
            current = self._open_alert(txn.conn, alert_id, "silenced")
            written = self._update_row(
                txn.conn, sa.update(A).where(A.c.id == alert_id, _OPEN)
                .values(silenced_until=until, silenced_by=by), A)
            if written is None:
                raise ScheduleConflict(resolved_refusal(current, "silenced"))
            self._record(txn.conn, [(current.schedule_name, audit)], now)
            return _alert(written)

    def _open_alert(self, conn: sa.Connection, alert_id: int, done: str) -> Alert:
        row = conn.execute(sa.select(A).where(A.c.id == alert_id)).one_or_none()
        if row is None:
            raise AlertNotFound(alert_id)
        current = _alert(row)
        if not current.open:
            raise ScheduleConflict(resolved_refusal(current, done))
        return current

    def list_alerts(self, *, open_only: bool = False, schedule_name: str | None = None,
                    limit: int = 100) -> list[Alert]:
        stmt = sa.select(A).order_by(sa.case((_OPEN, 0), else_=1), A.c.id.desc()).limit(limit)
        if open_only:
            stmt = stmt.where(_OPEN)
        if schedule_name is not None:
            stmt = stmt.where(A.c.schedule_name == schedule_name)
        with self._read("read alerts") as conn:
            return [_alert(row) for row in conn.execute(stmt)]
