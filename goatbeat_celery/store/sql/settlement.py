"""Settling ended runs for run policies (overlap, fixed delay, failure pauses)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from goatbeat_celery.core.protocols import Settlements
from goatbeat_celery.core.rules.policies import execution_end
from goatbeat_celery.core.rules.settlement import held_to_release
from goatbeat_celery.core.types.execution import ExecutionState
from goatbeat_celery.core.types.instants import check_aware
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.settlement import FinishedRun, RunSettlement, SettleReport
from goatbeat_celery.store.schema import execution_table, schedule_table
from goatbeat_celery.store.sql.base import SQLStoreBase
from goatbeat_celery.store.sql.execution_rows import _execution
from goatbeat_celery.store.sql.predicates import (
    _ENDED_RUN_STATES,
    _IS_UNSETTLED,
    _NEVER_SENT_STATES,
)
from goatbeat_celery.store.sql.rows import _schedule

S = schedule_table
E = execution_table


class SQLSettlement(SQLStoreBase, Settlements):
    """Ended runs read and settled under the lease."""

    def finished_runs(self, limit: int) -> list[FinishedRun]:
        with self._read("read finished runs") as conn:
            ended = [_execution(row) for row in conn.execute(
                sa.select(E).where(_IS_UNSETTLED, sa.or_(E.c.run_state.in_(_ENDED_RUN_STATES),
                                                         E.c.state.in_(_NEVER_SENT_STATES)))
                .order_by(sa.func.coalesce(E.c.finished_at, E.c.claimed_at), E.c.key)
                .limit(limit))]
            ended = [e for e in ended if execution_end(e) is not None]
            schedules: dict[str, Schedule] = {}
            for chunk in self._chunks(sorted({e.schedule_name for e in ended})):
                for row in conn.execute(sa.select(S).where(self._in(S.c.name, chunk))):
                    schedule = _schedule(row)
                    schedules[schedule.name] = schedule
        return [FinishedRun(execution=e, schedule=schedules.get(e.schedule_name)) for e in ended]

    def settle_runs(self, settlements: Sequence[RunSettlement], *,
                    lease: LeaseGrant) -> SettleReport:
        for settlement in settlements:
            check_aware(settlement.next_occurrence_at, settlement.next_run_at)
        settled: list[str] = []
        paused: list[tuple[str, str]] = []
        with self._write("settle runs") as txn:
            conn = txn.conn
            self._fence(conn, lease)
            unsettled: set[str] = set()
            for chunk in self._chunks(sorted({s.key for s in settlements})):
                unsettled.update(conn.execute(
                    sa.select(E.c.key).where(self._in(E.c.key, chunk), _IS_UNSETTLED)
                    .order_by(E.c.key).with_for_update()).scalars())
            versions: dict[str, Any] = {}
            named = sorted({s.schedule_name for s in settlements
                            if s.version is not None and s.key in unsettled})
            for chunk in self._chunks(named):
                for row in conn.execute(sa.select(S.c.name, S.c.version)
                                        .where(self._in(S.c.name, chunk))
                                        .order_by(S.c.name).with_for_update()):
                    versions[row.name] = row.version
            for settlement in settlements:
                if settlement.key not in unsettled:
                    continue
                if settlement.version is not None:
                    name = settlement.schedule_name
                    if versions.get(name) != settlement.version:
                        continue  # edited meanwhile: judged again on the new version
                    reason = settlement.paused_reason
                    values: dict[str, Any] = {
                        "consecutive_failures": settlement.consecutive_failures,
                        "next_occurrence_at": settlement.next_occurrence_at,
                        "next_run_at": settlement.next_run_at, "version": S.c.version + 1}
                    if reason is not None:
                        values.update(enabled=False, paused_reason=reason)
                        paused.append((name, reason))
                    conn.execute(sa.update(S).where(S.c.name == name).values(**values))
                    versions[name] = settlement.version + 1
                unsettled.discard(settlement.key)
                settled.append(settlement.key)
            for chunk in self._chunks(sorted(settled)):
                conn.execute(sa.update(E).where(self._in(E.c.key, chunk)).values(settled=True))
            flights = self._in_flight(conn, sorted({s.schedule_name for s in settlements}))
            released = sorted(key for flight in flights.values()
                              if (key := held_to_release(flight)) is not None)
            for chunk in self._chunks(released):
                conn.execute(sa.update(E).where(self._in(E.c.key, chunk),
                                                E.c.state == ExecutionState.HELD.value)
                             .values(state=ExecutionState.CLAIMED.value))
        return SettleReport(settled=tuple(settled), paused=tuple(paused),
                            released=tuple(released))
