"""A leader on a store that wakes it on every change it must act on (PostgreSQL's NOTIFY) does
not read everything on a wake that brings no news: it renews its lease, asks the store what
waits (ScheduleStore.waiting) and looks further only when something does. It reads everything
when notified, when a run is due and after its own submissions failed; the wake's answer covers
the rest, written by hand without notifying. On the memory store and a manual clock; the loop
is driven as Celery's beat drives it (wait, then tick)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.loop.alerts import FULL_CYCLE_EVERY
from goatbeat_celery.core.loop.engine import BACKFILL_PAUSE, Engine
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome, RunState
from goatbeat_celery.core.rules.shards import Shard, member_lease_name
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from goatbeat_celery.testing import ManualClock, MemoryStore, RecordingSubmitter, build_engine

SETTINGS = Settings(lease_ttl=30, lease_renew_interval=10, heartbeat_interval=10,
                    run_lost_after=60, run_start_timeout=120, max_interval=5)
EVERY_HOUR = TriggerSpec(kind="interval", params={"every": 3600})


class HeardStore(MemoryStore):
    """The memory store, waking the leader on every change as PostgreSQL does (a notification
    made while nobody waits is heard by the next wait, as LISTEN keeps it), and counting the
    leader's reads of due schedules and looks for lost runs."""

    wakes_on_every_change = True

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.due_reads = 0
        self.lost_looks = 0
        self.waitings = 0
        self.alert_reads = 0
        self.end_reads = 0
        self.pending_reads = 0
        self.lease_lists = 0
        self.backfill_reads = 0
        self.prunes = 0
        self._unheard = False

    def notify(self) -> None:
        self._unheard = True
        super().notify()

    def wait(self, timeout: float) -> bool:
        if self._unheard:
            self._unheard = False
            return True
        return super().wait(timeout)

    def due_schedules(self, limit: int, *, shard: Shard | None = None,
                      until: datetime | None = None) -> Any:
        self.due_reads += 1
        return super().due_schedules(limit, shard=shard, until=until)

    def finished_runs(self, limit: int) -> Any:
        self.end_reads += 1
        return super().finished_runs(limit)

    def take_pending(self, *, lease: Any, limit: int, shard: Shard | None = None) -> Any:
        self.pending_reads += 1
        return super().take_pending(lease=lease, limit=limit, shard=shard)

    def waiting(self) -> Any:
        self.waitings += 1
        return super().waiting()

    def active_backfills(self, limit: int, *, shard: Shard | None = None) -> Any:
        self.backfill_reads += 1
        return super().active_backfills(limit, shard=shard)

    def prune(self, *, before: datetime, limit: int) -> int:
        self.prunes += 1
        return super().prune(before=before, limit=limit)

    def list_leases(self, prefix: str) -> Any:
        self.lease_lists += 1
        return super().list_leases(prefix)

    def alert_evidence(self, **kwargs: Any) -> Any:
        self.alert_reads += 1
        return super().alert_evidence(**kwargs)

    def mark_lost(self, *, silent_for: timedelta, unstarted_for: timedelta,
                  tracked_since: datetime | None = None,
                  limit: int = 1000) -> list[Execution]:
        self.lost_looks += 1
        return super().mark_lost(silent_for=silent_for, unstarted_for=unstarted_for,
                                 tracked_since=tracked_since, limit=limit)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(clock: ManualClock) -> HeardStore:
    return HeardStore(clock)


@pytest.fixture
def broker() -> RecordingSubmitter:
    return RecordingSubmitter()


def leader(store: HeardStore, clock: ManualClock, broker: RecordingSubmitter,
           schedules: Sequence[ScheduleSpec] = (), settings: Settings = SETTINGS) -> Engine:
    return build_engine(store, clock=clock, submitter=broker, settings=settings,
                        holder="leader", runs=store, alerts=store,
                        config_schedules=schedules or [ScheduleSpec(name="hourly",
                                                                    task="t.hourly",
                                                                    trigger=EVERY_HOUR)])


