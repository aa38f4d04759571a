"""The memory store's state, clock and waiting, shared by its parts."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Collection, Sequence
from datetime import datetime

from goatbeat_celery.core.protocols import StoreConnection
from goatbeat_celery.core.rules.alerts import Alert
from goatbeat_celery.core.rules.backfill import Backfill
from goatbeat_celery.core.rules.calendars import Calendar
from goatbeat_celery.core.rules.claims import InFlight, in_flight
from goatbeat_celery.core.rules.controls import has_tags
from goatbeat_celery.core.rules.fence import check_fence
from goatbeat_celery.core.rules.runs import RunRecord, last_news
from goatbeat_celery.core.rules.shards import Shard
from goatbeat_celery.core.types.audit import AuditEntry, AuditNote
from goatbeat_celery.core.types.claims import Dispatch
from goatbeat_celery.core.types.errors import ScheduleNotFound
from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.instants import UTC, ensure_aware
from goatbeat_celery.core.types.lease import LeaseGrant, LeaseInfo
from goatbeat_celery.core.types.outbox import OutboxEntry
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.tokens import ApiToken

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


class MemoryStoreBase(StoreConnection):
    """The state every part of :class:`MemoryStore` shares, guarded by one lock, and the clock."""

    #: Run reports do not wake a waiting leader here.
    wakes_on_every_change = False

    def __init__(self, clock: Clock = system_clock) -> None:
        self._clock = clock
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._generation = 0
        self._schedules = _Schedules()
        self._calendars: dict[str, Calendar] = {}
        #: API tokens by name, with their secrets' digests.
        self._tokens: dict[str, tuple[ApiToken, str]] = {}
        self._executions: dict[str, Execution] = {}
        self._leases: dict[str, LeaseInfo] = {}
        #: The holders whose session ended (MemoryLeases.end_session), until they ask again.
        self._ended_sessions: set[str] = set()
        self._backfills: dict[int, Backfill] = {}
        self._outbox: dict[str, OutboxEntry] = {}
        # Ids are never reused, as a database sequence would not, though old ones are pruned.
        self._backfill_ids = itertools.count(1)
        self._audit: dict[int, AuditEntry] = {}
        self._audit_ids = itertools.count(1)
        self._alerts: dict[int, Alert] = {}
        self._alert_ids = itertools.count(1)

    def has_table(self, name: str) -> bool:
        return False

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

    def close(self) -> None:
        pass

    # -- shared by several parts ---------------------------------------------------------
    def get_schedule(self, name: str) -> Schedule:
        with self._lock:
            schedule = self._schedules.get(name)
            if schedule is None:
                raise ScheduleNotFound(name)
            return schedule

    def _record(self, name: str, audit: AuditNote | None, now: datetime) -> None:
        """Write ``audit`` as an entry of ``name``'s log (under the lock, with the change)."""
        if audit is None:
            return
        entry = AuditEntry(id=next(self._audit_ids), schedule_name=name, at=now,
                           action=audit.action, actor=audit.actor, reason=audit.reason,
                           changes=dict(audit.changes))
        self._audit[entry.id] = entry

    def _check_fence(self, lease: LeaseGrant) -> datetime:
        now = self.now()
        check_fence(lease, self._leases.get(lease.name), now)
        return now

    def _in_flight(self, names: Collection[str]) -> dict[str, InFlight]:
        if not names:
            return {}
        rows: dict[str, list[tuple[str, str, str | None]]] = {name: [] for name in names}
        for e in sorted(self._executions.values(), key=lambda e: (e.claimed_at, e.key)):
            if e.schedule_name in rows:
                rows[e.schedule_name].append(
                    (e.key, e.state.value, None if e.run_state is None else e.run_state.value))
        return {name: in_flight(found) for name, found in rows.items()}

    def _in_shard(self, name: str, shard: Shard) -> bool:
        # What belongs to a deleted schedule (executions to abandon, backfills) is shard 0's.
        if name not in self._schedules:
            return shard.does_global_work
        return shard.holds(name)


def _dispatch(schedule: Schedule, execution: Execution) -> Dispatch:
    spec = schedule.spec
    return Dispatch(execution=execution, task=spec.task, args=spec.args, kwargs=spec.kwargs,
                    options=spec.options, trigger=spec.trigger.to_json(),
                    total_runs=schedule.total_runs, rotate=spec.rotate,
                    rotate_handover=spec.rotate_handover)


def _dispatched_at(execution: Execution) -> datetime | None:
    """When the broker took the run, for the start timeout (None until it did)."""
    return execution.submitted_at if execution.state is ExecutionState.SUBMITTED else None


def _news(execution: Execution) -> datetime:
    news = last_news(RunRecord.of(execution), dispatched_at=_dispatched_at(execution))
    return news or execution.claimed_at
