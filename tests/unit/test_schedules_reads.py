"""The reads Schedules offers the faces so that none reaches into its store: the database's
clock, the next due instant, executions, calendars and leases, on the memory store and a
manual clock. The same reads on every backend are in tests/conformance/test_schedules_reads.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from goatbeat_celery.api import Schedules, records
from goatbeat_celery.config import GoatbeatConfig
from goatbeat_celery.core.rules.shards import member_lease_name
from goatbeat_celery.core.types.errors import ConfigurationError, StoreTimeout
from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.run_query import RunCursor, RunQuery
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


class _IndexThatCannotNarrow(MemoryStore):
    """A store whose text search has an index that runs out of time on every text (as a
    fragment of an instant does at ten million runs on PostgreSQL); every other read is the
    memory store's."""

    budgets: list[float | None]

    def text_search_indexed(self) -> bool:
        return True

    def find_runs(self, query: RunQuery, *, before: RunCursor | None = None,
                  limit: int = 50, within: float | None = None) -> list[Execution]:
        self.budgets.append(within)
        if query.text and within is not None:
            raise StoreTimeout("cancelled at the statement timeout")
        return super().find_runs(query, before=before, limit=limit, within=within)


def _three_runs_each(schedules: Schedules, clock: ManualClock) -> dict[str, list[str]]:
    runs: dict[str, list[str]] = {"etl": [], "mail": []}
    for name in runs:
        schedules.create(name, "feeds.poll", every=60)
    for _ in range(3):
        for name, keys in runs.items():
            keys.insert(0, schedules.run_now(name).key)
            clock.advance(1)
    return runs


def test_a_text_search_without_an_index_reads_a_bounded_number_of_runs(
        schedules: Schedules, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records, "TEXT_SCAN", 2)
    runs = _three_runs_each(schedules, clock)
    # The two newest runs are one of each: etl's newest found, the read stopped at mail's.
    found, stopped_at = schedules.search_runs(RunQuery(text="ETL"))
    assert [e.key for e in found] == runs["etl"][:1]
    assert stopped_at is not None and stopped_at.key == runs["etl"][0]
    # Without a text, the search is find_runs: nothing stops it.
    assert schedules.search_runs(RunQuery(), limit=50) == (schedules.find_runs(RunQuery()), None)


@pytest.fixture
def slow_index(clock: ManualClock, monkeypatch: pytest.MonkeyPatch
               ) -> tuple[_IndexThatCannotNarrow, Schedules, dict[str, list[str]]]:
    """A store whose index runs out of time, a bounded read of four runs, three runs each of
    ``etl`` and ``mail`` (alternating, mail newest)."""
    monkeypatch.setattr(records, "TEXT_SCAN", 4)
    store = _IndexThatCannotNarrow(clock)
    store.budgets = []
    schedules = Schedules(store)
    return store, schedules, _three_runs_each(schedules, clock)


def test_a_text_the_index_cannot_narrow_in_time_gets_what_the_newest_runs_hold(
        slow_index: tuple[_IndexThatCannotNarrow, Schedules, dict[str, list[str]]]) -> None:
    store, schedules, runs = slow_index

    found, stopped_at = schedules.search_runs(RunQuery(text="mail"))

    # The four newest runs hold two of mail's, short of a page: the index was asked, with
    # its budget, and ran out of it.
    assert store.budgets == [records.TEXT_INDEX_BUDGET]
    assert [e.key for e in found] == runs["mail"][:2]
    assert stopped_at is not None and stopped_at.key == runs["etl"][1]
    # Read on from there: the last mail run, and nothing follows the two runs left.
    assert schedules.search_runs(RunQuery(text="mail"), before=stopped_at) == (
        schedules.find_runs(RunQuery(text="mail"))[2:], None)


def test_a_text_the_newest_runs_fill_a_page_with_never_asks_the_index(
        slow_index: tuple[_IndexThatCannotNarrow, Schedules, dict[str, list[str]]]) -> None:
    store, schedules, runs = slow_index

    found, stopped_at = schedules.search_runs(RunQuery(text="etl"), limit=2)

    assert ([e.key for e in found], stopped_at, store.budgets) == (runs["etl"][:2], None, [])


def test_a_run_search_refuses_a_bad_limit(schedules: Schedules) -> None:
    with pytest.raises(ConfigurationError, match="limit"):
        schedules.search_runs(RunQuery(text="x"), limit=0)
