"""The memory store's backfills, and claiming a step of one under the lease."""

from __future__ import annotations

from dataclasses import replace

from goatbeat_celery.core.protocols import BackfillStore
from goatbeat_celery.core.rules.audit import with_change
from goatbeat_celery.core.rules.backfill import (
    Backfill,
    BackfillRequest,
    BackfillState,
    BackfillStep,
    progress_after,
    step_executions,
)
from goatbeat_celery.core.rules.backfill_outcomes import BackfillTally, tally_executions
from goatbeat_celery.core.rules.shards import Shard
from goatbeat_celery.core.rules.validation import reason_text
from goatbeat_celery.core.types.audit import AuditNote
from goatbeat_celery.core.types.claims import ClaimResult
from goatbeat_celery.core.types.errors import BackfillNotFound
from goatbeat_celery.core.types.instants import check_aware
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.store.memory.base import MemoryStoreBase, _dispatch


class MemoryBackfills(MemoryStoreBase, BackfillStore):
    """Backfills as the API creates them and the leader steps through them."""

    def create_backfill(self, request: BackfillRequest, *,
                        audit: AuditNote | None = None) -> Backfill:
        check_aware(request.start, request.end)
        with self._lock:
            self.get_schedule(request.schedule_name)  # raises ScheduleNotFound
            now = self.now()
            backfill = Backfill(
                id=next(self._backfill_ids), schedule_name=request.schedule_name,
                start=request.start, end=request.end, mode=request.mode,
                newest_first=request.newest_first, per_tick=request.per_tick,
                total=request.total, created_at=now)
            self._backfills[backfill.id] = backfill
            self._record(request.schedule_name, with_change(audit, "backfill", backfill.id),
                         now)
        self.notify()
        return backfill

    def get_backfill(self, backfill_id: int) -> Backfill:
        with self._lock:
            backfill = self._backfills.get(backfill_id)
        if backfill is None:
            raise BackfillNotFound(backfill_id)
        return backfill

    def list_backfills(self, *, schedule_name: str | None = None,
                       active: bool | None = None, limit: int = 100) -> list[Backfill]:
        with self._lock:
            found = [b for b in self._backfills.values()
                     if (schedule_name is None or b.schedule_name == schedule_name)
                     and (active is None or b.active == active)]
        found.sort(key=lambda b: b.id, reverse=True)
        return found[:limit]

    def active_backfills(self, limit: int, *, shard: Shard | None = None) -> list[Backfill]:
        with self._lock:
            found = sorted((b for b in self._backfills.values() if b.active and (
                shard is None or self._in_shard(b.schedule_name, shard))),
                           key=lambda b: b.id)
        return found[:limit]

    def backfill_tally(self, backfill: Backfill) -> BackfillTally:
        if backfill.created_at is None:
            return BackfillTally(counts=(), failed=())
        with self._lock:
            found = [e for e in self._executions.values()
                     if e.schedule_name == backfill.schedule_name
                     and backfill.start <= e.occurrence_at <= backfill.end
                     and e.claimed_at >= backfill.created_at]
        return tally_executions(backfill, found)

    def cancel_backfill(self, backfill_id: int, *,
                        audit: AuditNote | None = None) -> Backfill:
        with self._lock:
            backfill = self.get_backfill(backfill_id)
            if backfill.active:
                now = self.now()
                backfill = replace(backfill, state=BackfillState.CANCELLED, finished_at=now)
                self._backfills[backfill_id] = backfill
                self._record(backfill.schedule_name, audit, now)
        return backfill

    def claim_backfill(self, step: BackfillStep, *, lease: LeaseGrant) -> ClaimResult:
        with self._lock:
            now = self._check_fence(lease)
            backfill = self._backfills.get(step.backfill_id)
            schedule = self._schedules.get(step.schedule_name)
            if (backfill is None or not backfill.active or backfill.damage
                    or backfill.examined != step.examined_before or schedule is None):
                return ClaimResult(dispatches=())
            planned = step_executions(step, token=lease.token, now=now)
            inserted = [e for e in planned if e.key not in self._executions]
            for execution in inserted:
                self._executions[execution.key] = execution
            progress = progress_after(backfill, step, len(inserted), now)
            self._backfills[backfill.id] = replace(
                backfill, examined=progress.examined, claimed=progress.claimed,
                cursor=progress.cursor, state=progress.state,
                finished_at=progress.finished_at)
            return ClaimResult(dispatches=tuple(_dispatch(schedule, e) for e in inserted),
                               duplicates=len(planned) - len(inserted))

    def fail_backfill(self, backfill_id: int, reason: str, *, lease: LeaseGrant) -> bool:
        with self._lock:
            now = self._check_fence(lease)
            backfill = self._backfills.get(backfill_id)
            if backfill is None or not backfill.active:
                return False
            self._backfills[backfill_id] = replace(
                backfill, state=BackfillState.FAILED, error=reason_text(reason),
                finished_at=now)
            return True

    def put_backfill(self, backfill: Backfill) -> None:
        """Store ``backfill`` as given (tests: a row edited by hand)."""
        with self._lock:
            self._backfills[backfill.id] = backfill