def run_for(engine: Engine, clock: ManualClock, seconds: float) -> None:
    """The beat loop for ``seconds`` of the manual clock: wait (hearing what was notified
    meanwhile), tick, and let the clock move by the sleep the tick asked for."""
    end = clock.monotonic() + seconds
    while clock.monotonic() < end:
        engine.wait(0.001)
        sleep = engine.tick()
        clock.advance(max(0.001, min(sleep, end - clock.monotonic())))


def test_an_idle_leader_only_renews(
        store: HeardStore, clock: ManualClock, broker: RecordingSubmitter) -> None:
    """For longer than any periodic look's interval: no read of due rows or backfills, and
    every wake renews the lease (pruning, lost runs and alerts come with the renewals)."""
    engine = leader(store, clock, broker)
    engine.tick()
    engine.wait(0.001)  # the config sync notified: heard
    engine.tick()
    looked, due_reads = store.backfill_reads, store.due_reads
    assert looked >= 1 and due_reads >= 1
    prunes = store.prunes
    # One wake comes 3.7 s late (a busy machine): the renewals move, the timers set before
    # do not.
    clock.advance(engine.tick() + 3.7)
    renewals: set[datetime] = set()
    wakes = 0
    end = clock.monotonic() + 1200
    while clock.monotonic() < end:
        engine.wait(0.001)
        sleep = engine.tick()
        wakes += 1
        lease = store.inspect(SETTINGS.lease_name)
        assert lease is not None and lease.holder == "leader" and lease.expires_at is not None
        renewals.add(lease.expires_at)
        clock.advance(max(0.001, sleep))

    assert (store.backfill_reads, store.due_reads) == (looked, due_reads)
    assert len(renewals) == wakes  # each wake renewed: none of its own for a periodic look
    assert store.prunes > prunes  # pruning still came, with a renewal


def test_rows_written_without_a_notification_are_found_at_the_next_renewal(
        store: HeardStore, clock: ManualClock, broker: RecordingSubmitter) -> None:
    """A backfill inserted by hand without notifying is begun at the next wake: what waits
    says so. Until then no wake read the backfills."""
    engine = leader(store, clock, broker)
    run_for(engine, clock, 15)
    looked = store.backfill_reads
    run_for(engine, clock, 45)
    assert store.backfill_reads == looked
    api = Schedules(store)
    backfill = api.backfill("hourly", clock.current - timedelta(hours=3),
                            clock.current - timedelta(minutes=1), mode="all")
    assert backfill.total >= 2
    store.wait(0)  # someone else heard it: this leader never will
    written_at = clock.current

    while not broker.of("hourly"):
        run_for(engine, clock, 1)
        assert clock.current - written_at <= SETTINGS.lease_renew_interval + timedelta(seconds=1)

    assert store.backfill_reads > looked
    assert len(broker.of("hourly")) == backfill.total


def test_a_run_claimed_unannounced_and_never_started_ends_within_the_bound(
        store: HeardStore, clock: ManualClock, broker: RecordingSubmitter) -> None:
    """No run was open when the wake asked what waits; the look claims one that fell due
    without a notification. Nobody starts it: it still ends within the documented bound."""
    engine = leader(store, clock, broker)
    run_for(engine, clock, 15)
    assert store.executions() == []
    run_for(engine, clock, 3600)
    [sent] = broker.of("hourly")
    sent_at = sent.execution.claimed_at

    while store.executions_by_key([sent.key])[sent.key].run_state is not RunState.UNKNOWN:
        run_for(engine, clock, 1)
        assert clock.current - sent_at <= (SETTINGS.run_start_timeout
                                           + SETTINGS.heartbeat_interval
                                           + SETTINGS.max_interval)


def test_an_idle_leaders_alert_looks_read_nothing_until_something_waits(
        store: HeardStore, clock: ManualClock, broker: RecordingSubmitter) -> None:
    """The store said nothing waits (no run in flight or open, no alert open) and nothing was
    claimed since the last cycle began: the alert looks of the quiet wakes read nothing. A
    run sent makes the next cycle read it."""
    engine = leader(store, clock, broker)
    run_for(engine, clock, 60)
    alert_reads = store.alert_reads

    run_for(engine, clock, FULL_CYCLE_EVERY - 70)

    assert store.alert_reads == alert_reads
    key = store.request_run("hourly").key  # notified: a full look sends it
    run_for(engine, clock, 15)
    assert broker.keys == [key] and store.alert_reads > alert_reads


