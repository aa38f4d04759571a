"""Run tracking: workers' reports, heartbeats, lost runs."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from goatbeat_celery.core.protocols import RunLog
from goatbeat_celery.core.rules.runs import (
    RunEvent,
    RunRecord,
    RunState,
    apply_event,
    lost_verdict,
    resend_due,
    resend_reason,
    schedule_period,
    settled_after_report,
)
from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.store.memory.base import MemoryStoreBase, _dispatched_at, _news


class MemoryRuns(MemoryStoreBase, RunLog):
    """Run reports, heartbeats and lost-run verdicts."""

    def record_runs(self, events: Sequence[RunEvent]) -> int:
        unknown = 0
        with self._lock:
            now = self.now()
            for event in events:
                execution = self._executions.get(event.key)
                if execution is None:
                    unknown += 1
                    continue
                record = RunRecord.of(execution)
                after = apply_event(record, event, now)
                if after is not record:
                    self._executions[event.key] = replace(
                        execution, **after.values(),
                        settled=settled_after_report(execution.settled, after.run_state))
        return unknown

    def read_runs(self, keys: Collection[str]) -> tuple[datetime, dict[str, RunRecord]]:
        with self._lock:
            return self.now(), {key: RunRecord.of(execution) for key in set(keys)
                                if (execution := self._executions.get(key)) is not None}

    def heartbeat(self, keys: Collection[str]) -> int:
        beaten = 0
        with self._lock:
            now = self.now()
            for key in set(keys):
                execution = self._executions.get(key)
                if execution is not None and execution.run_state is RunState.RUNNING:
                    self._executions[key] = replace(execution, heartbeat_at=now)
                    beaten += 1
        return beaten

    def mark_lost(self, *, silent_for: timedelta, unstarted_for: timedelta,
                  tracked_since: datetime | None = None,
                  limit: int = 1000) -> list[Execution]:
        with self._lock:
            now = self.now()
            judged: list[tuple[datetime, Execution]] = []
            for execution in self._executions.values():
                record = RunRecord.of(execution)
                lost = lost_verdict(record, dispatched_at=_dispatched_at(execution), now=now,
                                    silent_for=silent_for, unstarted_for=unstarted_for,
                                    tracked_since=tracked_since)
                if lost is not None:
                    judged.append((_news(execution), replace(
                        execution, **lost.values(),
                        settled=settled_after_report(execution.settled, lost.run_state))))
            judged.sort(key=lambda pair: (pair[0], pair[1].key))
            marked = [execution for _, execution in judged[:limit]]
            for execution in marked:
                self._executions[execution.key] = execution
        return marked

    def resend_unstarted(self, *, lease: LeaseGrant, unstarted_for: timedelta,
                         tracked_since: datetime | None, resends: int,
                         limit: int = 1000) -> list[Execution]:
        if tracked_since is None:
            return []
        with self._lock:
            now = self._check_fence(lease)
            due = sorted(
                (e for e in self._executions.values()
                 if self._resend_due(e, now=now, unstarted_for=unstarted_for,
                                     tracked_since=tracked_since, resends=resends)),
                key=lambda e: (e.submitted_at or e.claimed_at, e.key))[:limit]
            resent = [replace(e, state=ExecutionState.CLAIMED, last_error=resend_reason(e, now))
                      for e in due]
            for execution in resent:
                self._executions[execution.key] = execution
        return resent

    def _resend_due(self, execution: Execution, *, now: datetime, unstarted_for: timedelta,
                    tracked_since: datetime, resends: int) -> bool:
        """core.rules.runs.resend_due on ``execution``, with its schedule's period and own
        ``run_resends`` (a deleted schedule's run: neither)."""
        schedule = self._schedules.get(execution.schedule_name)
        return resend_due(
            RunRecord.of(execution), dispatched_at=_dispatched_at(execution),
            expires_at=execution.expires_at, attempts=execution.attempts, now=now,
            unstarted_for=unstarted_for, tracked_since=tracked_since, resends=resends,
            schedule_resends=None if schedule is None else schedule.spec.run_resends,
            period=None if schedule is None else schedule_period(
                execution.occurrence_at, schedule.next_occurrence_at))
