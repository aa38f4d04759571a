"""The memory store's schedules: create, edit, list and count them; sync from configuration."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from goatbeat_celery.core.protocols import ScheduleReads, ScheduleWrites
from goatbeat_celery.core.rules.audit import sync_notes
from goatbeat_celery.core.rules.faults import EDIT_CLEARS
from goatbeat_celery.core.rules.settlement import RESUME_CLEARS
from goatbeat_celery.core.rules.status import State
from goatbeat_celery.core.rules.sync import plan_config_sync, stored_summary
from goatbeat_celery.core.types.audit import AuditNote
from goatbeat_celery.core.types.errors import ScheduleConflict, ScheduleNotFound
from goatbeat_celery.core.types.instants import check_aware
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.listing import (
    RunOrderCursor,
    ScheduleCounts,
    ScheduleOrder,
    list_order,
    run_order_key,
)
from goatbeat_celery.core.types.schedule import PauseNote, Schedule, version_after
from goatbeat_celery.core.types.spec import ScheduleSource, ScheduleSpec, SyncEntry, SyncReport
from goatbeat_celery.store.memory.base import MemoryStoreBase


class MemorySchedules(MemoryStoreBase, ScheduleReads, ScheduleWrites):
    """Schedules as the API and configuration write and list them."""

    def create_schedule(self, spec: ScheduleSpec, *, next_occurrence_at: datetime | None,
                        next_run_at: datetime | None,
                        audit: AuditNote | None = None) -> Schedule:
        check_aware(next_occurrence_at, next_run_at)
        with self._lock:
            if spec.name in self._schedules:
                raise ScheduleConflict.taken("schedule", spec.name)
            now = self.now()
            schedule = Schedule(spec=spec, next_occurrence_at=next_occurrence_at,
                                next_run_at=next_run_at, created_at=now, updated_at=now)
            self._schedules[spec.name] = schedule
            self._record(spec.name, audit, now)
        self.notify()
        return schedule

    def replace_schedule(self, spec: ScheduleSpec, *, next_occurrence_at: datetime | None,
                         next_run_at: datetime | None, expected_version: int | None = None,
                         pause: PauseNote | None = None,
                         audit: AuditNote | None = None) -> Schedule:
        check_aware(next_occurrence_at, next_run_at)
        if pause is not None:
            check_aware(pause.until)
        paused = {} if pause is None else {"paused_reason": pause.reason,
                                           "paused_until": pause.until}
        with self._lock:
            current = self.get_schedule(spec.name)
            if expected_version is not None and current.row_version != expected_version:
                raise ScheduleConflict.stale("schedule", spec.name, current.row_version,
                                             expected_version)
            now = self.now()
            schedule = replace(
                current, spec=replace(spec, source=current.spec.source),
                next_occurrence_at=next_occurrence_at, next_run_at=next_run_at,
                row_version=current.row_version + 1, version=version_after(current, spec),
                updated_at=now, **EDIT_CLEARS,
                **{**(RESUME_CLEARS if spec.enabled else {}), **paused},
            )
            self._schedules[spec.name] = schedule
            self._record(spec.name, audit, now)
        self.notify()
        return schedule

    def delete_schedule(self, name: str, *, audit: AuditNote | None = None) -> None:
        with self._lock:
            if not self._schedules.remove(name):
                raise ScheduleNotFound(name)
            self._record(name, audit, self.now())
        self.notify()

    def list_schedules(self, *, paused: bool | None = None,
                       source: ScheduleSource | None = None, prefix: str | None = None,
                       limit: int | None = None, set_aside: bool | None = None,
                       after: str | RunOrderCursor | None = None,
                       order: ScheduleOrder = ScheduleOrder.NAME,
                       tags: Sequence[str] = ()) -> list[Schedule]:
        order = list_order(order, after)

        def key(schedule: Schedule) -> tuple[Any, ...]:
            if order is ScheduleOrder.NAME:
                return (schedule.name,)
            return run_order_key(schedule.next_run_at, schedule.name)

        start = (None if after is None else (after,) if isinstance(after, str)
                 else run_order_key(after.next_run_at, after.name))
        now = self.now()
        with self._lock:
            found = self._schedules.carrying(tags) if tags else self._schedules.values()
            rows = [
                s for s in sorted(found, key=key)
                if (paused is None or s.paused_at(now) == paused)
                and (start is None or key(s) > start)
                and (set_aside is None or (s.fault is not None) == set_aside)
                and (source is None or s.spec.source is source)
                and (prefix is None or s.name.startswith(prefix))
            ]
        return rows if limit is None else rows[:limit]

    def count_schedules(self) -> ScheduleCounts:
        now = self.now()
        with self._lock:
            every = list(self._schedules.values())
        return ScheduleCounts(
            total=len(every), paused=sum(s.paused_at(now) for s in every),
            set_aside=sum(s.fault is not None for s in every),
            config=sum(s.spec.source is ScheduleSource.CONFIG for s in every),
            api=sum(s.spec.source is ScheduleSource.API for s in every),
            by_state={state: sum(s.status_at(now).state is state for s in every)
                      for state in State})

    def sync_config(self, entries: Sequence[SyncEntry], *, lease: LeaseGrant,
                    prune_after: timedelta | None = None) -> SyncReport:
        for entry in entries:
            check_aware(entry.next_occurrence_at, entry.next_run_at)
        with self._lock:
            now = self._check_fence(lease)
            names = {e.spec.name for e in entries}
            read = {name: s for name, s in self._schedules.items()
                    if name in names or s.spec.source is ScheduleSource.CONFIG}
            plan = plan_config_sync(
                {name: stored_summary(s) for name, s in read.items()}, entries,
                prune_before=None if prune_after is None else now - prune_after)
            for entry in plan.insert:
                self._schedules[entry.spec.name] = Schedule(
                    spec=replace(entry.spec, source=ScheduleSource.CONFIG),
                    next_occurrence_at=entry.next_occurrence_at, next_run_at=entry.next_run_at,
                    created_at=now, updated_at=now,
                )
            for entry in plan.rewrite:
                current = self._schedules[entry.spec.name]
                self._schedules[entry.spec.name] = replace(
                    current, spec=replace(entry.spec, source=ScheduleSource.CONFIG),
                    next_occurrence_at=entry.next_occurrence_at, next_run_at=entry.next_run_at,
                    row_version=current.row_version + 1,
                    version=version_after(current, entry.spec), updated_at=now,
                    **EDIT_CLEARS,
                    **(RESUME_CLEARS if entry.spec.enabled else {}),
                )
            for name in plan.disable:
                current = self._schedules[name]
                self._schedules[name] = replace(
                    current, spec=replace(current.spec, enabled=False),
                    row_version=current.row_version + 1, updated_at=now,
                )
            for name in plan.delete:
                self._schedules.remove(name)
            for name, note in sync_notes(plan, {n: s.spec for n, s in read.items()}):
                self._record(name, note, now)
        return plan.report
