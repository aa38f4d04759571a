"""A cron expression croniter refuses is explained field by field, in our words: which field,
what in it is wrong, and the values it takes."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.cron import CronTrigger


def problem_of(expression: str) -> str:
    with pytest.raises(ConfigurationError) as raised:
        CronTrigger(expression)
    (problem,) = raised.value.problems
    return problem


@pytest.mark.parametrize(("expression", "fault"), [
    ("61 * * * *", "minute field '61' is out of range 0-59"),
    ("-1 * * * *", "minute field '-1' is out of range 0-59"),
    ("0-70/5 * * * *", "minute field '0-70/5': 70 is out of range 0-59"),
    ("* 24 * * *", "hour field '24' is out of range 0-23"),
    ("* * 0 * *", "day-of-month field '0' is out of range 1-31"),
    ("* * 32 * *", "day-of-month field '32' is out of range 1-31"),
    ("* * * 13 *", "month field '13' is out of range 1-12"),
    ("* * * jan-foo *", "month field 'jan-foo': 'foo' is not a month (1-12 or jan-dec)"),
    ("* * * * 8", "day-of-week field '8' is out of range 0-7"),
    ("* * * * mon-xyz", "day-of-week field 'mon-xyz': 'xyz' is not a day (0-7 or sun-sat)"),
    ("* * * * 5#6", "day-of-week field '5#6': #6 must be #1 to #5"),
    ("*/0 * * * *", "minute field '*/0': the step must be at least 1"),
    ("*/x * * * *", "minute field '*/x': the step 'x' is not a whole number"),
    ("1,,2 * * * *", "minute field '1,,2' has an empty item"),
    ("abc * * * *", "minute field 'abc' is not a number (0-59)"),
    ("* * * * 9L", "day-of-week field '9L': 9 is out of range 0-7"),
    ("* * * * 5L,1", "day-of-week field '5L,1' mixes a last or nth day (5L, 5#2) with other "
                     "days"),
    ("* * 1W,15W * *", "day-of-month field '1W,15W': W takes one day"),
    ("* * 1-5W * *", "day-of-month field '1-5W': W takes one day"),
    ("* * 32W * *", "day-of-month field '32W': 32 is out of range 1-31"),
], ids=lambda v: str(v))
def test_the_faulty_field_is_named_with_its_range(expression: str, fault: str) -> None:
    problem = problem_of(expression)

    assert problem.startswith(f"cron expression: {expression!r}: {fault}")
    assert "is not acceptable" not in problem  # croniter's own wording
    assert problem.endswith("fields in order: minute hour day-of-month month day-of-week, "
                            "e.g. '30 2 * * *'")


def test_every_faulty_field_is_named_in_one_problem() -> None:
    problem = problem_of("61 25 * * *")

    assert "minute field '61' is out of range 0-59; hour field '25' is out of range 0-23" \
        in problem


def test_a_huge_number_is_out_of_range_not_a_crash() -> None:
    assert "minute field '" + "9" * 5000 + "' is out of range 0-59" in problem_of(
        "9" * 5000 + " * * * *")


@pytest.mark.parametrize("expression", ["* * * * 7", "* * * * sun-sat", "0 0 L * *",
                                        "*/15 * * * *", "0 9 * * 1#2", "0 9 15W * *",
                                        "0 9 * * 5L", "0 9 * * friL", "0 9 * * L5",
                                        "0 9 * * fri#2"])
def test_what_croniter_accepts_is_still_accepted(expression: str) -> None:
    assert CronTrigger(expression).expression == expression


def test_the_last_weekday_of_the_month_is_refused_with_what_to_write_instead() -> None:
    problem = problem_of("0 9 LW * *")

    assert "LW (the last weekday of the month) in the day-of-month field is not supported" \
        in problem
    assert "5L for the last Friday" in problem


@pytest.mark.parametrize(("quartz", "croniter_form"), [
    ("0 9 * * 5L", "0 9 * * L5"), ("0 9 * * FRIL", "0 9 * * L5"), ("0 9 * * 0L", "0 9 * * L7")])
def test_a_last_day_of_week_written_either_way_runs_alike(quartz: str, croniter_form: str) -> None:
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    ours, theirs = CronTrigger(quartz, "Europe/Paris"), CronTrigger(croniter_form, "Europe/Paris")
    for _ in range(14):
        following = ours.next_after(start)
        assert following is not None
        assert following == theirs.next_after(following - timedelta(seconds=1))
        start = following
