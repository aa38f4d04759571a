"""Settling ended runs for run policies (overlap, fixed delay, failure pauses)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from goatbeat_celery.core.protocols import Settlements
from goatbeat_celery.core.rules.policies import execution_end
from goatbeat_celery.core.rules.settlement import held_to_release
from goatbeat_celery.core.types.execution import ExecutionState
from goatbeat_celery.core.types.instants import check_aware
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.settlement import FinishedRun, RunSettlement, SettleReport
from goatbeat_celery.store.memory.base import MemoryStoreBase


class MemorySettlement(MemoryStoreBase, Settlements):
    """Ended runs read and settled under the lease."""

    def finished_runs(self, limit: int) -> list[FinishedRun]:
        with self._lock:
            ended = [e for e in self._executions.values()
                     if e.settled is False and execution_end(e) is not None]
            ended.sort(key=lambda e: (e.finished_at or e.claimed_at, e.key))
            return [FinishedRun(execution=e, schedule=self._schedules.get(e.schedule_name))
                    for e in ended[:limit]]

    def settle_runs(self, settlements: Sequence[RunSettlement], *,
                    lease: LeaseGrant) -> SettleReport:
        for settlement in settlements:
            check_aware(settlement.next_occurrence_at, settlement.next_run_at)
        settled: list[str] = []
        paused: list[tuple[str, str]] = []
        with self._lock:
            self._check_fence(lease)
            for settlement in settlements:
                execution = self._executions.get(settlement.key)
                if execution is None or execution.settled is not False:
                    continue
                if settlement.version is not None:
                    schedule = self._schedules.get(settlement.schedule_name)
                    if schedule is None or schedule.row_version != settlement.version:
                        continue  # edited meanwhile: judged again on the new version
                    reason = settlement.paused_reason
                    self._schedules[schedule.name] = replace(
                        schedule,
                        spec=schedule.spec if reason is None
                        else replace(schedule.spec, enabled=False),
                        consecutive_failures=settlement.consecutive_failures,
                        next_occurrence_at=settlement.next_occurrence_at,
                        next_run_at=settlement.next_run_at,
                        paused_reason=schedule.paused_reason if reason is None else reason,
                        row_version=schedule.row_version + 1)
                    if reason is not None:
                        paused.append((schedule.name, reason))
                self._executions[settlement.key] = replace(execution, settled=True)
                settled.append(settlement.key)
            released: list[str] = []
            names = {s.schedule_name for s in settlements}
            for flight in self._in_flight(names).values():
                key = held_to_release(flight)
                if key is not None:
                    self._executions[key] = replace(self._executions[key],
                                                    state=ExecutionState.CLAIMED)
                    released.append(key)
        return SettleReport(settled=tuple(settled), paused=tuple(paused),
                            released=tuple(sorted(released)))
