"""An in-memory store and lease for unit tests and single-process experiments.

It runs the same contract as the database stores (the conformance suite checks it) with an
injectable clock, so tests can move time without sleeping.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from goatbeat_celery.core.backfill import (
    Backfill,
    BackfillRequest,
    BackfillState,
    BackfillStep,
    progress_after,
    step_executions,
)
from goatbeat_celery.core.calendars import Calendar
from goatbeat_celery.core.claims import (
    InFlight,
    in_flight,
    manual_execution,
    manual_run_exists,
    next_attempt,
    plan_claims,
)
from goatbeat_celery.core.controls import has_tags
from goatbeat_celery.core.errors import (
    BackfillNotFound,
    CalendarInUse,
    CalendarNotFound,
    ScheduleConflict,
    ScheduleNotFound,
)
from goatbeat_celery.core.faults import CLAIM_CLEARS, EDIT_CLEARS, plan_set_aside
from goatbeat_celery.core.fence import check_fence, grant_lease
from goatbeat_celery.core.model import (
    UTC,
    ClaimResult,
    Dispatch,
    DueBatch,
    Execution,
    ExecutionState,
    FinishedRun,
    LeaseGrant,
    LeaseInfo,
    PauseNote,
    PlannedClaim,
    RunOrderCursor,
    RunSettlement,
    Schedule,
    ScheduleCounts,
    ScheduleOrder,
    ScheduleSource,
    ScheduleSpec,
    SetAside,
    SettleReport,
    SyncEntry,
    SyncReport,
    Waiting,
    check_aware,
    ensure_aware,
    lease_live,
    list_order,
    run_order_key,
    spec_version_after,
)
from goatbeat_celery.core.policies import execution_end
from goatbeat_celery.core.runs import (
    RunEvent,
    RunRecord,
    RunState,
    apply_event,
    last_news,
    lost_verdict,
    may_be_lost,
    settled_after_report,
)
from goatbeat_celery.core.settlement import RESUME_CLEARS, held_to_release
from goatbeat_celery.core.shards import Shard
from goatbeat_celery.core.sync import StoredSummary, plan_config_sync
from goatbeat_celery.core.validation import reason_text

Clock = Callable[[], datetime]


def system_clock() -> datetime:
    return datetime.now(UTC)


class _Schedules(dict[str, Schedule]):
    """The schedules by name, with their tag index beside them (what ``goatbeat_schedule_tag``
    holds for the SQL stores), kept in step by every write of a schedule."""

    def __init__(self) -> None:
        super().__init__()
        self._by_tag: dict[str, set[str]] = {}

    def __setitem__(self, name: str, schedule: Schedule) -> None:
        old = self.get(name)
        if old is None or old.spec.tags != schedule.spec.tags:
            self._unindex(old)
            for tag in schedule.spec.tags:
                self._by_tag.setdefault(tag, set()).add(name)
        super().__setitem__(name, schedule)

    def remove(self, name: str) -> bool:
        """Forget the schedule named ``name``; whether there was one."""
        old = self.get(name)
        if old is None:
            return False
        self._unindex(old)
        super().__delitem__(name)
        return True

    def _unindex(self, schedule: Schedule | None) -> None:
        if schedule is None:
            return
        for tag in schedule.spec.tags:
            names = self._by_tag.get(tag)
            if names is not None:
                names.discard(schedule.name)
                if not names:
                    del self._by_tag[tag]

    def carrying(self, wanted: Sequence[str]) -> list[Schedule]:
        """The schedules carrying every one of ``wanted`` (has_tags), from the index entries
        of the rarest."""
        fewest = min((self._by_tag.get(tag, set()) for tag in wanted), key=len)
        return [self[name] for name in fewest if has_tags(self[name].spec.tags, wanted)]


class MemoryStore:
    """ScheduleStore, LeaseManager and RunLog in one object, guarded by one lock."""

    #: Run reports do not wake a waiting leader here.
    wakes_on_every_change = False

    def __init__(self, clock: Clock = system_clock) -> None:
        self._clock = clock
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._generation = 0
        self._schedules = _Schedules()
        self._calendars: dict[str, Calendar] = {}
        self._executions: dict[str, Execution] = {}
        self._leases: dict[str, LeaseInfo] = {}
        self._backfills: dict[int, Backfill] = {}
        # Ids are never reused, as a database sequence would not, though old ones are pruned.
        self._backfill_ids = itertools.count(1)

    # -- clock and waiting ---------------------------------------------------------------
    def now(self) -> datetime:
        return ensure_aware(self._clock(), "clock()")

    def wait(self, timeout: float) -> bool:
        with self._changed:
            seen = self._generation
            self._changed.wait_for(lambda: self._generation != seen, timeout=timeout)
            return self._generation != seen

    def notify(self) -> None:
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

    # -- lease ---------------------------------------------------------------------------
    def acquire(self, name: str, holder: str, ttl: timedelta) -> LeaseGrant | None:
        with self._lock:
            now = self.now()
            row = self._leases.get(name)
            write = grant_lease(name, holder, ttl, row=row, now=now)
            if write is None:
                return None
            grant = write.grant
            self._leases[name] = LeaseInfo(name=name, holder=holder, token=grant.token,
                                           acquired_at=write.acquired_at,
                                           expires_at=grant.expires_at, store_now=now)
            return grant

    def release(self, grant: LeaseGrant) -> bool:
        with self._lock:
            row = self._leases.get(grant.name)
            if row is None or row.holder != grant.holder or row.token != grant.token:
                return False
            self._leases[grant.name] = replace(row, holder=None, expires_at=None)
        self.notify()
        return True

    def inspect(self, name: str) -> LeaseInfo | None:
        with self._lock:
            row = self._leases.get(name)
            return None if row is None else replace(row, store_now=self.now())

    def list_leases(self, prefix: str) -> list[LeaseInfo]:
        with self._lock:
            now = self.now()
            return [replace(row, store_now=now) for name, row in sorted(self._leases.items())
                    if name.startswith(prefix)]

    def forget(self, name: str) -> bool:
        with self._lock:
            row = self._leases.get(name)
            if row is None or lease_live(row.holder, row.expires_at, self.now()):
                return False
            del self._leases[name]
            return True

    def _check_fence(self, lease: LeaseGrant) -> datetime:
        now = self.now()
        check_fence(lease, self._leases.get(lease.name), now)
        return now

    # -- schedules -----------------------------------------------------------------------
    def create_schedule(self, spec: ScheduleSpec, *, next_occurrence_at: datetime | None,
                        next_run_at: datetime | None) -> Schedule:
        check_aware(next_occurrence_at, next_run_at)
        with self._lock:
            if spec.name in self._schedules:
                raise ScheduleConflict(f"a schedule named {spec.name!r} already exists")
            now = self.now()
            schedule = Schedule(spec=spec, next_occurrence_at=next_occurrence_at,
                                next_run_at=next_run_at, created_at=now, updated_at=now)
            self._schedules[spec.name] = schedule
        self.notify()
        return schedule

    def replace_schedule(self, spec: ScheduleSpec, *, next_occurrence_at: datetime | None,
                         next_run_at: datetime | None, expected_version: int | None = None,
                         pause: PauseNote | None = None) -> Schedule:
        check_aware(next_occurrence_at, next_run_at)
        if pause is not None:
            check_aware(pause.until)
        paused = {} if pause is None else {"paused_reason": pause.reason,
                                           "paused_until": pause.until}
        with self._lock:
            current = self.get_schedule(spec.name)
            if expected_version is not None and current.version != expected_version:
                raise ScheduleConflict(
                    f"schedule {spec.name!r} is at version {current.version}, "
                    f"not {expected_version}: reload it and retry"
                )
            schedule = replace(
                current, spec=replace(spec, source=current.spec.source),
                next_occurrence_at=next_occurrence_at, next_run_at=next_run_at,
                version=current.version + 1, spec_version=spec_version_after(current, spec),
                updated_at=self.now(), **EDIT_CLEARS,
                **{**(RESUME_CLEARS if spec.enabled else {}), **paused},
            )
            self._schedules[spec.name] = schedule
        self.notify()
        return schedule

    def delete_schedule(self, name: str) -> None:
        with self._lock:
            if not self._schedules.remove(name):
                raise ScheduleNotFound(name)
        self.notify()

    def get_schedule(self, name: str) -> Schedule:
        with self._lock:
            schedule = self._schedules.get(name)
            if schedule is None:
                raise ScheduleNotFound(name)
            return schedule

    # -- exclusion calendars -------------------------------------------------------------
    def create_calendar(self, calendar: Calendar) -> Calendar:
        with self._lock:
            if calendar.name in self._calendars:
                raise ScheduleConflict(f"a calendar named {calendar.name!r} already exists")
            now = self.now()
            stored = replace(calendar, version=1, created_at=now, updated_at=now, damage=())
            self._calendars[calendar.name] = stored
        self.notify()
        return stored

    def replace_calendar(self, calendar: Calendar, *,
                         expected_version: int | None = None) -> Calendar:
        with self._lock:
            current = self.get_calendar(calendar.name)
            if expected_version is not None and current.version != expected_version:
                raise ScheduleConflict(f"calendar {calendar.name!r} is at version "
                                       f"{current.version}, not {expected_version}: reload "
                                       "it and retry")
            stored = replace(current, description=calendar.description,
                             dates=calendar.dates, ranges=calendar.ranges,
                             version=current.version + 1, updated_at=self.now(), damage=())
            self._calendars[calendar.name] = stored
        self.notify()
        return stored

    def delete_calendar(self, name: str) -> None:
        with self._lock:
            self.get_calendar(name)
            users = self.schedules_observing(name)
            if users:
                raise CalendarInUse(name, users)
            del self._calendars[name]

    def schedules_observing(self, name: str) -> list[str]:
        with self._lock:
            return [s.name for _, s in sorted(self._schedules.items())
                    if name in s.spec.calendars]

    def get_calendar(self, name: str) -> Calendar:
        with self._lock:
            calendar = self._calendars.get(name)
            if calendar is None:
                raise CalendarNotFound(name)
            return calendar

    def list_calendars(self) -> list[Calendar]:
        with self._lock:
            return [c for _, c in sorted(self._calendars.items())]

    def find_calendars(self, names: Collection[str]) -> dict[str, Calendar]:
        with self._lock:
            return {name: self._calendars[name] for name in names if name in self._calendars}

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
            api=sum(s.spec.source is ScheduleSource.API for s in every))

    def sync_config(self, entries: Sequence[SyncEntry], *, lease: LeaseGrant) -> SyncReport:
        for entry in entries:
            check_aware(entry.next_occurrence_at, entry.next_run_at)
        with self._lock:
            now = self._check_fence(lease)
            names = {e.spec.name for e in entries}
            existing = {
                name: StoredSummary(spec_hash=s.spec.spec_hash(), enabled=s.spec.enabled,
                                    source=s.spec.source, paused=s.paused_reason is not None)
                for name, s in self._schedules.items()
                if name in names or s.spec.source is ScheduleSource.CONFIG
            }
            plan = plan_config_sync(existing, entries)
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
                    version=current.version + 1,
                    spec_version=spec_version_after(current, entry.spec), updated_at=now,
                    **EDIT_CLEARS,
                    **(RESUME_CLEARS if entry.spec.enabled else {}),
                )
            for name in plan.disable:
                current = self._schedules[name]
                self._schedules[name] = replace(
                    current, spec=replace(current.spec, enabled=False),
                    version=current.version + 1, updated_at=now,
                )
        return plan.report

    # -- claiming ------------------------------------------------------------------------
    def due_schedules(self, limit: int, *, shard: Shard | None = None) -> DueBatch:
        with self._lock:
            now = self.now()
            enabled = self._enabled(shard)
            due = tuple(s for s in enabled if s.next_run_at is not None
                        and s.next_run_at <= now)[:limit]
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
                              for e in executions))

    def claim(self, claims: Sequence[PlannedClaim], *, lease: LeaseGrant) -> ClaimResult:
        for claim in claims:
            check_aware(claim.next_occurrence_at, claim.next_run_at)
            for occurrence, due in claim.occurrences:
                check_aware(occurrence, due)
        with self._lock:
            now = self._check_fence(lease)
            versions = {c.schedule_name: s.version for c in claims
                        if (s := self._schedules.get(c.schedule_name)) is not None}
            flights = self._in_flight({c.schedule_name for c in claims if c.waits_for_runs})
            runs = {c.schedule_name: s.total_runs for c in claims
                    if (s := self._schedules.get(c.schedule_name)) is not None}
            plan = plan_claims(claims, versions, token=lease.token, now=now,
                               in_flight=flights, runs=runs)
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
                    version=schedule.version + 1, **CLAIM_CLEARS,
                )
            return plan.result(inserted, lambda e: _dispatch(self._schedules[e.schedule_name], e))

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
                write = plan_set_aside(entry, version=schedule.version, faults=schedule.faults,
                                       fault_at=schedule.fault_at,
                                       next_run_at=schedule.next_run_at, now=now)
                if write is None:
                    continue
                self._schedules[write.name] = replace(
                    schedule, fault=write.fault, fault_at=write.fault_at, faults=write.faults,
                    next_run_at=write.next_run_at, version=write.version)
                changed[write.name] = write.next_run_at
        return changed

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

    def _in_shard(self, name: str, shard: Shard) -> bool:
        # What belongs to a deleted schedule (executions to abandon, backfills) is shard 0's.
        if name not in self._schedules:
            return shard.does_global_work
        return shard.holds(name)

    def mark_submitted(self, keys: Sequence[str]) -> int:
        with self._lock:
            now = self.now()
            changed = 0
            for key in keys:
                execution = self._executions.get(key)
                if execution is not None and execution.state is ExecutionState.CLAIMED:
                    self._executions[key] = replace(
                        execution, state=ExecutionState.SUBMITTED, submitted_at=now)
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

    def request_run(self, name: str) -> Execution:
        with self._lock:
            self.get_schedule(name)  # raises ScheduleNotFound
            execution = manual_execution(name, self.now())
            if execution.key in self._executions:
                raise manual_run_exists(execution)
            self._executions[execution.key] = execution
        self.notify()
        return execution

    def oldest_pending(self) -> Execution | None:
        with self._lock:
            pending = [e for e in self._executions.values()
                       if e.state is ExecutionState.CLAIMED]
        return min(pending, key=lambda e: (e.due_at, e.key), default=None)

    # -- backfills -----------------------------------------------------------------------
    def create_backfill(self, request: BackfillRequest) -> Backfill:
        check_aware(request.start, request.end)
        with self._lock:
            self.get_schedule(request.schedule_name)  # raises ScheduleNotFound
            backfill = Backfill(
                id=next(self._backfill_ids), schedule_name=request.schedule_name,
                start=request.start, end=request.end, mode=request.mode,
                newest_first=request.newest_first, per_tick=request.per_tick,
                total=request.total, created_at=self.now())
            self._backfills[backfill.id] = backfill
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

    def cancel_backfill(self, backfill_id: int) -> Backfill:
        with self._lock:
            backfill = self.get_backfill(backfill_id)
            if backfill.active:
                backfill = replace(backfill, state=BackfillState.CANCELLED,
                                   finished_at=self.now())
                self._backfills[backfill_id] = backfill
        return backfill

    def executions_by_key(self, keys: Sequence[str]) -> dict[str, Execution]:
        with self._lock:
            return {key: e for key in keys if (e := self._executions.get(key)) is not None}

    def occurrence_executions(self, schedule_name: str, start: datetime,
                              end: datetime) -> list[Execution]:
        check_aware(start, end)
        with self._lock:
            found = [e for e in self._executions.values() if e.schedule_name == schedule_name
                     and start <= e.occurrence_at <= end]
        return sorted(found, key=lambda e: (e.occurrence_at, e.key))

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

    # -- history -------------------------------------------------------------------------
    def executions(self, *, schedule_name: str | None = None,
                   limit: int = 50) -> list[Execution]:
        with self._lock:
            rows = [e for e in self._executions.values()
                    if schedule_name is None or e.schedule_name == schedule_name]
        rows.sort(key=lambda e: (e.occurrence_at, e.key), reverse=True)
        return rows[:limit]

    def prune(self, *, before: datetime, limit: int) -> int:
        before = ensure_aware(before, "before")
        with self._lock:
            old = sorted(
                (e for e in self._executions.values()
                 if e.state not in _NEVER_PRUNED and e.claimed_at < before),
                key=lambda e: e.claimed_at,
            )[:limit]
            for execution in old:
                del self._executions[execution.key]
            finished = sorted(
                (b for b in self._backfills.values()
                 if not b.active and b.finished_at is not None and b.finished_at < before),
                key=lambda b: b.finished_at or before,
            )[:limit]
            for backfill in finished:
                del self._backfills[backfill.id]
            return len(old) + len(finished)

    # -- run policies ----------------------------------------------------------------------
    def _in_flight(self, names: Collection[str]) -> dict[str, InFlight]:
        if not names:
            return {}
        rows: dict[str, list[tuple[str, str, str | None]]] = {name: [] for name in names}
        for e in sorted(self._executions.values(), key=lambda e: (e.claimed_at, e.key)):
            if e.schedule_name in rows:
                rows[e.schedule_name].append(
                    (e.key, e.state.value, None if e.run_state is None else e.run_state.value))
        return {name: in_flight(found) for name, found in rows.items()}

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
                    if schedule is None or schedule.version != settlement.version:
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
                        version=schedule.version + 1)
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

    # -- run tracking ------------------------------------------------------------------------
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

    def close(self) -> None:
        pass


#: Never pruned: claims not yet sent, and claims held back for their turn.
_NEVER_PRUNED = frozenset({ExecutionState.CLAIMED, ExecutionState.HELD})


def _dispatch(schedule: Schedule, execution: Execution) -> Dispatch:
    spec = schedule.spec
    return Dispatch(execution=execution, task=spec.task, args=spec.args, kwargs=spec.kwargs,
                    options=spec.options)


def _dispatched_at(execution: Execution) -> datetime | None:
    """When the broker took the run, for the start timeout (None until it did)."""
    return execution.submitted_at if execution.state is ExecutionState.SUBMITTED else None


def _news(execution: Execution) -> datetime:
    news = last_news(RunRecord.of(execution), dispatched_at=_dispatched_at(execution))
    return news or execution.claimed_at
