"""What is due, claiming it under the lease, and setting schedules aside."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from goatbeat_celery.core.protocols import Claims, DueReads
from goatbeat_celery.core.rules.claims import plan_claims
from goatbeat_celery.core.rules.faults import CLAIM_CLEARS, plan_set_aside
from goatbeat_celery.core.rules.policies import execution_end
from goatbeat_celery.core.rules.runs import RunRecord, may_be_lost
from goatbeat_celery.core.rules.shards import Shard
from goatbeat_celery.core.types.claims import (
    ClaimResult,
    DueBatch,
    PlannedClaim,
    Waiting,
    check_claims_aware,
)
from goatbeat_celery.core.types.execution import ExecutionState
from goatbeat_celery.core.types.instants import check_aware
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.set_aside import SetAside
from goatbeat_celery.store.memory.base import MemoryStoreBase, _dispatch, _dispatched_at


class MemoryClaims(MemoryStoreBase, DueReads, Claims):
    """The due read, the look for waiting work, claims and set-asides."""

    def due_schedules(self, limit: int, *, shard: Shard | None = None,
                      until: datetime | None = None) -> DueBatch:
        with self._lock:
            now = self.now()
            enabled = self._enabled(shard)
            due_by = now if until is None else until
            due = tuple(s for s in enabled if s.next_run_at is not None
                        and s.next_run_at <= due_by)[:limit]
            next_due = enabled[0].next_run_at if enabled else None
            return DueBatch(now=now, schedules=due, next_due_at=next_due)

    def _enabled(self, shard: Shard | None) -> list[Schedule]:
        """The enabled schedules with a next run (of ``shard``), soonest first."""
        enabled = [s for s in self._schedules.values()
                   if s.spec.enabled and s.next_run_at is not None
                   and (shard is None or shard.holds(s.name))]
        enabled.sort(key=lambda s: (s.next_run_at, s.name))
        return enabled

    def waiting(self) -> Waiting:
        with self._lock:
            enabled = self._enabled(None)
            executions = self._executions.values()
            return Waiting(
                now=self.now(), next_due_at=enabled[0].next_run_at if enabled else None,
                unsettled=any(e.settled is False and execution_end(e) is not None
                              for e in executions),
                claimed=any(e.state is ExecutionState.CLAIMED for e in executions),
                open_runs=any(may_be_lost(RunRecord.of(e), dispatched_at=_dispatched_at(e))
                              for e in executions),
                alerts_waiting=(any(e.in_flight for e in executions)
                                or any(alert.open for alert in self._alerts.values())),
                backfills=any(b.active for b in self._backfills.values()))

    def claim(self, claims: Sequence[PlannedClaim], *, lease: LeaseGrant,
              not_before: datetime | None = None) -> ClaimResult:
        check_claims_aware(claims)
        with self._lock:
            now = self._check_fence(lease)
            if not_before is not None and now < not_before:
                return ClaimResult(dispatches=(), early=now)
            versions = {c.schedule_name: s.row_version for c in claims
                        if (s := self._schedules.get(c.schedule_name)) is not None}
            flights = self._in_flight({c.schedule_name for c in claims if c.waits_for_runs})
            runs = {c.schedule_name: s.total_runs for c in claims
                    if (s := self._schedules.get(c.schedule_name)) is not None}
            plan = plan_claims(claims, versions, token=lease.token, now=now,
                               in_flight=flights, runs=runs)
            # The dispatches carry the schedules as read before the claim, as the SQL stores'.
            before = {c.schedule_name: s for c in claims
                      if (s := self._schedules.get(c.schedule_name)) is not None}
            inserted: set[str] = set()
            for execution in plan.executions:
                if execution.key not in self._executions:
                    self._executions[execution.key] = execution
                    inserted.add(execution.key)
            for advance in plan.counted(inserted):
                schedule = self._schedules[advance.name]
                last = advance.last_occurrence_at
                self._schedules[advance.name] = replace(
                    schedule, next_occurrence_at=advance.next_occurrence_at,
                    next_run_at=advance.next_run_at,
                    last_occurrence_at=schedule.last_occurrence_at if last is None else last,
                    total_runs=schedule.total_runs + advance.runs,
                    total_missed=schedule.total_missed + advance.missed,
                    total_skipped=schedule.total_skipped + advance.skipped,
                    row_version=schedule.row_version + 1, **CLAIM_CLEARS,
                )
            return plan.result(inserted, lambda e: _dispatch(before[e.schedule_name], e))

    def set_aside(self, entries: Sequence[SetAside], *,
                  lease: LeaseGrant) -> dict[str, datetime]:
        for entry in entries:
            check_aware(entry.retry_at)
        changed: dict[str, datetime] = {}
        with self._lock:
            now = self._check_fence(lease)
            for entry in entries:
                schedule = self._schedules.get(entry.schedule_name)
                if schedule is None:
                    continue
                write = plan_set_aside(entry, version=schedule.row_version, faults=schedule.faults,
                                       fault_at=schedule.fault_at,
                                       next_run_at=schedule.next_run_at, now=now)
                if write is None:
                    continue
                self._schedules[write.name] = replace(
                    schedule, fault=write.fault, fault_at=write.fault_at, faults=write.faults,
                    next_run_at=write.next_run_at, row_version=write.version)
                changed[write.name] = write.next_run_at
        return changed
