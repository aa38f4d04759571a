"""The reads Schedules offers the faces (the database's clock, the next due instant,
executions, calendars, leases) answer alike on every backend; their rules are in
tests/unit/test_schedules_reads.py."""

from __future__ import annotations

from goatbeat_celery.api import Schedules
from goatbeat_celery.config import GoatbeatConfig
from goatbeat_celery.core.rules.shards import member_lease_name
from goatbeat_celery.core.types.settings import Settings

from .conftest import Store, StoreClock
from .support import LONG_TTL, create_due


def test_now_is_the_stores_clock(store: Store) -> None:
    before = store.now()
    now = Schedules(store).now()
    assert before <= now <= store.now()
    assert now.utcoffset() is not None


def test_next_due_at_and_the_oldest_pending_run(store: Store, clock: StoreClock) -> None:
    schedules = Schedules(store)
    assert schedules.next_due_at() is None and schedules.oldest_pending() is None
    due = create_due(store, "due", steps_back=1)
    create_due(store, "paused", steps_back=3, enabled=False)

    first = schedules.run_now("due")
    clock.advance(0.5)
    second = schedules.run_now("due")

    assert schedules.next_due_at() == due.next_run_at
    pending = schedules.oldest_pending()
    assert pending is not None and pending.key == first.key
    assert [e.key for e in schedules.executions(states=["claimed"])] == [second.key, first.key]
    assert schedules.executions(states=["submitted"]) == []
    assert schedules.executions_by_key([second.key, "never", "nul\x00"]) == {
        second.key: second}


def test_find_calendars(store: Store) -> None:
    schedules = Schedules(store)
    holidays = schedules.create_calendar("holidays", dates=["2026-12-25"])

    assert schedules.find_calendars(["holidays", "missing", "nul\x00"]) == {
        "holidays": holidays}


def test_lease_and_leases_of_a_sharded_app(store: Store) -> None:
    schedules = Schedules(store, config=GoatbeatConfig(
        settings=Settings(lease_name="beat", shards=2)))
    assert schedules.lease() is None and schedules.leases() == []
    member = member_lease_name("beat", 2, "a")
    for name in ("beat.shard-0-of-2", member, "beat", "other.shard-0-of-2"):
        assert store.acquire(name, "a", LONG_TTL) is not None

    leader = schedules.lease()

    assert leader is not None and leader.name == "beat.shard-0-of-2" and leader.held
    assert [row.name for row in schedules.leases()] == sorted(["beat.shard-0-of-2", member])
