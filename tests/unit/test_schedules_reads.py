"""The reads Schedules offers the faces so that none reaches into its store: the database's
clock, the next due instant, executions, calendars and leases, on the memory store and a
manual clock. The same reads on every backend are in tests/conformance/test_schedules_reads.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.config import GoatbeatConfig
from goatbeat_celery.core.rules.shards import member_lease_name
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.execution import ExecutionState
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.testing import ManualClock, MemoryStore

NOW = datetime(2026, 1, 5, 12, 0, 30, tzinfo=UTC)
TTL = timedelta(seconds=30)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


def sharded(store: MemoryStore, shards: int = 3) -> Schedules:
    return Schedules(store, config=GoatbeatConfig(
        settings=Settings(lease_name="beat", shards=shards)))


def test_now_is_the_stores_clock(schedules: Schedules, clock: ManualClock) -> None:
    assert schedules.now() == NOW
    clock.advance(90)
    assert schedules.now() == NOW + timedelta(seconds=90)


def test_next_due_at_is_the_earliest_next_run_of_an_enabled_schedule(
        schedules: Schedules) -> None:
    assert schedules.next_due_at() is None

    schedules.create("hourly", "feeds.poll", every=3600)
    schedules.create("minutely", "feeds.poll", every=60)
    schedules.create("paused", "feeds.poll", every=10, enabled=False)

    assert schedules.next_due_at() == NOW.replace(minute=1, second=0)


def test_executions_are_every_schedules_newest_first_in_the_states_asked(
        schedules: Schedules, clock: ManualClock) -> None:
    schedules.create("a", "feeds.poll", every=60)
    schedules.create("b", "feeds.poll", every=60)
    first = schedules.run_now("a")
    clock.advance(1)
    second = schedules.run_now("b")

    assert [e.key for e in schedules.executions()] == [second.key, first.key]
    assert [e.key for e in schedules.executions(limit=1)] == [second.key]
    assert [e.key for e in schedules.executions(states=[ExecutionState.CLAIMED])] == [
        second.key, first.key]
    assert [e.key for e in schedules.executions(states="claimed")] == [second.key, first.key]
    assert schedules.executions(states=["submitted"]) == []


def test_executions_refuse_an_unknown_state_and_a_bad_limit(schedules: Schedules) -> None:
    with pytest.raises(ConfigurationError) as refused:
        schedules.executions(states=["sent"], limit=0)

    assert {p.root for p in refused.value.details} == {"states", "limit"}
    assert "use: claimed, submitted" in str(refused.value)


def test_executions_by_key_are_those_that_exist(schedules: Schedules) -> None:
    schedules.create("a", "feeds.poll", every=60)
    run = schedules.run_now("a")

    assert schedules.executions_by_key([run.key, "never-claimed", "nul\x00key"]) == {
        run.key: run}
    assert schedules.executions_by_key([]) == {}
    with pytest.raises(ConfigurationError, match="keys: expected text, got 7"):
        schedules.executions_by_key([7])  # type: ignore[list-item]


def test_oldest_pending_is_the_earliest_due_claim_not_yet_sent(
        schedules: Schedules, clock: ManualClock) -> None:
    assert schedules.oldest_pending() is None
    schedules.create("a", "feeds.poll", every=60)
    first = schedules.run_now("a")
    clock.advance(5)
    schedules.run_now("a")

    pending = schedules.oldest_pending()

    assert pending is not None and pending.key == first.key
    assert (schedules.now() - pending.due_at) == timedelta(seconds=5)


def test_find_calendars_reads_those_that_exist(schedules: Schedules) -> None:
    holidays = schedules.create_calendar("holidays", dates=["2026-12-25"])

    assert schedules.find_calendars(["holidays", "missing", "nul\x00"]) == {
        "holidays": holidays}
    assert schedules.find_calendars([]) == {}
    with pytest.raises(ConfigurationError):
        schedules.find_calendars([3])  # type: ignore[list-item]


def test_the_lease_name_is_shard_zeros_or_the_shard_of_a_schedule(store: MemoryStore) -> None:
    single = Schedules(store, config=GoatbeatConfig(settings=Settings(lease_name="beat")))
    three = sharded(store)

    assert single.lease_name() == single.lease_name("report") == "beat"
    assert three.lease_name() == "beat.shard-0-of-3"
    assert {three.lease_name(f"job-{n}") for n in range(30)} == {
        f"beat.shard-{k}-of-3" for k in range(3)}
    with pytest.raises(ConfigurationError):
        three.lease_name(5)  # type: ignore[arg-type]


def test_lease_is_the_row_of_the_leader_as_it_stands(store: MemoryStore,
                                                     clock: ManualClock) -> None:
    three = sharded(store)
    assert three.lease() is None

    for k in range(3):
        assert store.acquire(f"beat.shard-{k}-of-3", f"replica-{k}", TTL) is not None
    leader, own = three.lease(), three.lease("report")

    assert leader is not None and leader.holder == "replica-0" and leader.held
    assert own is not None and own.name == three.lease_name("report")
    clock.advance(TTL.total_seconds())
    lapsed = three.lease()
    assert lapsed is not None and not lapsed.held


def test_leases_are_the_rows_of_this_apps_sharding(store: MemoryStore) -> None:
    three = sharded(store)
    for name, holder in (("beat.shard-1-of-3", "a"), (member_lease_name("beat", 3, "a"), "a"),
                         ("beat", "old"), ("other.shard-0-of-3", "b")):
        assert store.acquire(name, holder, TTL) is not None

    assert [row.name for row in three.leases()] == sorted(
        ["beat.shard-1-of-3", member_lease_name("beat", 3, "a")])
