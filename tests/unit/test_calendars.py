"""Exclusion calendars through the Schedules API and the engine loop, on the memory store with
a manual clock: excluded occurrences recorded skipped with their reason and never sent,
previews equal to what then runs, local dates in real zones across DST changes, a calendar
edit applied at the next planning, an unreadable calendar setting aside only its schedules,
and bad input refused at the door with every problem at once."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.config import base_registry
from goatbeat_celery.core.rules.calendars import Calendar, Exclusions, calendar_zone, parse_entries
from goatbeat_celery.core.rules.claims import plan_claims
from goatbeat_celery.core.rules.policies import OverlapPolicy
from goatbeat_celery.core.types.claims import PlannedClaim
from goatbeat_celery.core.types.errors import (
    CalendarInUse,
    CalendarNotFound,
    ConfigurationError,
    ScheduleConflict,
)
from goatbeat_celery.core.types.execution import ExecutionState
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.testing import (
    ManualClock,
    MemoryStore,
    RecordingObserver,
    RecordingSubmitter,
    build_engine,
)
from tests.unit.doubles import run_until

T0 = ManualClock.DEFAULT_START  # 2026-01-01 00:00 UTC, a Thursday
H = timedelta(hours=1)
D = timedelta(days=1)
PARIS = ZoneInfo("Europe/Paris")
NEW_YORK = ZoneInfo("America/New_York")


#: A leader that looks and renews hourly: these tests span days of a lease nobody contests, so
#: a tick every renew interval of the defaults (10 s) was most of what they cost.
LONG_LOOKS = {"max_interval": 3600, "lease_ttl": 3600, "lease_renew_interval": 1800}


class World:
    """One leader on a memory store, its clock moved by hand; the API on the same store."""

    def __init__(self, start: datetime | None = None, **settings: Any) -> None:
        self.clock = ManualClock(start)
        self.store = MemoryStore(self.clock)
        self.submitter = RecordingSubmitter()
        self.observer = RecordingObserver()
        self.engine = build_engine(self.store, clock=self.clock, submitter=self.submitter,
                                   settings=Settings(**{**LONG_LOOKS, **settings}), holder="a",
                                   triggers=base_registry(), observer=self.observer)
        self.api = Schedules(self.store)

    def run_until(self, end: datetime) -> None:
        run_until(self.engine, self.clock, end)

    def sent(self, name: str = "job") -> list[datetime]:
        return [d.execution.due_at for d in self.submitter.dispatches
                if d.execution.schedule_name == name and not d.execution.manual]

    def skipped(self, name: str = "job") -> list[tuple[datetime, str | None]]:
        return [(e.due_at, e.last_error)
                for e in reversed(self.store.executions(schedule_name=name, limit=1000))
                if e.state is ExecutionState.SKIPPED]


@pytest.fixture
def world() -> World:
    return World()


def days(first: datetime, count: int, step: timedelta = D) -> list[datetime]:
    return [first + n * step for n in range(count)]


# -- what runs -----------------------------------------------------------------------------
def test_an_excluded_date_is_recorded_skipped_with_its_reason_and_never_sent(
        world: World) -> None:
    world.api.create_calendar("holidays", dates=["2026-01-03"])
    world.api.create("job", "app.job", cron="0 9 * * *", calendars=["holidays"])
    world.run_until(T0 + 5 * D)
    nine = T0 + 9 * H
    assert world.sent() == [nine, nine + D, nine + 3 * D, nine + 4 * D]
    assert world.skipped() == [(nine + 2 * D, "excluded by calendar holidays")]
    job = world.api.get("job")
    assert (job.total_runs, job.total_skipped) == (4, 1)
    assert job.next_run_at == nine + 5 * D
    assert ("skipped", ((f"job:{(nine + 2 * D).isoformat()}",
                         "excluded by calendar holidays"),)) in world.observer.events


def test_a_range_excludes_every_date_in_it_both_ends_included(world: World) -> None:
    world.api.create_calendar("freeze", ranges=["2026-01-02..2026-01-04"])
    world.api.create("job", "app.job", cron="0 12 * * *", calendars=["freeze"])
    world.run_until(T0 + 6 * D)
    noon = T0 + 12 * H
    assert world.sent() == [noon, noon + 4 * D, noon + 5 * D]
    assert [due for due, _ in world.skipped()] == days(noon + D, 3)


def test_the_first_of_several_calendars_to_exclude_names_the_reason(world: World) -> None:
    world.api.create_calendar("a", dates=["2026-01-02"])
    world.api.create_calendar("b", dates=["2026-01-02", "2026-01-03"])
    world.api.create("job", "app.job", cron="0 12 * * *", calendars=["a", "b"])
    world.run_until(T0 + 4 * D)
    noon = T0 + 12 * H
    assert world.skipped() == [(noon + D, "excluded by calendar a"),
                               (noon + 2 * D, "excluded by calendar b")]


def test_schedules_not_observing_a_calendar_run_on_its_dates(world: World) -> None:
    world.api.create_calendar("holidays", dates=["2026-01-02"])
    world.api.create("job", "app.job", cron="0 12 * * *", calendars=["holidays"])
    world.api.create("other", "app.job", cron="0 12 * * *")
    world.run_until(T0 + 3 * D)
    assert len(world.sent("other")) == 3
    assert len(world.sent("job")) == 2


def test_an_interval_schedule_reads_its_calendars_in_utc(world: World) -> None:
    world.api.create_calendar("day2", dates=["2026-01-02"])
    world.api.create("job", "app.job", every=6 * 3600, calendars=["day2"])
    world.run_until(T0 + 3 * D)
    assert all(due.date() != date(2026, 1, 2) for due in world.sent())
    assert [due for due, _ in world.skipped()] == days(T0 + D, 4, 6 * H)


def test_exclusion_is_judged_on_the_due_instant_after_the_offset(world: World) -> None:
    # The occurrence is at 23:00 UTC on the 1st; shifted by two hours, it is due on the 2nd.
    world.api.create_calendar("day2", dates=["2026-01-02"])
    world.api.create("job", "app.job", cron="0 23 * * *", offset=2 * 3600,
                     calendars=["day2"])
    world.run_until(T0 + 3 * D)
    assert world.skipped() == [(T0 + D + H, "excluded by calendar day2")]
    assert world.sent() == [T0 + H, T0 + 2 * D + H]


def test_excluded_occurrences_do_not_count_toward_max_runs(world: World) -> None:
    world.api.create_calendar("holidays", dates=["2026-01-01", "2026-01-02"])
    world.api.create("job", "app.job", cron="0 12 * * *", calendars=["holidays"], max_runs=2)
    world.run_until(T0 + 6 * D)
    assert world.sent() == [T0 + 2 * D + 12 * H, T0 + 3 * D + 12 * H]
    assert world.api.get("job").next_run_at is None


def test_a_late_leader_coalescing_onto_an_excluded_point_skips_it(world: World) -> None:
    world.api.create_calendar("day2", dates=["2026-01-02"])
    world.api.create("job", "app.job", every=3600, calendars=["day2"], misfire_grace=7200)
    world.clock.advance(timedelta(days=1, minutes=30))  # the leader was away
    world.engine.tick()
    assert world.sent() == []
    assert world.skipped() == [(T0 + D, "excluded by calendar day2")]


def test_an_excluded_occurrence_does_not_count_as_a_run_in_flight(world: World) -> None:
    claim = PlannedClaim(schedule_name="job", version=1, occurrences=((T0, T0), (T0 + H, T0 + H)),
                         missed=0, next_occurrence_at=T0 + 2 * H, next_run_at=T0 + 2 * H,
                         overlap=OverlapPolicy.SKIP,
                         excluded=((T0, "excluded by calendar x"),))
    plan = plan_claims([claim], {"job": 1}, token=1, now=T0 + H)
    states = [(e.state, e.last_error) for e in plan.executions]
    assert states == [(ExecutionState.SKIPPED, "excluded by calendar x"),
                      (ExecutionState.CLAIMED, None)]
    assert (plan.advances[0].runs, plan.advances[0].skipped) == (1, 1)


# -- previews ------------------------------------------------------------------------------
@pytest.mark.parametrize("schedule", [
    {"cron": "0 9 * * *"},
    {"cron": "*/30 * * * *", "timezone": "Europe/Paris"},
    {"every": 4 * 3600, "offset": 600},
    {"cron": "0 9 * * *", "max_runs": 3},
], ids=["cron", "wildcard-paris", "interval-offset", "max-runs"])
def test_the_preview_skips_excluded_occurrences_as_the_leader_does(
        world: World, schedule: dict[str, Any]) -> None:
    world.api.create_calendar("holidays", dates=["2026-01-02"],
                              ranges=[("2026-01-04", "2026-01-05")])
    world.api.create("job", "app.job", calendars=["holidays"], **schedule)
    preview = world.api.next_runs("job", 12)
    world.run_until(preview[-1])
    assert world.sent()[:len(preview)] == preview
    excluded = {date(2026, 1, 2), date(2026, 1, 4), date(2026, 1, 5)}
    zone = calendar_zone(world.api.get("job").spec)
    assert not {due.astimezone(zone).date() for due in preview} & excluded


def test_a_fixed_delay_preview_steps_one_delay_over_an_excluded_run(world: World) -> None:
    # An excluded run is no run: the next one is one delay after it (the claim's provisional
    # next run), which is what the preview assumes of runs that take no time.
    world.api.create_calendar("day1", dates=["2026-01-01"])
    world.api.create("job", "app.job", every=8 * 3600, mode="fixed_delay", calendars=["day1"])
    assert world.api.next_runs("job", 2) == [T0 + 3 * 8 * H, T0 + 4 * 8 * H]


def test_a_preview_over_a_long_freeze_jumps_to_the_first_day_after_it(world: World) -> None:
    world.api.create_calendar("freeze", ranges=["2026-01-01..2026-12-31"])
    world.api.create("job", "app.job", every=60, calendars=["freeze"])
    assert world.api.next_runs("job", 2) == [datetime(2027, 1, 1, tzinfo=UTC),
                                             datetime(2027, 1, 1, 0, 1, tzinfo=UTC)]


def test_a_preview_of_a_schedule_whose_calendar_is_missing_names_it(world: World) -> None:
    world.api.create_calendar("holidays", dates=["2026-01-02"])
    world.api.create("job", "app.job", every=60, calendars=["holidays"])
    world.store._calendars.clear()  # gone behind the API's back
    with pytest.raises(ConfigurationError, match="no calendar named 'holidays'"):
        world.api.next_runs("job")


# -- local dates across DST changes --------------------------------------------------------
def test_a_paris_job_at_00_30_is_excluded_by_its_local_date_the_previous_day_in_utc() -> None:
    world = World(datetime(2026, 10, 23, tzinfo=UTC))
    world.api.create_calendar("sunday", dates=["2026-10-25"])  # the night clocks go back
    world.api.create("job", "app.job", cron="30 0 * * *", timezone="Europe/Paris",
                     calendars=["sunday"])
    world.run_until(datetime(2026, 10, 28, tzinfo=UTC))
    # 00:30 in Paris is 22:30 UTC the day before in summer time, 23:30 in winter time.
    skipped = world.skipped()
    assert skipped == [(datetime(2026, 10, 24, 22, 30, tzinfo=UTC),
                        "excluded by calendar sunday")]
    assert [d.astimezone(PARIS).date() for d in world.sent()] == [
        date(2026, 10, 24), date(2026, 10, 26), date(2026, 10, 27), date(2026, 10, 28)]
    assert world.sent()[1] == datetime(2026, 10, 25, 23, 30, tzinfo=UTC)


def test_every_real_hour_of_the_paris_fall_back_day_is_excluded_and_no_other() -> None:
    world = World(datetime(2026, 10, 24, 12, tzinfo=UTC))
    world.api.create_calendar("sunday", dates=["2026-10-25"])
    world.api.create("job", "app.job", cron="0 * * * *", timezone="Europe/Paris",
                     calendars=["sunday"])
    world.run_until(datetime(2026, 10, 26, 12, tzinfo=UTC))
    excluded = [due for due, _ in world.skipped()]
    # The local day has 25 hours: 22:00 UTC on the 24th to 23:00 UTC on the 25th.
    assert excluded == days(datetime(2026, 10, 24, 22, tzinfo=UTC), 25, H)
    assert all(d.astimezone(PARIS).date() != date(2026, 10, 25) for d in world.sent())


def test_the_paris_spring_forward_day_has_23_excluded_hours() -> None:
    world = World(datetime(2026, 3, 28, 12, tzinfo=UTC))
    world.api.create_calendar("sunday", dates=["2026-03-29"])
    world.api.create("job", "app.job", cron="0 * * * *", timezone="Europe/Paris",
                     calendars=["sunday"])
    preview = world.api.next_runs("job", 20)
    world.run_until(datetime(2026, 3, 30, 12, tzinfo=UTC))
    excluded = [due for due, _ in world.skipped()]
    assert excluded == days(datetime(2026, 3, 28, 23, tzinfo=UTC), 23, H)
    assert world.sent()[:20] == preview
    assert preview[9:11] == [datetime(2026, 3, 28, 22, tzinfo=UTC),
                              datetime(2026, 3, 29, 22, tzinfo=UTC)]


def test_a_new_york_job_excluded_by_local_date_across_the_november_change() -> None:
    world = World(datetime(2026, 10, 30, tzinfo=UTC))
    world.api.create_calendar("nov1", dates=["2026-11-01"])
    world.api.create("job", "app.job", cron="30 0,23 * * *", timezone="America/New_York",
                     calendars=["nov1"])
    world.run_until(datetime(2026, 11, 4, tzinfo=UTC))
    # 00:30 on Nov 1 is 04:30 UTC (EDT); 23:30 on Nov 1 is 04:30 UTC on Nov 2 (EST).
    assert world.skipped() == [
        (datetime(2026, 11, 1, 4, 30, tzinfo=UTC), "excluded by calendar nov1"),
        (datetime(2026, 11, 2, 4, 30, tzinfo=UTC), "excluded by calendar nov1")]
    assert {d.astimezone(NEW_YORK).date() for d in world.sent()} == {
        date(2026, 10, 29), date(2026, 10, 30), date(2026, 10, 31), date(2026, 11, 2),
        date(2026, 11, 3)}


def test_next_day_lands_on_local_midnight_across_a_change() -> None:
    exclusions = Exclusions([Calendar(name="x", dates=(date(2026, 10, 25),))], PARIS)
    due = datetime(2026, 10, 25, 12, tzinfo=UTC)
    assert exclusions.next_day(due) == datetime(2026, 10, 25, 23, tzinfo=UTC)
    assert exclusions.next_day(datetime(2026, 3, 29, 12, tzinfo=UTC)) == datetime(
        2026, 3, 29, 22, tzinfo=UTC)


# -- changes -------------------------------------------------------------------------------
def test_a_calendar_edit_applies_at_the_next_planning(world: World) -> None:
    world.api.create_calendar("holidays")
    world.api.create("job", "app.job", cron="0 12 * * *", calendars=["holidays"])
    world.run_until(T0 + 13 * H)
    world.api.update_calendar("holidays", dates=["2026-01-02"])
    world.run_until(T0 + D + 13 * H)
    assert world.skipped() == [(T0 + D + 12 * H, "excluded by calendar holidays")]
    world.api.update_calendar("holidays", dates=[])
    world.run_until(T0 + 3 * D)
    assert world.sent() == [T0 + 12 * H, T0 + 2 * D + 12 * H]


def test_calendars_are_added_and_removed_by_an_edit_keeping_the_next_run(
        world: World) -> None:
    world.api.create_calendar("holidays", dates=["2026-01-01"])
    created = world.api.create("job", "app.job", cron="0 12 * * *")
    edited = world.api.update("job", calendars=["holidays"])
    assert edited.spec.calendars == ("holidays",)
    assert edited.next_run_at == created.next_run_at
    assert world.api.update("job", calendars=[]).spec.calendars == ()


def test_a_calendar_in_use_cannot_be_deleted_and_names_its_schedules(world: World) -> None:
    world.api.create_calendar("holidays")
    world.api.create("b", "app.job", every=60, calendars=["holidays"])
    world.api.create("a", "app.job", every=60, calendars=["holidays"])
    with pytest.raises(CalendarInUse, match="'a', 'b'") as caught:
        world.api.delete_calendar("holidays")
    assert caught.value.schedules == ("a", "b")
    assert world.api.get_calendar("holidays").name == "holidays"
    world.api.update("a", calendars=[])
    world.api.delete("b")
    world.api.delete_calendar("holidays")
    with pytest.raises(CalendarNotFound):
        world.api.get_calendar("holidays")


def test_calendars_round_trip_sorted_with_versions(world: World) -> None:
    created = world.api.create_calendar(
        "holidays", dates=["2026-12-25", date(2026, 1, 1), "2026-12-25"],
        ranges=[{"from": "2026-12-24", "to": "2027-01-02"}], description="Closed")
    assert created.dates == (date(2026, 1, 1), date(2026, 12, 25))
    assert created.entries() == ["2026-01-01", "2026-12-25",
                                 {"from": "2026-12-24", "to": "2027-01-02"}]
    assert (created.version, created.description) == (1, "Closed")
    updated = world.api.update_calendar("holidays", description=None)
    assert (updated.version, updated.description, updated.dates) == (2, None, created.dates)
    assert world.api.update_calendar("holidays", description=None).version == 2
    assert [c.name for c in world.api.list_calendars()] == ["holidays"]
    with pytest.raises(ScheduleConflict):
        world.api.update_calendar("holidays", dates=[], expected_version=1)
    with pytest.raises(ScheduleConflict, match="already exists"):
        world.api.create_calendar("holidays")


# -- bad input -----------------------------------------------------------------------------
def test_bad_calendar_input_is_all_reported_at_once_and_nothing_is_stored(
        world: World) -> None:
    with pytest.raises(ConfigurationError) as caught:
        world.api.create_calendar("bad name", dates=["2026-02-30", "tomorrow"],
                                  ranges=["2026-12-31..2026-12-01", "2026-01-01"],
                                  description="x\x1b")
    text = "\n".join(caught.value.problems)
    for expected in ("name: 'bad name' is not a calendar name", "dates: '2026-02-30'",
                     "dates: 'tomorrow'", "ends before it starts", "ranges: '2026-01-01'",
                     "description"):
        assert expected in text
    assert world.api.list_calendars() == []


def test_an_unknown_calendar_is_refused_naming_it_and_nothing_is_stored(
        world: World) -> None:
    world.api.create_calendar("holidays")
    with pytest.raises(ConfigurationError) as caught:
        world.api.create("job", "app.job", every=60, calendars=["holidays", "nope"], max_runs=0)
    problems = caught.value.problems
    assert any("no calendar named 'nope'" in p for p in problems)
    assert any("max_runs" in p for p in problems)
    assert world.api.list() == []


@pytest.mark.parametrize("calendars", ["holidays", [1], ["a", "a"], ["with space"],
                                       [str(n) for n in range(21)]])
def test_calendar_lists_of_the_wrong_shape_are_refused(world: World, calendars: Any) -> None:
    with pytest.raises(ConfigurationError, match="calendars"):
        world.api.create("job", "app.job", every=60, calendars=calendars)


# -- failure domains -----------------------------------------------------------------------
def test_an_unreadable_calendar_sets_aside_only_the_schedules_observing_it(
        world: World) -> None:
    world.api.create_calendar("holidays", dates=["2026-01-02"])
    world.api.create("job", "app.job", every=3600, calendars=["holidays"])
    world.api.create("other", "app.job", every=3600)
    dates, ranges, _ = parse_entries(["2026-13-01"])
    world.store._calendars["holidays"] = replace(
        world.store._calendars["holidays"], dates=dates, ranges=ranges,
        damage=(Problem("entries", "'2026-13-01' is not a date"),))
    world.run_until(T0 + 3 * H)
    assert world.sent("job") == []
    assert world.sent("other") == days(T0 + H, 3, H)
    fault = world.api.get("job").fault
    assert fault is not None and "calendar 'holidays' cannot be read" in fault


def test_stored_entries_are_read_with_every_problem_named() -> None:
    dates, ranges, problems = parse_entries(
        ["2026-01-01", {"from": "2026-01-03", "to": "2026-01-04"}, 5, {"from": "x"}])
    assert dates == (date(2026, 1, 1),)
    assert ranges == ((date(2026, 1, 3), date(2026, 1, 4)),)
    assert len(problems) == 2
    assert list(map(str, parse_entries({"a": 1})[2])) == [
        "entries: expected a JSON list of dates and ranges, found {'a': 1}"]


def test_a_cron_zone_reads_dates_in_that_zone_and_others_in_utc(world: World) -> None:
    cron = world.api.create("c", "app.job", cron="0 9 * * *", timezone="Asia/Kolkata")
    every = world.api.create("e", "app.job", every=60)
    assert calendar_zone(cron.spec) == ZoneInfo("Asia/Kolkata")
    assert calendar_zone(every.spec) is timezone.utc


def test_overlapping_and_touching_ranges_exclude_as_their_union() -> None:
    calendar = Calendar(name="x", ranges=((date(2026, 1, 5), date(2026, 1, 9)),
                                          (date(2026, 1, 1), date(2026, 1, 3)),
                                          (date(2026, 1, 4), date(2026, 1, 4)),
                                          (date(2026, 1, 2), date(2026, 1, 2))))
    exclusions = Exclusions([calendar], timezone.utc)
    for day in range(1, 15):
        instant = datetime(2026, 1, day, 12, tzinfo=UTC)
        assert (exclusions.reason(instant) is not None) is calendar.excludes(instant.date())


def test_a_fixed_delay_preview_over_a_long_freeze_steps_a_day_at_a_time(world: World) -> None:
    world.api.create_calendar("freeze", ranges=["2026-01-01..2026-06-30"])
    world.api.create("job", "app.job", every=7, mode="fixed_delay", calendars=["freeze"])
    first = world.api.next_runs("job", 1)[0]
    assert first.date() == date(2026, 7, 1) and first - T0 < timedelta(days=181, seconds=7)
    assert (first - (T0 + 7 * timedelta(seconds=1))) % timedelta(seconds=7) == timedelta(0)


def test_a_preview_through_a_full_calendar_stays_quick(world: World) -> None:
    dates = [date(2026, 1, 1) + timedelta(days=2 * n) for n in range(1000)]
    world.api.create_calendar("busy", dates=dates)
    world.api.create("job", "app.job", every=60, calendars=["busy"])
    runs = world.api.next_runs("job", 1000)
    assert len(runs) == 1000
    assert all(run.date() not in set(dates) for run in runs)


def test_a_damaged_calendar_is_rewritten_only_with_dates_and_ranges_given_anew(
        world: World) -> None:
    world.api.create_calendar("holidays", dates=["2026-01-02"])
    world.store._calendars["holidays"] = replace(
        world.store._calendars["holidays"], damage=(Problem("entries", "5 is not a date"),))
    with pytest.raises(ConfigurationError, match="give both dates and ranges anew"):
        world.api.update_calendar("holidays", description="x")
    repaired = world.api.update_calendar("holidays", dates=["2026-01-03"], ranges=[])
    assert (repaired.damage, repaired.dates) == ((), (date(2026, 1, 3),))


def test_an_edit_keeping_a_calendar_deleted_behind_the_api_is_refused_naming_it(
        world: World) -> None:
    world.api.create_calendar("holidays")
    world.api.create("job", "app.job", every=60, calendars=["holidays"])
    del world.store._calendars["holidays"]
    with pytest.raises(ConfigurationError, match="no calendar named 'holidays'"):
        world.api.update("job", description="still here")
    assert world.api.update("job", calendars=[], description="x").spec.calendars == ()
