"""Every instant a user gives lies from 1970-01-01 to 9000-01-01 UTC (the bounds are written
once, in ``core.rules.validation``), and no trigger has an occurrence past the upper one: arithmetic
near the end of ``datetime``'s years never overflows, a next occurrence past it is none."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from celery import Celery
from hypothesis import given
from hypothesis import strategies as st

from goatbeat_celery import config as config_module
from goatbeat_celery.api import Schedules
from goatbeat_celery.celery_schedules import CelerySchedule
from goatbeat_celery.core.rules.backfill import BackfillRequest, request_problems
from goatbeat_celery.core.rules.controls import upcoming_runs
from goatbeat_celery.core.rules.misfire import first_occurrence, plan_misfires
from goatbeat_celery.core.rules.policies import ScheduleMode
from goatbeat_celery.core.rules.triggers import IntervalTrigger, OnceTrigger
from goatbeat_celery.core.rules.validation import (
    EARLIEST_INSTANT,
    INSTANT_RANGE,
    LATEST_INSTANT,
    instant_problem,
    options_problems,
)
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from goatbeat_celery.cron import CronTrigger
from goatbeat_celery.store.memory import MemoryStore

UTC = timezone.utc
MICRO = timedelta(microseconds=1)
RANGE = "from 1970-01-01T00:00:00Z to 9000-01-01T00:00:00Z"
#: Instants outside the range, some beyond what a datetime holds once in UTC.
OUTSIDE = [
    datetime(9999, 3, 1, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-5))),  # past year 9999 in UTC
    datetime(1, 1, 1, tzinfo=UTC),
    datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))),  # before year 1 in UTC
    datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    LATEST_INSTANT + MICRO,
]
OUTSIDE_IDS = ["9999-03", "9999-end", "9999-minus-5h", "0001", "0001-plus-5h", "before-1970",
               "just-past-9000"]


def test_the_bounds_are_the_documented_ones() -> None:
    assert EARLIEST_INSTANT == datetime(1970, 1, 1, tzinfo=UTC)
    assert LATEST_INSTANT == datetime(9000, 1, 1, tzinfo=UTC)
    assert INSTANT_RANGE == RANGE


@pytest.mark.parametrize("value", [EARLIEST_INSTANT, LATEST_INSTANT,
                                   datetime(2026, 6, 1, 12, tzinfo=timezone(timedelta(hours=2))),
                                   datetime(8999, 12, 31, 23, tzinfo=UTC)],
                         ids=["earliest", "latest", "offset", "late"])
def test_an_instant_inside_the_bounds_is_accepted(value: datetime) -> None:
    assert instant_problem(value, "start_at") is None


@pytest.mark.parametrize("value", OUTSIDE, ids=OUTSIDE_IDS)
def test_an_instant_outside_the_bounds_is_refused_naming_the_field_and_the_range(
        value: datetime) -> None:
    problem = str(instant_problem(value, "start_at"))

    assert problem is not None
    assert problem.startswith("start_at: ")
    assert RANGE in problem


@pytest.mark.parametrize("value", [datetime(2030, 1, 1), "2030-01-01T00:00:00Z", 5, None],
                         ids=["naive", "text", "number", "none"])
def test_what_is_no_aware_datetime_is_refused_naming_the_field(value: object) -> None:
    problem = str(instant_problem(value, "until"))

    assert problem is not None and problem.startswith("until: ")


# -- at the door: specs, one-time triggers, backfills, config entries ----------------------
@pytest.mark.parametrize("value", OUTSIDE, ids=OUTSIDE_IDS)
@pytest.mark.parametrize("field", ["start_at", "end_at"])
def test_a_spec_refuses_a_bound_outside_the_range(field: str, value: datetime) -> None:
    spec = ScheduleSpec(name="report", task="proj.report",
                        trigger=TriggerSpec(kind="cron", params={"expression": "0 7 * * *"}),
                        **{field: value})

    problems = [str(p) for p in spec.problems()]

    assert any(f"{field}: " in p and RANGE in p for p in problems), problems


@pytest.mark.parametrize("value", OUTSIDE, ids=OUTSIDE_IDS)
def test_a_one_time_instant_outside_the_range_is_refused(value: datetime) -> None:
    with pytest.raises(ConfigurationError) as refused:
        OnceTrigger(value)

    assert refused.value.problems[0].startswith("at: ")
    assert RANGE in refused.value.problems[0]


@pytest.mark.parametrize("value", OUTSIDE[:5], ids=OUTSIDE_IDS[:5])
@pytest.mark.parametrize("field", ["start", "end"])
def test_a_backfill_range_outside_the_bounds_is_refused(field: str, value: datetime) -> None:
    ends = {"start": datetime(2026, 1, 1, tzinfo=UTC), "end": datetime(2026, 1, 2, tzinfo=UTC)}
    ends[field] = value
    request = BackfillRequest(schedule_name="report", **ends)

    problems = [str(p) for p in request_problems(request, datetime(2026, 6, 1, tzinfo=UTC))]

    assert any(p.startswith(f"{field}: ") and RANGE in p for p in problems), problems


@pytest.mark.parametrize("value", ["9999-03-01T00:00:00+00:00", "0001-01-01T00:00:00+05:00",
                                   datetime(9999, 12, 31, tzinfo=UTC)],
                         ids=["text-9999", "text-0001", "datetime-9999"])
def test_a_config_entry_bound_outside_the_range_is_refused_naming_the_entry(
        value: object) -> None:
    app = Celery("bounds", set_as_current=False)
    app.conf.goatbeat_database_url = "memory://"
    app.conf.beat_schedule = {"report": {"task": "proj.report", "schedule": 60,
                                         "goatbeat": {"start_at": value}}}

    with pytest.raises(ConfigurationError) as refused:
        config_module.load(app)

    problems = refused.value.problems
    assert any(p.startswith("beat_schedule['report'].goatbeat.start_at: ") and RANGE in p
               for p in problems), problems


# -- no occurrence past the upper bound -----------------------------------------------------
@pytest.mark.parametrize("every", [timedelta(seconds=1), timedelta(hours=1),
                                   timedelta(days=3650)], ids=["1s", "1h", "3650d"])
@pytest.mark.parametrize("instant", [LATEST_INSTANT - MICRO, LATEST_INSTANT,
                                     datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)],
                         ids=["just-before", "at", "datetime-max"])
def test_an_interval_has_no_occurrence_past_the_upper_bound(every: timedelta,
                                                            instant: datetime) -> None:
    trigger = IntervalTrigger(every)
    after = trigger.next_after(instant)

    assert after is None or after <= LATEST_INSTANT
    if instant >= LATEST_INSTANT:
        assert after is None


def test_an_interval_counts_no_point_past_the_upper_bound() -> None:
    trigger = IntervalTrigger(timedelta(days=1))
    start = datetime(8999, 12, 29, tzinfo=UTC)

    count, tail = trigger.points_before(start, datetime(9999, 12, 31, tzinfo=UTC), 10)

    assert tail[-1] == LATEST_INSTANT
    assert count == 4


def test_misfire_planning_near_the_upper_bound_ends_the_schedule() -> None:
    trigger = IntervalTrigger(timedelta(days=1))
    first = datetime(8999, 12, 31, tzinfo=UTC)

    plan = plan_misfires(trigger=trigger, first=first,
                         now=datetime(9999, 12, 31, 23, tzinfo=UTC), grace=timedelta(days=7))

    assert plan.next_occurrence is None


@pytest.mark.parametrize("instant", [datetime(8999, 12, 31, 23, 59, tzinfo=UTC),
                                     LATEST_INSTANT, datetime(9999, 3, 1, tzinfo=UTC),
                                     datetime(9999, 12, 31, 23, 59, tzinfo=UTC)],
                         ids=["just-before", "at", "9999-03", "9999-end"])
@pytest.mark.parametrize("zone", ["UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago"])
def test_a_cron_trigger_has_no_occurrence_past_the_upper_bound(instant: datetime,
                                                               zone: str) -> None:
    assert CronTrigger("0 7 * * *", zone).next_after(instant) is None


def test_a_cron_trigger_still_runs_up_to_the_upper_bound() -> None:
    trigger = CronTrigger("0 0 * * *")

    assert trigger.next_after(LATEST_INSTANT - MICRO) == LATEST_INSTANT


class _FarAway:
    """A Celery schedule whose next run is further than any datetime can hold."""

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        return timedelta.max

    def is_due(self, last_run_at: datetime) -> Any:
        raise AssertionError("not asked")

    def now(self) -> datetime:
        return datetime(8999, 6, 1, tzinfo=UTC)


def test_a_celery_schedule_past_the_upper_bound_has_no_occurrence() -> None:
    trigger = CelerySchedule("far", _FarAway())

    assert trigger.next_after(datetime(2026, 1, 1, tzinfo=UTC)) is None
    assert trigger.next_after(datetime(9999, 12, 31, tzinfo=UTC)) is None


def test_a_fixed_delay_preview_stops_at_the_upper_bound() -> None:
    every = timedelta(days=3650)
    spec = ScheduleSpec(name="rare", task="proj.rare", mode=ScheduleMode.FIXED_DELAY,
                        trigger=IntervalTrigger(every).to_spec())
    start = datetime(2026, 1, 1, tzinfo=UTC)
    schedule = Schedule(spec=spec, next_occurrence_at=start, next_run_at=start)
    trigger = IntervalTrigger(every)

    runs = upcoming_runs(schedule, lambda instant: first_occurrence(trigger, instant), 1000,
                         delay=every)

    assert runs and runs[-1] <= LATEST_INSTANT
    assert len(runs) == (LATEST_INSTANT - start) // every + 1


def test_next_runs_of_a_fixed_delay_schedule_never_overflow() -> None:
    schedules = Schedules(MemoryStore())
    schedules.create("rare", "proj.rare", every=timedelta(days=3650), mode="fixed_delay")

    runs = schedules.next_runs("rare", 1000)

    assert runs and all(run <= LATEST_INSTANT for run in runs)


@given(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 31),
                    timezones=st.just(UTC)),
       st.integers(min_value=1, max_value=3650 * 86_400))
def test_no_interval_occurrence_overflows_or_passes_the_upper_bound(instant: datetime,
                                                                    seconds: int) -> None:
    after = IntervalTrigger(timedelta(seconds=seconds)).next_after(instant)

    assert after is None or instant < after <= LATEST_INSTANT


# -- routing options ------------------------------------------------------------------------
@pytest.mark.parametrize("option", ["queue", "exchange", "routing_key"])
@pytest.mark.parametrize("value", ["reports\x00", "a\x01b", "\x1b[31mred", "line\nbreak",
                                   "rtl\u202e"], ids=["nul", "soh", "escape", "newline", "rtl"])
def test_a_routing_option_with_control_characters_is_refused(option: str, value: str) -> None:
    problems = [str(p) for p in options_problems({option: value})]

    assert len(problems) == 1
    assert problems[0].startswith(f"options.{option}: contains control or invisible characters")


@pytest.mark.parametrize("value", ["reports", "celery.priority", "q-1:fast", "émail"])
def test_a_printable_routing_option_is_accepted(value: str) -> None:
    assert options_problems({"queue": value, "exchange": value, "routing_key": value}) == []
