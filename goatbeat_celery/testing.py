"""Test doubles for code that runs or drives goatbeat: a clock, a broker, an observer, a leader.

They are the ones goatbeat's own tests use, shipped so that an application's tests can run the
real engine and the real :class:`~goatbeat_celery.Schedules` in memory, without Celery, a
broker or a database, and without sleeping::

    clock = ManualClock()
    store = MemoryStore(clock)                 # the in-memory store, on the manual clock
    broker = RecordingSubmitter()
    engine = build_engine(store, clock=clock, submitter=broker)

* :class:`ManualClock` is the store's clock and the replicas' monotonic clocks: time moves only
  when the test moves it, and a replica can be frozen while the world goes on.
* :class:`RecordingSubmitter` is a broker that accepts every message and writes down what it was
  handed; it can be made unreachable, or refuse the messages of chosen schedules.
* :class:`RecordingObserver` writes down every lifecycle event the engine reports.
* :class:`MemoryStore` is the in-memory store and lease, which passes the same conformance suite
  as the database stores.
* :func:`build_engine` builds the leader, :class:`~goatbeat_celery.core.loop.engine.Engine`, on a
  store with test defaults: the store as its own lease, default settings, a recording broker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, ClassVar, NamedTuple, cast

from goatbeat_celery.core.loop.engine import Engine
from goatbeat_celery.core.loop.observer import EngineObserver, OccurrenceRecord
from goatbeat_celery.core.protocols import (
    AlertLog,
    LeaseManager,
    RunLog,
    ScheduleStore,
    TaskSubmitter,
)
from goatbeat_celery.core.rules.alerts import AlertEvent
from goatbeat_celery.core.rules.triggers import TriggerRegistry
from goatbeat_celery.core.types.claims import Dispatch, SubmitResult
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.instants import UTC, Duration, ensure_aware
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSpec
from goatbeat_celery.store.memory import MemoryStore

__all__ = [
    "ManualClock",
    "MemoryStore",
    "RecordingObserver",
    "RecordingSubmitter",
    "SubmitCall",
    "build_engine",
]


class ManualClock:
    """The store's clock and the replicas' monotonic clocks; time moves only when told to.

    Call the clock itself for the store's time: pass it as a store's ``clock``
    (``MemoryStore(clock)``, ``open_store("sqlite:///…", clock=clock)``). Give an
    :class:`~goatbeat_celery.core.loop.engine.Engine` a monotonic clock that moves with it:
    :meth:`monotonic`, shared by every replica, or :meth:`monotonic_for` a replica, which
    :meth:`advance` can hold still (``frozen``) to model a replica that was suspended while the
    store's clock, and the others, went on.

    Clocks only move forward (ValueError otherwise), except when :meth:`reset`. Instants are
    aware and in UTC; monotonic readings are exact to the microsecond, as the store's are.
    """

    #: Where a clock starts unless told otherwise: midnight UTC, on every interval's grid.
    DEFAULT_START: ClassVar[datetime] = datetime(2026, 1, 1, tzinfo=UTC)

    def __init__(self, start: datetime | None = None) -> None:
        self._start = ensure_aware(self.DEFAULT_START if start is None else start, "start")
        self._current = self._start
        #: How far behind the shared monotonic clock each replica's is (frozen time, minus any
        #: time it was moved on its own).
        self._behind: dict[str, timedelta] = {}

    def __call__(self) -> datetime:
        """The store's time: :attr:`current`."""
        return self._current

    @property
    def start(self) -> datetime:
        """The instant the clock started at (or was last :meth:`reset` to)."""
        return self._start

    @property
    def current(self) -> datetime:
        """The store's time now."""
        return self._current

    def monotonic(self) -> float:
        """A monotonic clock, in seconds since :attr:`start`, that moves with the store's
        clock and is never frozen: for an Engine, or several that never stall."""
        return (self._current - self._start).total_seconds()

    def monotonic_for(self, holder: str) -> Callable[[], float]:
        """The monotonic clock of the replica ``holder`` (the same one on every call): it moves
        with the store's clock except while ``holder`` is in :meth:`advance`'s ``frozen``."""
        self._behind.setdefault(holder, timedelta(0))
        return lambda: (self._current - self._start - self._behind[holder]).total_seconds()

    def advance(self, seconds: Duration, *, frozen: Collection[str] = ()) -> None:
        """Let ``seconds`` (or a timedelta) pass on the store's clock and on every monotonic
        clock except those of the replicas in ``frozen``, which stand still."""
        step = seconds if isinstance(seconds, timedelta) else timedelta(seconds=seconds)
        if step < timedelta(0):
            raise ValueError(f"a clock only moves forward (asked to move by {step})")
        unknown = sorted(set(frozen) - set(self._behind))
        if unknown:
            raise ValueError(f"no monotonic clock was handed out for {', '.join(unknown)} "
                             "(see monotonic_for)")
        self._current += step
        for holder in frozen:
            self._behind[holder] += step

    def move_to(self, instant: datetime, *, frozen: Collection[str] = ()) -> None:
        """Advance to ``instant`` exactly (see :meth:`advance` for ``frozen``)."""
        self.advance(ensure_aware(instant, "instant") - self._current, frozen=frozen)

    def move_just_before(self, instant: datetime) -> None:
        """Advance to one microsecond before ``instant``: the last moment it is not yet due."""
        self.move_to(ensure_aware(instant, "instant") - timedelta(microseconds=1))

    def advance_replica(self, holder: str, seconds: Duration) -> None:
        """Let ``seconds`` pass on ``holder``'s monotonic clock alone, the store's clock
        standing still: a frozen replica resuming, or one whose clock runs fast."""
        step = seconds if isinstance(seconds, timedelta) else timedelta(seconds=seconds)
        if step < timedelta(0):
            raise ValueError(f"a clock only moves forward (asked to move by {step})")
        if holder not in self._behind:
            raise ValueError(f"no monotonic clock was handed out for {holder} "
                             "(see monotonic_for)")
        self._behind[holder] -= step

    def reset(self, start: datetime | None = None) -> None:
        """Start again from ``start`` (by default the first start), every monotonic clock back
        to zero: for a store reused from one example to the next, as Hypothesis runs them."""
        if start is not None:
            self._start = ensure_aware(start, "start")
        self._current = self._start
        self._behind = dict.fromkeys(self._behind, timedelta(0))