def test_the_quiet_wakes_after_a_full_look_read_no_alerts(
        store: HeardStore, clock: ManualClock, broker: RecordingSubmitter) -> None:
    """A full look's alert cycle begins after its claims, so it saw them all: the quiet wakes
    that follow read nothing, up to the next full alert cycle."""
    engine = leader(store, clock, broker)
    run_for(engine, clock, 60)
    due_reads = store.due_reads
    store.notify()  # a change heard: a full look, and its alert cycle reads every schedule
    run_for(engine, clock, 15)
    assert store.due_reads == due_reads + 1
    alert_reads = store.alert_reads

    run_for(engine, clock, FULL_CYCLE_EVERY - 30)

    assert store.due_reads == due_reads + 1
    assert store.alert_reads == alert_reads


def test_the_leader_lists_the_member_rows_only_when_its_renewal_says_one_is_to_go(
        store: HeardStore, clock: ManualClock, broker: RecordingSubmitter) -> None:
    """Alone, an idle leader never lists them; a standby's row that runs out is listed and
    forgotten at the first renewal after it did."""
    engine = leader(store, clock, broker)
    run_for(engine, clock, 60)
    lists = store.lease_lists

    run_for(engine, clock, 300)
    assert store.lease_lists == lists
    standby = member_lease_name(SETTINGS.lease_name, 1, "standby")
    assert store.acquire(standby, "standby", SETTINGS.lease_ttl) is not None
    run_for(engine, clock, (SETTINGS.lease_ttl + SETTINGS.lease_renew_interval).total_seconds())

    assert store.inspect(standby) is None
    assert store.lease_lists == lists + 1


def test_a_replaced_leaders_member_row_is_kept_and_listed_once_not_at_each_renewal(
        store: HeardStore, clock: ManualClock, broker: RecordingSubmitter) -> None:
    """The row health reads to tell a replaced leader stays, run out, while the lease it held
    is held by another: the renewals, told it is kept, list the rows again only for another
    row that runs out."""
    ttl = SETTINGS.lease_ttl
    old_member = member_lease_name(SETTINGS.lease_name, 1, "old")
    assert store.acquire(old_member, "old", ttl) is not None
    assert store.acquire(SETTINGS.lease_name, "old", ttl) is not None
    clock.advance(ttl.total_seconds())  # the old leader died: both rows run out
    engine = leader(store, clock, broker)
    run_for(engine, clock, 60)
    lists = store.lease_lists

    run_for(engine, clock, 300)

    assert store.lease_lists == lists
    info = store.inspect(SETTINGS.lease_name)
    assert info is not None and (info.holder, info.previous_holder) == ("leader", "old")
    assert store.inspect(old_member) is not None
    standby = member_lease_name(SETTINGS.lease_name, 1, "standby")
    assert store.acquire(standby, "standby", ttl) is not None
    run_for(engine, clock, (ttl + SETTINGS.lease_renew_interval).total_seconds())
    assert store.inspect(standby) is None and store.inspect(old_member) is not None
    assert store.lease_lists == lists + 1


def test_a_notified_change_is_looked_at_on_the_next_wake(
        store: HeardStore, clock: ManualClock, broker: RecordingSubmitter) -> None:
    engine = leader(store, clock, broker)
    run_for(engine, clock, 15)

    key = store.request_run("hourly").key  # notifies
    run_for(engine, clock, 0.01)

    assert broker.keys == [key]


def test_a_due_run_is_sent_on_time_though_nothing_notified(
        store: HeardStore, clock: ManualClock, broker: RecordingSubmitter) -> None:
    every_25 = ScheduleSpec(name="often", task="t.often",
                            trigger=TriggerSpec(kind="interval", params={"every": 25}))
    engine = leader(store, clock, broker, [every_25])
    run_for(engine, clock, 100)

    sent = broker.of("often")
    assert [d.execution.due_at.second for d in sent] == [25, 50, 15]
    for dispatch in sent:
        assert dispatch.execution.claimed_at - dispatch.execution.due_at <= timedelta(
            seconds=0.5)


