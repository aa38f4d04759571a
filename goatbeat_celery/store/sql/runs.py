"""Run tracking: workers' reports folded into execution rows, heartbeats, lost runs."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import sqlalchemy as sa

from goatbeat_celery.core.protocols import RunLog
from goatbeat_celery.core.rules.runs import (
    CAS_COLUMNS,
    ENDED_STATE_VALUES,
    MIN_RESEND_WAIT,
    RUN_COLUMNS,
    RunEvent,
    RunRecord,
    RunState,
    apply_events,
    last_news,
    lost_verdict,
    resend_due,
    resend_reason,
    schedule_period,
    settled_after_report,
)
from goatbeat_celery.core.rules.validation import stored_value
from goatbeat_celery.core.types.errors import StoreError
from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.store.schema import execution_table, schedule_table
from goatbeat_celery.store.sql.base import SQLStoreBase
from goatbeat_celery.store.sql.execution_rows import (
    _cas_values,
    _dispatched_at,
    _execution,
    _run_record,
    run_values,
)
from goatbeat_celery.store.sql.predicates import _IS_RUNNING, _IS_UNSTARTED

E = execution_table
S = schedule_table

# Writing one run decision back (core.rules.runs): the run columns, compare-and-set on those the
# decision was made on, so that a row another writer changed meanwhile is judged again.
_WRITE_RUN = (
    sa.update(E)
    .where(E.c.key == sa.bindparam("b_key"),
           *[E.c[name].is_not_distinct_from(sa.bindparam(f"old_{name}", type_=E.c[name].type))
             for name in CAS_COLUMNS])
    .values({
        **{E.c[name]: sa.bindparam(f"new_{name}", type_=E.c[name].type)
           for name in RUN_COLUMNS},
        # core.rules.runs.settled_after_report: a run nothing waited on turns unsettled as it ends.
        E.c.settled: sa.case((sa.and_(E.c.settled.is_(None),
                                      sa.bindparam("new_run_state", type_=E.c.run_state.type)
                                      .in_(ENDED_STATE_VALUES)), sa.false()),
                             else_=E.c.settled),
    })
)
#: How many times a batch of reports is judged again when other writers keep changing its rows.
_RUN_ROUNDS = 5
#: The run columns, in RUN_COLUMNS order.
_RUN_READ = tuple(E.c[name] for name in RUN_COLUMNS)


class RunChange(NamedTuple):
    """A run decision to write back: the row's key, the run columns as read (``read``: raw
    values of :data:`~goatbeat_celery.core.rules.runs.CAS_COLUMNS`) and as decided."""

    key: str
    read: Mapping[str, Any]
    decided: RunRecord

    def params(self) -> dict[str, Any]:
        """The bound values of :data:`_WRITE_RUN`."""
        values = self.decided
        params: dict[str, Any] = {"b_key": self.key}
        params.update((f"old_{name}", value) for name, value in self.read.items())
        params.update((f"new_{name}", getattr(values, name)) for name in RUN_COLUMNS)
        state = values.run_state
        params["new_run_state"] = None if state is None else state.value
        return params


class SQLRuns(SQLStoreBase, RunLog):
    """Run reports, heartbeats and lost-run verdicts."""

    def record_runs(self, events: Sequence[RunEvent]) -> int:
        by_key: dict[str, list[RunEvent]] = {}
        for event in events:
            by_key.setdefault(event.key, []).append(event)
        unknown = 0
        pending = sorted(by_key)  # rows are written in key order, as every writer does
        for _ in range(_RUN_ROUNDS):
            if not pending:
                return unknown
            with self._write_each("record runs") as conn:
                now, found = self._read_runs(conn, pending)
                changes: list[RunChange] = []
                for key in pending:
                    row = found.get(key)
                    if row is None or now is None:
                        unknown += len(by_key[key])
                        continue
                    read, record = row
                    decided = apply_events(record, by_key[key], now)
                    if decided != record:
                        changes.append(RunChange(key, read, decided))
                applied = self._write_runs(conn, changes) if changes else set()
            pending = [change.key for change in changes if change.key not in applied]
        if pending:
            raise StoreError(f"record runs: {len(pending)} rows kept changing while their "
                             f"reports were written, on {self._where}")
        return unknown

    def _read_runs(self, conn: sa.Connection, keys: Sequence[str]
                   ) -> tuple[datetime | None, dict[str, tuple[dict[str, Any], RunRecord]]]:
        """The run columns of the executions of ``keys`` that exist (raw, for the
        compare-and-set, and as a RunRecord) and the store's clock as they were read (None
        when none exists)."""
        now: datetime | None = None
        found: dict[str, tuple[dict[str, Any], RunRecord]] = {}
        for chunk in self._chunks(keys):
            rows = conn.execute(
                sa.select(self._now_sql().label("now"), E.c.key, *_RUN_READ)
                .where(self._in(E.c.key, chunk))
            )
            for row in rows:
                now = now or row[0]
                found[row[1]] = run_values(row[2:])
        return now, found

    def _write_runs(self, conn: sa.Connection, changes: Sequence[RunChange]) -> set[str]:
        """Write run decisions, each only where the row still holds what it was decided on;
        returns the keys written."""
        written: set[str] = set()
        for change in changes:
            if conn.execute(_WRITE_RUN, change.params()).rowcount == 1:
                written.add(change.key)
        return written

    def read_runs(self, keys: Collection[str]) -> tuple[datetime, dict[str, RunRecord]]:
        with self._read("read runs") as conn:
            now, found = self._read_runs(conn, sorted(set(keys)))
            if now is None:
                now = conn.execute(sa.select(self._now_sql())).scalar_one()
        assert now is not None
        return now, {key: record for key, (_, record) in found.items()}

    def heartbeat(self, keys: Collection[str]) -> int:
        wanted = sorted(set(keys))
        beaten = 0
        if not wanted:
            return 0
        with self._write_each("record heartbeats") as conn:
            now = self._now_sql()
            for chunk in self._chunks(wanted):
                beaten += conn.execute(
                    sa.update(E).where(self._in(E.c.key, chunk),
                                       E.c.run_state == RunState.RUNNING.value)
                    .values(heartbeat_at=now)
                ).rowcount
        return beaten

    def mark_lost(self, *, silent_for: timedelta, unstarted_for: timedelta,
                  tracked_since: datetime | None = None,
                  limit: int = 1000) -> list[Execution]:
        with self._write_each("mark lost runs") as conn:
            now: datetime = conn.execute(sa.select(self._now_sql())).scalar_one()
            # Candidates through the two partial indexes; core.rules.runs.lost_verdict decides.
            quiet_since = now - min(silent_for, unstarted_for)
            rows = [
                *conn.execute(
                    sa.select(E).where(_IS_RUNNING, sa.or_(E.c.heartbeat_at.is_(None),
                                                           E.c.heartbeat_at < quiet_since))
                    .order_by(E.c.heartbeat_at, E.c.key).limit(limit)),
                *conn.execute(
                    sa.select(E).where(_IS_UNSTARTED, E.c.submitted_at < now - unstarted_for)
                    .order_by(E.c.submitted_at, E.c.key).limit(limit)),
            ]
            judged: list[tuple[datetime, Execution, RunChange]] = []
            for row in rows:
                execution = _execution(row)
                record = _run_record(row)
                dispatched = _dispatched_at(execution)
                lost = lost_verdict(record, dispatched_at=dispatched, now=now,
                                    silent_for=silent_for, unstarted_for=unstarted_for,
                                    tracked_since=tracked_since)
                if lost is not None:
                    news = last_news(record, dispatched_at=dispatched) or execution.claimed_at
                    judged.append((news, replace(execution, **lost.values(),
                                                 settled=settled_after_report(
                                                     execution.settled, lost.run_state)),
                                   RunChange(execution.key, _cas_values(row), lost)))
            judged.sort(key=lambda item: (item[0], item[1].key))
            judged = judged[:limit]
            written = self._write_runs(conn, sorted((c for _, _, c in judged),
                                                    key=lambda c: c.key))
        return [execution for _, execution, _ in judged if execution.key in written]

    def resend_unstarted(self, *, lease: LeaseGrant, unstarted_for: timedelta,
                         tracked_since: datetime | None, resends: int,
                         limit: int = 1000) -> list[Execution]:
        if tracked_since is None:
            return []
        # A read first, through the partial index of unstarted runs: a look that finds
        # nothing to resend, the usual case, writes nothing (no fence, no lock).
        with self._read("find unstarted runs") as conn:
            now: datetime = conn.execute(sa.select(self._now_sql())).scalar_one()
            keys = [execution.key for execution in self._resendable(
                conn, now, self._resend_candidates(now, unstarted_for, tracked_since,
                                                   resends).limit(limit),
                unstarted_for=unstarted_for, tracked_since=tracked_since, resends=resends)]
        if not keys:
            return []
        resent: list[Execution] = []
        with self._write("resend unstarted runs") as txn:
            conn = txn.conn
            now = self._fence(conn, lease)
            # Judged again on the rows locked, at the fenced clock: a start written since the
            # read wins over the resend.
            for chunk in self._chunks(keys):
                query = self._resend_candidates(now, unstarted_for, tracked_since, resends) \
                    .where(self._in(E.c.key, chunk)).with_for_update(skip_locked=True, of=E)
                by_reason: dict[str, list[Execution]] = {}
                for execution in self._resendable(conn, now, query,
                                                  unstarted_for=unstarted_for,
                                                  tracked_since=tracked_since,
                                                  resends=resends):
                    reason = resend_reason(execution, now)
                    by_reason.setdefault(reason, []).append(
                        replace(execution, state=ExecutionState.CLAIMED, last_error=reason))
                # One statement per reason: a burst's runs mostly share theirs.
                for reason, executions in by_reason.items():
                    conn.execute(sa.update(E).where(self._in(E.c.key, [e.key for e in executions]))
                                 .values(state=ExecutionState.CLAIMED.value, last_error=reason))
                    resent.extend(executions)
        resent.sort(key=lambda e: (e.submitted_at or e.claimed_at, e.key))
        return resent

    def _resend_candidates(self, now: datetime, unstarted_for: timedelta,
                           tracked_since: datetime, resends: int) -> sa.Select[Any]:
        """Unstarted runs sent after ``tracked_since`` long enough ago to be resent, and fewer
        times than their schedule's resends (its own, else ``resends``) allow, with their
        schedule's next occurrence (for its period) and own resends, longest unsent first."""
        return (
            sa.select(E, S.c.next_occurrence_at.label("s_next"),
                      S.c.run_resends.label("s_resends"))
            .select_from(E.outerjoin(S, S.c.name == E.c.schedule_name))
            .where(_IS_UNSTARTED,
                   E.c.submitted_at < now - min(MIN_RESEND_WAIT, unstarted_for),
                   E.c.submitted_at >= tracked_since,
                   # resend_due's bound, read here too so that the runs of a schedule that
                   # resends none never fill the limit ahead of those to resend.
                   E.c.attempts <= sa.func.coalesce(S.c.run_resends, resends))
            .order_by(E.c.submitted_at, E.c.key))

    @staticmethod
    def _resendable(conn: sa.Connection, now: datetime, query: sa.Select[Any], *,
                    unstarted_for: timedelta, tracked_since: datetime,
                    resends: int) -> list[Execution]:
        """The executions of ``query`` that core.rules.runs.resend_due says to send again."""
        chosen = []
        for row in conn.execute(query):
            execution = _execution(row)
            if resend_due(_run_record(row), dispatched_at=_dispatched_at(execution),
                          expires_at=execution.expires_at, attempts=execution.attempts,
                          now=now, unstarted_for=unstarted_for, tracked_since=tracked_since,
                          resends=resends,
                          # Damage written by hand reads as unset, as the schedule's row does
                          # (which names it).
                          schedule_resends=stored_value(row.s_resends, int, None,
                                                        "run_resends", []),
                          period=schedule_period(execution.occurrence_at, row.s_next)):
                chosen.append(execution)
        return chosen
