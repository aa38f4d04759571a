"""A standby's takeover timing: it asks for the lease when the holder's lease runs out; and a
leader whose config sync failed keeps its lease, told to observers once, and syncs again."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from goatbeat_celery.core.loop.engine import Engine
from goatbeat_celery.core.loop.leadership import EXPIRY_MARGIN
from goatbeat_celery.core.loop.observer import NullObserver, OccurrenceRecord
from goatbeat_celery.core.types.errors import StoreUnavailable
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSpec, SyncEntry, SyncReport, TriggerSpec
from goatbeat_celery.testing import ManualClock, MemoryStore, RecordingSubmitter, build_engine

from .doubles import LeaseRecordingObserver

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
SETTINGS = Settings(lease_ttl=10, lease_renew_interval=3, max_interval=60)


def replica(store: MemoryStore, clocks: ManualClock, holder: str) -> Engine:
    return build_engine(store, settings=SETTINGS, holder=holder,
                        monotonic=clocks.monotonic_for(holder))


def test_a_standby_asks_again_when_a_frozen_leaders_lease_expires() -> None:
    clocks = ManualClock(T0)
    store = MemoryStore(clocks)
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
    clocks = ManualClock(T0)
    store = MemoryStore(clocks)
    leader, standby = replica(store, clocks, "a"), replica(store, clocks, "b")
    leader.tick()

    assert standby.tick() == 3.0  # the lease has 10 s left: the renew interval comes first


class SlowObserver(NullObserver):
    """Takes ``seconds`` (of every clock) to take in each submitted batch."""

    def __init__(self, clocks: ManualClock, seconds: float) -> None:
        self.clocks, self.seconds = clocks, seconds

    def submitted(self, records: Sequence[OccurrenceRecord]) -> None:
        self.clocks.advance(self.seconds)


def test_time_spent_after_reading_the_clock_is_taken_off_the_sleep() -> None:
    clocks = ManualClock(T0)
    store = MemoryStore(clocks)
    every_second = TriggerSpec(kind="interval", params={"every": 1})
    store.create_schedule(ScheduleSpec(name="tick", task="app.tick", trigger=every_second),
                          next_occurrence_at=T0, next_run_at=T0)
    engine = build_engine(store, settings=SETTINGS, holder="a",
                          monotonic=clocks.monotonic_for("a"),
                          observer=SlowObserver(clocks, 0.25))

    # Submits T0's occurrence; the next is due at T0 + 1 s, and reporting the batch took 0.25 s
    # after the loop last read the store's clock.
    sleep = engine.tick()

    assert abs(sleep - 0.75) < 1e-6


# -- a config sync that fails ------------------------------------------------------------------

class SyncFailing:
    """The memory store, whose config sync fails ``failures`` times before it works again."""

    def __init__(self, store: MemoryStore, failures: int) -> None:
        self._store = store
        self.failures = failures

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def sync_config(self, entries: Sequence[SyncEntry], *, lease: LeaseGrant,
                    prune_after: timedelta | None = None) -> SyncReport:
        if self.failures:
            self.failures -= 1
            raise StoreUnavailable("connection reset during the config sync")
        return self._store.sync_config(entries, lease=lease, prune_after=prune_after)


CLEANUP = ScheduleSpec(name="cleanup", task="app.cleanup",
                       trigger=TriggerSpec(kind="interval", params={"every": 1}))


class Syncing:
    """A memory store on hand-moved clocks, shared by replicas whose config sync fails at first;
    ``observer`` and ``submitter`` are replica a's."""

    def __init__(self) -> None:
        self.clocks = ManualClock(T0)
        self.memory = MemoryStore(self.clocks)
        self.observer = LeaseRecordingObserver()
        self.submitter = RecordingSubmitter()

    def replica(self, holder: str = "a", *, failures: int) -> Engine:
        return build_engine(SyncFailing(self.memory, failures), lease=self.memory,
                            submitter=self.submitter if holder == "a" else None,
                            settings=SETTINGS, holder=holder,
                            monotonic=self.clocks.monotonic_for(holder),
                            config_schedules=[CLEANUP],
                            observer=self.observer if holder == "a" else None)

    def holder(self) -> str | None:
        lease = self.memory.inspect("default")
        assert lease is not None
        return lease.holder


def test_a_failed_config_sync_keeps_the_lease_and_syncs_again_after_the_next_renewal() -> None:
    world = Syncing()
    world.memory.create_schedule(
        ScheduleSpec(name="tick", task="app.tick", trigger=CLEANUP.trigger),
        next_occurrence_at=T0, next_run_at=T0)
    engine = world.replica(failures=1)

    sleep = engine.tick()

    # Holding the lease with the config not synced: nothing is sent, and no standby takes over.
    assert engine.grant is not None and not engine.is_leader()
    assert sleep == 3.0  # the renew interval
    assert world.submitter.keys == []
    assert world.holder() == "a"

    world.clocks.advance(sleep)
    engine.tick()

    assert engine.is_leader()
    assert engine.last_sync is not None and engine.last_sync.created == ("cleanup",)
    assert world.submitter.keys
    # One acquisition, told once: the sync that failed was no loss and its retry no new lease.
    assert world.observer.lease_events == [("acquired", 1)]


def test_a_replica_whose_config_sync_is_pending_releases_the_lease_on_close() -> None:
    world = Syncing()
    engine = world.replica(failures=1)
    engine.tick()

    engine.close()

    assert world.holder() is None  # a standby takes over at once
    assert world.observer.lease_events == [("acquired", 1), ("lost", "released")]


def test_a_replica_whose_config_sync_is_pending_is_told_when_the_lease_is_taken() -> None:
    world = Syncing()
    pending = world.replica(failures=10)
    pending.tick()
    world.clocks.advance(10.5, frozen=["a"])  # it hangs past its lease's expiry
    standby = world.replica("b", failures=0)
    standby.tick()
    assert standby.is_leader()

    world.clocks.advance(3)  # its renewal slot: refused
    pending.tick()

    assert pending.grant is None
    assert world.observer.lease_events == [("acquired", 1), ("lost", "taken by another replica")]


def test_a_crashed_leader_is_replaced_as_soon_as_the_store_sees_its_session_end() -> None:
    clocks = ManualClock(T0)
    store = MemoryStore(clocks)
    leader, standby = replica(store, clocks, "a"), replica(store, clocks, "b")
    leader.tick()
    assert standby.tick() == 3.0  # refused; its lease has 10 s left
    held = store.inspect(SETTINGS.lease_name)
    assert held is not None

    # Its process dies while the standby waits: the store knows, its lease has not expired.
    crash = threading.Timer(0.05, store.end_session, ("a",))
    crash.start()
    assert standby.wait(10)  # the end wakes the standby ...
    crash.join()
    standby.tick()  # ... and it asks at once

    assert standby.is_leader()
    taken = store.inspect(SETTINGS.lease_name)
    assert taken is not None and (taken.holder, taken.token) == ("b", held.token + 1)
    assert taken.expires_at is not None and held.expires_at is not None
    assert clocks.current < held.expires_at


def test_a_frozen_leaders_session_lives_and_the_standby_waits_for_the_clock() -> None:
    clocks = ManualClock(T0)
    store = MemoryStore(clocks)
    leader, standby = replica(store, clocks, "a"), replica(store, clocks, "b")
    leader.tick()
    clocks.advance(3, frozen=["a"])

    standby.tick()  # a frozen process's session is still open: nothing says it is gone

    assert not standby.is_leader()