def test_a_failed_submission_is_sent_again_without_waiting_for_the_quiet_look(
        store: HeardStore, clock: ManualClock, broker: RecordingSubmitter) -> None:
    engine = leader(store, clock, broker)
    run_for(engine, clock, 15)
    broker.failing = True
    key = store.request_run("hourly").key
    run_for(engine, clock, 0.01)
    assert broker.sent == []

    broker.failing = False
    run_for(engine, clock, 20)

    assert [k for k, _ in broker.sent] == [key]


def test_lost_looks_pause_while_no_run_is_open_and_resume_with_a_sent_one(
        store: HeardStore, clock: ManualClock, broker: RecordingSubmitter) -> None:
    engine = leader(store, clock, broker)
    run_for(engine, clock, 15)
    looks = store.lost_looks
    run_for(engine, clock, 40)
    assert store.lost_looks == looks  # nothing sent, nothing to lose

    store.request_run("hourly")
    run_for(engine, clock, 0.01)
    sent_at = clock.current
    run_for(engine, clock, 30)
    assert store.lost_looks >= looks + 2  # once per heartbeat interval again

    # The run nobody started ends within the documented bound (of unknown outcome: these
    # settings do not say that the workers track runs).
    while store.executions()[0].run_state is not RunState.UNKNOWN:
        run_for(engine, clock, 1)
        assert clock.current - sent_at <= (SETTINGS.run_start_timeout
                                           + SETTINGS.heartbeat_interval
                                           + SETTINGS.max_interval)


def test_the_end_of_a_run_nothing_waits_on_is_settled_at_the_next_renewal(
        store: HeardStore, clock: ManualClock, broker: RecordingSubmitter) -> None:
    engine = leader(store, clock, broker)
    run_for(engine, clock, 15)
    key = store.request_run("hourly").key
    run_for(engine, clock, 0.01)
    store.record_runs([
        RunEvent.started(key, run="r1", worker="celery@a", age=timedelta(0)),
        RunEvent.finished(key, run="r1", worker="celery@a", age=timedelta(0),
                          outcome=RunOutcome.SUCCEEDED, runtime=timedelta(seconds=1))])
    ended_at = clock.current
    assert store.executions()[0].settled is False

    while not store.executions()[0].settled:
        run_for(engine, clock, 1)
        assert clock.current - ended_at <= SETTINGS.lease_renew_interval + timedelta(seconds=1)


def test_a_claim_whose_notification_was_lost_is_sent_at_the_next_renewal(
        store: HeardStore, clock: ManualClock, broker: RecordingSubmitter) -> None:
    engine = leader(store, clock, broker)
    run_for(engine, clock, 15)
    key = store.request_run("hourly").key
    store.wait(0)  # someone else heard it: this leader never will
    asked_at = clock.current

    while broker.keys != [key]:
        run_for(engine, clock, 1)
        assert clock.current - asked_at <= SETTINGS.lease_renew_interval + timedelta(seconds=1)


def test_a_backfill_goes_on_through_the_renewals_that_land_in_its_pauses(
        store: HeardStore, clock: ManualClock, broker: RecordingSubmitter) -> None:
    engine = leader(store, clock, broker)
    run_for(engine, clock, 15)
    api = Schedules(store)
    # One occurrence a step, a step every BACKFILL_PAUSE: about 30 s, three renewals, each
    # landing between two steps.
    backfill = api.backfill("hourly", clock.current - timedelta(hours=300),
                            clock.current - timedelta(minutes=1), mode="all", per_tick=1)
    assert backfill.total >= 290
    started_at = clock.current

    while api.get_backfill(backfill.id).active:
        run_for(engine, clock, 1)
        # A step a pause; a renewal adds a wake between two steps, not a wait.
        assert clock.current - started_at <= timedelta(
            seconds=backfill.total * BACKFILL_PAUSE * 1.2)

    assert len(broker.of("hourly")) == backfill.total