class SubmitCall(NamedTuple):
    """One call of :meth:`RecordingSubmitter.submit`."""

    keys: tuple[str, ...]
    token: int
    timeout: float


class RecordingSubmitter(TaskSubmitter):
    """A broker that takes every message at once and writes down what it was handed.

    While ``failing`` it is unreachable: every message fails with :attr:`failure` and the
    engine retries the batch under the same keys after its backoff. The messages of the
    schedules named in ``rejecting`` are refused for themselves (:attr:`rejection`), as a
    message that cannot be built is, and the others are accepted. Both can be changed at any
    time. Subclass and override :meth:`answer` for other brokers.

    ``calls`` and ``dispatches`` record everything handed over, accepted or not; ``sent`` only
    what was accepted.
    """

    #: What each message fails with while ``failing``, worded as goatbeat's Celery submitter
    #: words a broker that refuses connections.
    failure: str = "ConnectionRefusedError: [Errno 111] Connection refused"
    #: What the messages of the schedules in ``rejecting`` are refused with.
    rejection: str = "EncodeError: cannot serialise"

    def __init__(self, *, failing: bool = False, rejecting: Iterable[str] = (),
                 failure: str | None = None, rejection: str | None = None) -> None:
        self.failing = failing
        self.rejecting: set[str] = set(rejecting)
        if failure is not None:
            self.failure = failure
        if rejection is not None:
            self.rejection = rejection
        #: Every call: its keys, fencing token and timeout.
        self.calls: list[SubmitCall] = []
        #: Every dispatch handed over, in order.
        self.dispatches: list[Dispatch] = []
        #: ``(key, token)`` of every message accepted, in order.
        self.sent: list[tuple[str, int]] = []

    def submit(self, dispatches: Sequence[Dispatch], *, token: int,
               timeout: float) -> SubmitResult:
        self.calls.append(SubmitCall(tuple(d.key for d in dispatches), token, timeout))
        self.dispatches.extend(dispatches)
        result = self.answer(dispatches)
        self.sent.extend((key, token) for key in result.accepted)
        return result

    def answer(self, dispatches: Sequence[Dispatch]) -> SubmitResult:
        """What the broker makes of one batch; everything else is recording."""
        if self.failing:
            return SubmitResult(accepted=[], failed={d.key: self.failure for d in dispatches})
        rejected = {d.key: self.rejection for d in dispatches
                    if d.execution.schedule_name in self.rejecting}
        return SubmitResult(accepted=[d.key for d in dispatches if d.key not in rejected],
                            rejected=rejected)

    def of(self, schedule_name: str) -> list[Dispatch]:
        """The dispatches of one schedule handed over, in order, accepted or not."""
        return [d for d in self.dispatches if d.execution.schedule_name == schedule_name]

    @property
    def keys(self) -> list[str]:
        """The key of every message handed over, in order, accepted or not: a message sent
        again after a failure appears again."""
        return [key for call in self.calls for key in call.keys]


