"""Executions between their claim and the broker: pending, submitted, failed, requested."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from goatbeat_celery.core.protocols import Dispatches
from goatbeat_celery.core.rules.audit import with_change
from goatbeat_celery.core.rules.backfill import Backfill
from goatbeat_celery.core.rules.backfill_outcomes import rerun_executions, rerun_exists
from goatbeat_celery.core.rules.claims import manual_execution, manual_run_exists, next_attempt
from goatbeat_celery.core.rules.shards import Shard
from goatbeat_celery.core.rules.validation import reason_text
from goatbeat_celery.core.types.audit import AuditNote
from goatbeat_celery.core.types.claims import Dispatch
from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.instants import check_aware
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.store.memory.base import MemoryStoreBase, _dispatch


class MemoryDispatch(MemoryStoreBase, Dispatches):
    """Claimed executions taken for submission and marked as it goes."""

    def take_pending(self, *, lease: LeaseGrant, limit: int,
                     shard: Shard | None = None) -> list[Dispatch]:
        with self._lock:
            self._check_fence(lease)
            pending = sorted(
                (e for e in self._executions.values() if e.state is ExecutionState.CLAIMED
                 and (shard is None or self._in_shard(e.schedule_name, shard))),
                key=lambda e: (e.claimed_at, e.key),
            )
            taken: list[Dispatch] = []
            for execution in pending:
                if len(taken) >= limit:
                    break
                schedule = self._schedules.get(execution.schedule_name)
                if schedule is None:
                    self._executions[execution.key] = replace(
                        execution, state=ExecutionState.ABANDONED)
                    continue
                updated = replace(execution, attempts=next_attempt(execution.attempts),
                                  token=lease.token)
                self._executions[execution.key] = updated
                taken.append(_dispatch(schedule, updated))
            return taken

    def mark_submitted(self, keys: Sequence[str],
                       clusters: Mapping[str, str] | None = None) -> int:
        clusters = clusters or {}
        with self._lock:
            now = self.now()
            changed = 0
            for key in keys:
                execution = self._executions.get(key)
                if execution is not None and execution.state is ExecutionState.CLAIMED:
                    self._executions[key] = replace(
                        execution, state=ExecutionState.SUBMITTED, submitted_at=now,
                        cluster=clusters.get(key, execution.cluster))
                    changed += 1
            return changed

    def mark_expired(self, keys: Sequence[str]) -> int:
        changed = 0
        with self._lock:
            for key in keys:
                execution = self._executions.get(key)
                if execution is not None and execution.state is ExecutionState.CLAIMED:
                    self._executions[key] = replace(execution, state=ExecutionState.EXPIRED)
                    changed += 1
        return changed

    def record_failures(self, failures: Mapping[str, str], *,
                        abandon: Collection[str] = ()) -> None:
        with self._lock:
            for key, error in failures.items():
                execution = self._executions.get(key)
                if execution is None or execution.state is not ExecutionState.CLAIMED:
                    continue
                state = ExecutionState.ABANDONED if key in abandon else execution.state
                self._executions[key] = replace(execution, last_error=reason_text(error),
                                                state=state)

    def request_run(self, name: str, *, audit: AuditNote | None = None) -> Execution:
        with self._lock:
            self.get_schedule(name)  # raises ScheduleNotFound
            now = self.now()
            execution = manual_execution(name, now)
            if execution.key in self._executions:
                raise manual_run_exists(execution)
            self._executions[execution.key] = execution
            self._record(name, with_change(audit, "run", execution.key), now)
        self.notify()
        return execution

    def request_reruns(self, backfill: Backfill, round_: int,
                       occurrences: Sequence[datetime], *,
                       audit: AuditNote | None = None) -> list[Execution]:
        check_aware(*occurrences)
        with self._lock:
            self.get_schedule(backfill.schedule_name)  # raises ScheduleNotFound
            now = self.now()
            executions = rerun_executions(backfill, round_, occurrences, now=now)
            if any(e.key in self._executions for e in executions):
                raise rerun_exists(backfill, round_)
            for execution in executions:
                self._executions[execution.key] = execution
            if audit is not None:
                self._record(backfill.schedule_name, audit, now)
        self.notify()
        return executions

    def oldest_pending(self) -> Execution | None:
        with self._lock:
            pending = [e for e in self._executions.values()
                       if e.state is ExecutionState.CLAIMED]
        return min(pending, key=lambda e: (e.due_at, e.key), default=None)
