"""A leader on a store that wakes it on every change reads the first batch of a due instant
ahead of it (core.loop.ahead): woken READ_AHEAD before, it reads and plans, and at the instant
it claims and sends with no read in between. It never claims before the store's clock reaches
the instant, and what it read is dropped when a change is heard meanwhile. On the memory store
and a manual clock, the loop driven as Celery's beat drives it (wait, then tick)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, NamedTuple

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.loop.ahead import READ_AHEAD
from goatbeat_celery.core.loop.engine import Engine
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from goatbeat_celery.testing import ManualClock, RecordingSubmitter
from tests.unit.test_quiet_wakes import HeardStore, leader, run_for

EVERY_7S = TriggerSpec(kind="interval", params={"every": 7})
SCHEDULES = [ScheduleSpec(name="often", task="t.often", trigger=EVERY_7S, args=(1,))]


class ClaimCountingStore(HeardStore):
    """The store of test_quiet_wakes, also recording each claim: the store's clock, and how
    many due reads were made before it."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.claims: list[tuple[datetime, int]] = []

    def claim(self, claims: Any, *, lease: Any, not_before: datetime | None = None) -> Any:
        self.claims.append((self.now(), self.due_reads))
        return super().claim(claims, lease=lease, not_before=not_before)


def settled_leader(clock: ManualClock, store: ClaimCountingStore | None = None
                   ) -> tuple[ClaimCountingStore, RecordingSubmitter, Engine]:
    """A leader past its first runs, every 7 s (off the renewals' 10 s), with nothing heard
    since its last look."""
    store = store or ClaimCountingStore(clock)
    broker = RecordingSubmitter()
    engine = leader(store, clock, broker, SCHEDULES)
    run_for(engine, clock, 25)
    assert broker.of("often")
    return store, broker, engine


def step(engine: Engine, clock: ManualClock) -> float:
    """One turn of the loop: wait (hearing what was notified), tick; the sleep asked for."""
    engine.wait(0.001)
    return engine.tick()


def next_due(store: HeardStore) -> datetime:
    due = Schedules(store).get("often").next_run_at
    assert due is not None
    return due


class ReadAheadLeader(NamedTuple):
    clock: ManualClock
    store: ClaimCountingStore
    broker: RecordingSubmitter
    engine: Engine
    sent_before: int
    due: datetime


def read_ahead_leader() -> ReadAheadLeader:
    """A settled leader READ_AHEAD before its next due instant, that instant's batch just read
    ahead."""
    clock = ManualClock()
    store, broker, engine = settled_leader(clock)
    sent_before = len(broker.of("often"))
    due = next_due(store)
    clock.move_to(due - timedelta(seconds=READ_AHEAD))
    step(engine, clock)
    return ReadAheadLeader(clock, store, broker, engine, sent_before, due)


def test_the_due_rows_are_read_before_the_instant_and_claimed_at_it_without_a_read() -> None:
    clock = ManualClock()
    store, broker, engine = settled_leader(clock)
    sent_before = len(broker.of("often"))
    due = next_due(store)
    # The leader sleeps until READ_AHEAD before the instant, not until the instant.
    clock.advance(step(engine, clock))
    assert due - clock.current == timedelta(seconds=READ_AHEAD)
    reads = store.due_reads
    sleep = step(engine, clock)
    assert store.due_reads == reads + 1  # read ahead, nothing sent
    assert len(broker.of("often")) == sent_before
    assert sleep == READ_AHEAD
    clock.advance(sleep)
    claims = len(store.claims)
    step(engine, clock)
    sent = broker.of("often")[sent_before:]
    assert [d.execution.due_at for d in sent] == [due]
    # Claimed at the instant, with no read between the read ahead and the claim.
    assert store.claims[claims] == (due, reads + 1)
    assert sent[0].execution.claimed_at == due


def test_a_wake_before_the_instant_claims_nothing_until_the_store_clock_reaches_it() -> None:
    clock, _, broker, engine, sent_before, due = read_ahead_leader()
    clock.move_just_before(due)
    sleep = step(engine, clock)  # woken a moment early: the claim finds the store's clock early
    assert len(broker.of("often")) == sent_before
    assert 0 <= sleep <= 0.001
    clock.move_to(due)
    step(engine, clock)
    [sent] = broker.of("often")[sent_before:]
    assert sent.execution.claimed_at == due == sent.execution.due_at


def test_an_edit_heard_between_the_read_and_the_instant_is_what_is_sent() -> None:
    clock, store, broker, engine, sent_before, due = read_ahead_leader()  # args (1,) read
    reads = store.due_reads
    Schedules(store).update("often", args=[2])  # notifies: heard at the next wait
    clock.move_to(due)
    step(engine, clock)
    [sent] = broker.of("often")[sent_before:]
    assert sent.args == (2,)
    assert store.due_reads > reads  # read again, not claimed from what was read ahead


def test_an_idle_leader_far_from_any_due_instant_reads_nothing_ahead() -> None:
    """The read ahead comes only near a due instant: an hourly schedule's leader renews every
    10 s, and no renewal wake reads due rows until the hour's last READ_AHEAD."""
    clock = ManualClock()
    store = ClaimCountingStore(clock)
    broker = RecordingSubmitter()
    hourly = [ScheduleSpec(name="hourly", task="t.hourly",
                           trigger=TriggerSpec(kind="interval", params={"every": 3600}))]
    engine = leader(store, clock, broker, hourly)
    run_for(engine, clock, 15)
    reads = store.due_reads
    run_for(engine, clock, 1800)
    assert store.due_reads == reads


class SlowReadStore(ClaimCountingStore):
    """A read ahead that takes 20 ms of the store's (and the leader's) time."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self._manual = clock

    def due_schedules(self, limit: int, *, shard: Any = None,
                      until: datetime | None = None) -> Any:
        if until is not None:
            self._manual.advance(0.02)
        return super().due_schedules(limit, shard=shard, until=until)


def test_the_time_a_read_ahead_takes_is_taken_off_the_sleep_to_the_instant() -> None:
    clock = ManualClock()
    store, _, engine = settled_leader(clock, SlowReadStore(clock))
    due = next_due(store)
    clock.advance(step(engine, clock))
    assert due - clock.current == timedelta(seconds=READ_AHEAD)
    reads = store.due_reads
    sleep = step(engine, clock)  # reads ahead, 20 ms
    assert store.due_reads == reads + 1
    assert clock.current + timedelta(seconds=sleep) == due