class RecordingObserver(EngineObserver):
    """An engine observer that writes each event down, in order, as ``(method name, what)``.

    ``what`` is the grant for ``lease_acquired``; ``(name, holder, reason)`` for
    ``lease_lost``; the tuple of keys for ``claimed`` and ``runs_resent``;
    ``(schedule_name, count)`` for ``missed``; the tuple of
    :class:`~goatbeat_celery.core.loop.observer.OccurrenceRecord` for ``submitted``;
    ``(schedule_name, reason)`` for ``set_aside`` and ``paused``; the tuple of
    ``(key, reason)`` for ``skipped``.
    """

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def of(self, kind: str) -> list[Any]:
        """What was recorded for each event named ``kind``, in order."""
        return [what for name, what in self.events if name == kind]

    def lease_acquired(self, grant: LeaseGrant) -> None:
        self.events.append(("lease_acquired", grant))

    def lease_lost(self, name: str, holder: str, reason: str) -> None:
        self.events.append(("lease_lost", (name, holder, reason)))

    def claimed(self, dispatches: Sequence[Dispatch]) -> None:
        self.events.append(("claimed", tuple(d.key for d in dispatches)))

    def missed(self, schedule_name: str, count: int) -> None:
        self.events.append(("missed", (schedule_name, count)))

    def submitted(self, records: Sequence[OccurrenceRecord]) -> None:
        self.events.append(("submitted", tuple(records)))

    def set_aside(self, schedule_name: str, reason: str) -> None:
        self.events.append(("set_aside", (schedule_name, reason)))

    def skipped(self, executions: Sequence[Execution]) -> None:
        self.events.append(("skipped", tuple((e.key, e.last_error) for e in executions)))

    def paused(self, schedule_name: str, reason: str) -> None:
        self.events.append(("paused", (schedule_name, reason)))

    def runs_resent(self, executions: Sequence[Execution]) -> None:
        self.events.append(("runs_resent", tuple(e.key for e in executions)))

    def runs_ended(self, executions: Sequence[Execution]) -> None:
        self.events.append(("runs_ended", [(e.key, e.run_state) for e in executions]))

    def alerts_changed(self, events: Sequence[AlertEvent]) -> None:
        self.events.append(("alerts_changed", [(e.action, e.alert.schedule_name,
                                                e.alert.rule.value) for e in events]))


def build_engine(
    store: ScheduleStore,
    *,
    clock: ManualClock | None = None,
    monotonic: Callable[[], float] | None = None,
    submitter: TaskSubmitter | None = None,
    settings: Settings | None = None,
    holder: str = "test",
    lease: LeaseManager | None = None,
    runs: RunLog | None = None,
    alerts: AlertLog | None = None,
    triggers: TriggerRegistry | None = None,
    config_schedules: Sequence[ScheduleSpec] = (),
    observer: EngineObserver | None = None,
    task_allowed: Callable[[str], bool] | None = None,
) -> Engine:
    """A leader, :class:`~goatbeat_celery.core.loop.engine.Engine`, on ``store``, with test
    defaults.

    * ``lease``: the store itself, as every goatbeat store is its own lease manager (pass one
      to put a wrapped store, one that fails on purpose, in front of the real lease).
    * ``monotonic``: ``clock.monotonic`` when a :class:`ManualClock` is given, so the leader's
      deadlines move only with the test's clock; else the real ``time.monotonic``, as a leader
      on a database clock needs. Give ``monotonic=clock.monotonic_for(holder)`` to a replica
      that a test freezes; passing both ``clock`` and ``monotonic`` is a TypeError.
    * ``submitter``: a new :class:`RecordingSubmitter` (read it back as ``engine.submitter``).
    * ``settings``: ``Settings()``, the defaults a deployment starts from.
    * ``holder``: ``"test"``; give each replica of a test its own.
    * ``runs``: None, so runs are not judged (pass the store to have the leader mark silent
      runs lost); ``alerts``: None, so no alert is judged (pass the store to have the leader
      judge them); ``triggers``, ``config_schedules``, ``observer`` and ``task_allowed`` are
      the Engine's own defaults.
    """
    if clock is not None and monotonic is not None:
        raise TypeError("give build_engine a clock or a monotonic clock, not both")
    if clock is not None:
        monotonic = clock.monotonic
    return Engine(
        store=store,
        # Every store goatbeat ships is its own lease manager (goatbeat_celery.store.Store).
        lease=lease if lease is not None else cast(LeaseManager, store),
        submitter=submitter if submitter is not None else RecordingSubmitter(),
        settings=settings if settings is not None else Settings(),
        holder=holder,
        triggers=triggers,
        config_schedules=config_schedules,
        observer=observer,
        task_allowed=task_allowed,
        monotonic=monotonic if monotonic is not None else time.monotonic,
        runs=runs,
        alerts=alerts,
    )
