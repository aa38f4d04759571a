"""Exclusion calendars on every store: calendars round-trip with their dates, ranges, description
and version; names are unique; an edit is a compare-and-set; a calendar observed by a schedule
cannot be deleted; a batch read finds the calendars that exist; the schedule's calendars column
round-trips; a claim records the excluded occurrences skipped with their reason and counts them
as skipped, not run; a calendar or a calendars column edited by hand into something unreadable
is named, never guessed."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, timedelta

import pytest
import sqlalchemy as sa

from goatbeat_celery.core.rules.calendars import Calendar
from goatbeat_celery.core.types.claims import PlannedClaim
from goatbeat_celery.core.types.errors import CalendarInUse, CalendarNotFound, ScheduleConflict
from goatbeat_celery.core.types.execution import ExecutionState
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.store.sql import SQLStore

from .conftest import BACKENDS, Store
from .support import LONG_TTL, create_due, interval_spec

M = timedelta(minutes=1)
XMAS = Calendar(name="holidays", dates=(date(2026, 12, 25), date(2027, 1, 1)),
                ranges=((date(2026, 12, 24), date(2027, 1, 2)),), description="Office closed")


def lease(store: Store) -> LeaseGrant:
    grant = store.acquire("beat", "replica", LONG_TTL)
    assert grant is not None
    return grant


def test_a_calendar_round_trips(store: Store) -> None:
    created = store.create_calendar(XMAS)
    read = store.get_calendar("holidays")
    for calendar in (created, read):
        assert (calendar.name, calendar.dates, calendar.ranges, calendar.description) == (
            XMAS.name, XMAS.dates, XMAS.ranges, XMAS.description)
        assert calendar.version == 1 and calendar.damage == ()
        assert calendar.created_at is not None and calendar.created_at.utcoffset() is not None
    assert read.entries() == ["2026-12-25", "2027-01-01",
                              {"from": "2026-12-24", "to": "2027-01-02"}]


def test_a_calendar_name_is_taken_once(store: Store) -> None:
    store.create_calendar(XMAS)
    with pytest.raises(ScheduleConflict, match="already exists"):
        store.create_calendar(Calendar(name="holidays"))
    assert store.get_calendar("holidays").dates == XMAS.dates


def test_a_replace_bumps_the_version_and_a_stale_one_changes_nothing(store: Store) -> None:
    store.create_calendar(XMAS)
    replaced = store.replace_calendar(Calendar(name="holidays", dates=(date(2027, 5, 1),)),
                                      expected_version=1)
    assert (replaced.version, replaced.dates, replaced.ranges, replaced.description) == (
        2, (date(2027, 5, 1),), (), None)
    with pytest.raises(ScheduleConflict, match="version 2"):
        store.replace_calendar(XMAS, expected_version=1)
    assert store.get_calendar("holidays") == replaced
    with pytest.raises(CalendarNotFound):
        store.replace_calendar(Calendar(name="nope"))


def test_calendars_are_listed_by_name_and_found_in_one_read(store: Store) -> None:
    for name in ("b", "a", "c"):
        store.create_calendar(Calendar(name=name))
    assert [c.name for c in store.list_calendars()] == ["a", "b", "c"]
    assert sorted(store.find_calendars(["a", "c", "missing"])) == ["a", "c"]
    assert store.find_calendars([]) == {}


def test_a_calendar_observed_by_a_schedule_cannot_be_deleted(store: Store) -> None:
    store.create_calendar(XMAS)
    store.create_calendar(Calendar(name="other"))
    store.create_schedule(interval_spec("job", calendars=("other", "holidays")),
                          next_occurrence_at=None, next_run_at=None)
    store.create_schedule(interval_spec("apart"), next_occurrence_at=None, next_run_at=None)
    assert store.schedules_observing("holidays") == ["job"]
    assert store.schedules_observing("nowhere") == []
    with pytest.raises(CalendarInUse) as caught:
        store.delete_calendar("holidays")
    assert caught.value.schedules == ("job",)
    assert store.get_calendar("holidays").version == 1
    store.delete_schedule("job")
    store.delete_calendar("holidays")
    with pytest.raises(CalendarNotFound):
        store.get_calendar("holidays")
    with pytest.raises(CalendarNotFound):
        store.delete_calendar("holidays")


def test_the_calendars_a_schedule_observes_round_trip(store: Store) -> None:
    spec = interval_spec("job", calendars=("holidays", "freeze"))
    store.create_schedule(spec, next_occurrence_at=None, next_run_at=None)
    assert store.get_schedule("job").spec == spec
    store.replace_schedule(interval_spec("job"), next_occurrence_at=None, next_run_at=None)
    assert store.get_schedule("job").spec.calendars == ()


def test_a_claim_records_excluded_occurrences_skipped_with_their_reason(store: Store) -> None:
    grant = lease(store)
    schedule = create_due(store, "job", steps_back=2)
    first = schedule.next_occurrence_at
    assert first is not None
    points = tuple((first + i * M, first + i * M) for i in range(3))
    claim = PlannedClaim(schedule_name="job", version=schedule.row_version, occurrences=points,
                         missed=0, next_occurrence_at=first + 3 * M,
                         next_run_at=first + 3 * M,
                         excluded=((first, "excluded by calendar holidays"),
                                   (first + 2 * M, "excluded by calendar freeze")))
    result = store.claim([claim], lease=grant)
    assert [d.execution.occurrence_at for d in result.dispatches] == [first + M]
    assert [(e.occurrence_at, e.state, e.last_error, e.attempts) for e in result.skipped] == [
        (first, ExecutionState.SKIPPED, "excluded by calendar holidays", 0),
        (first + 2 * M, ExecutionState.SKIPPED, "excluded by calendar freeze", 0)]
    after = store.get_schedule("job")
    assert (after.total_runs, after.total_skipped, after.next_run_at) == (1, 2, first + 3 * M)
    history = {e.occurrence_at: e.state for e in store.executions(schedule_name="job")}
    assert history[first] is ExecutionState.SKIPPED


def test_occurrences_claimed_again_count_neither_a_run_nor_a_skip_twice(store: Store) -> None:
    grant = lease(store)
    schedule = create_due(store, "job", steps_back=2)
    first = schedule.next_occurrence_at
    assert first is not None
    points = tuple((first + i * M, first + i * M) for i in range(2))

    def claim_from(version: int) -> PlannedClaim:
        return PlannedClaim(schedule_name="job", version=version, occurrences=points,
                            missed=0, next_occurrence_at=first + 2 * M,
                            next_run_at=first + 2 * M,
                            excluded=((first, "excluded by calendar holidays"),))

    store.claim([claim_from(schedule.row_version)], lease=grant)
    # An edit puts the schedule back on the occurrences already claimed and skipped.
    rewound = store.replace_schedule(schedule.spec, next_occurrence_at=first,
                                     next_run_at=first)
    result = store.claim([claim_from(rewound.row_version)], lease=grant)

    assert (result.dispatches, result.skipped, result.duplicates) == ((), (), 2)
    after = store.get_schedule("job")
    assert (after.total_runs, after.total_skipped) == (1, 1)


@pytest.fixture(params=["sqlite", "postgres"])
def sql_store(request: pytest.FixtureRequest) -> Iterator[Store]:
    """The stores that keep JSON a hand edit can damage (the memory store keeps objects)."""
    opened = BACKENDS[request.param](request)
    yield opened.store
    opened.close()


def _write_raw(store: Store, statement: str) -> None:
    """A write behind the store's back, as an operator's SQL console makes it."""
    assert isinstance(store, SQLStore)
    with store._engine.begin() as connection:
        connection.execute(sa.text(statement))


@pytest.mark.parametrize("entries", ['{"a": 1}', '["2026-13-01"]', '[{"from": "2026-01-02"}]'],
                         ids=["object", "bad-date", "half-range"])
def test_a_calendar_edited_by_hand_into_bad_entries_reads_with_its_damage_named(
        sql_store: Store, entries: str) -> None:
    store = sql_store
    store.create_calendar(XMAS)
    _write_raw(store,
               f"UPDATE goatbeat_calendar SET entries = '{entries}' WHERE name = 'holidays'")
    read = store.get_calendar("holidays")
    assert read.damage and all(d.field == "entries" for d in read.damage)
    assert [c.name for c in store.list_calendars()] == ["holidays"]
    assert store.find_calendars(["holidays"])["holidays"].damage == read.damage


def test_a_calendars_column_edited_by_hand_is_named_in_the_damage(sql_store: Store) -> None:
    store = sql_store
    store.create_schedule(interval_spec("job", calendars=("holidays",)),
                          next_occurrence_at=None, next_run_at=None)
    _write_raw(store,
               "UPDATE goatbeat_schedule SET calendars = '\"holidays\"' WHERE name = 'job'")
    read = store.get_schedule("job")
    assert [d for d in read.damage if d.field == "calendars"]
