"""A standby's takeover timing: it asks for the lease when the holder's lease runs out."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

from goatbeat_celery.core.engine import EXPIRY_MARGIN, Engine
from goatbeat_celery.core.model import Dispatch, ScheduleSpec, SubmitResult, TriggerSpec
from goatbeat_celery.core.observer import NullObserver, OccurrenceRecord
from goatbeat_celery.core.settings import Settings
from goatbeat_celery.store.memory import MemoryStore

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


class Clocks:
    """The store's clock and one monotonic clock per replica, moved together by hand."""

    def __init__(self) -> None:
        self.store = T0
        self.mono = {"a": 100.0, "b": 100.0}

    def advance(self, seconds: float, *, frozen: Sequence[str] = ()) -> None:
        self.store += timedelta(seconds=seconds)
        for holder in self.mono:
            if holder not in frozen:
                self.mono[holder] += seconds


class Accepting:
    def submit(self, dispatches: Sequence[Dispatch], *, token: int,
               timeout: float) -> SubmitResult:
        return SubmitResult(accepted=[d.key for d in dispatches])


def replica(store: MemoryStore, clocks: Clocks, holder: str) -> Engine:
    return Engine(store=store, lease=store, submitter=Accepting(),
                  settings=Settings(lease_ttl=10, lease_renew_interval=3, max_interval=60),
                  holder=holder, monotonic=lambda: clocks.mono[holder])


def test_a_standby_asks_again_when_a_frozen_leaders_lease_expires() -> None:
    clocks = Clocks()
    store = MemoryStore(clock=lambda: clocks.store)
    leader, standby = replica(store, clocks, "a"), replica(store, clocks, "b")
    leader.tick()  # lease until T0 + 10 s
    clocks.advance(8.5, frozen=["a"])

    sleep = standby.tick()  # refused with 1.5 s left: sooner than its next slot (3 s)

    assert not standby.is_leader()
    assert abs(sleep - (1.5 + EXPIRY_MARGIN)) < 1e-6
    clocks.advance(sleep, frozen=["a"])
    standby.tick()
    assert standby.is_leader()


def test_a_standby_keeps_its_slot_while_the_leader_renews() -> None:
    clocks = Clocks()
    store = MemoryStore(clock=lambda: clocks.store)
    leader, standby = replica(store, clocks, "a"), replica(store, clocks, "b")
    leader.tick()

    assert standby.tick() == 3.0  # the lease has 10 s left: the renew interval comes first


class SlowObserver(NullObserver):
    """Takes ``seconds`` (of every clock) to take in each submitted batch."""

    def __init__(self, clocks: Clocks, seconds: float) -> None:
        self.clocks, self.seconds = clocks, seconds

    def submitted(self, records: Sequence[OccurrenceRecord]) -> None:
        self.clocks.advance(self.seconds)


def test_time_spent_after_reading_the_clock_is_taken_off_the_sleep() -> None:
    clocks = Clocks()
    store = MemoryStore(clock=lambda: clocks.store)
    every_second = TriggerSpec(kind="interval", params={"every": 1})
    store.create_schedule(ScheduleSpec(name="tick", task="app.tick", trigger=every_second),
                          next_occurrence_at=T0, next_run_at=T0)
    engine = Engine(store=store, lease=store, submitter=Accepting(),
                    settings=Settings(lease_ttl=10, lease_renew_interval=3, max_interval=60),
                    holder="a", monotonic=lambda: clocks.mono["a"],
                    observer=SlowObserver(clocks, 0.25))

    # Submits T0's occurrence; the next is due at T0 + 1 s, and reporting the batch took 0.25 s
    # after the loop last read the store's clock.
    sleep = engine.tick()

    assert abs(sleep - 0.75) < 1e-6
