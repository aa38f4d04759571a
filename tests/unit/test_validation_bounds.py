"""The rules every face applies to numbers and JSON, judged without raising: integers of any
size, NaN and infinities, nesting at any depth, lone surrogates, and a calendar's dates of the
wrong type."""

from __future__ import annotations

from datetime import timedelta

import pytest

from goatbeat_celery.core.rules import validation
from goatbeat_celery.core.rules.calendars import calendar_of
from goatbeat_celery.core.rules.policies import backoff_problems
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.instants import to_timedelta

HUGE = 10**400


@pytest.mark.parametrize(("value", "expected"), [
    (3, 3.0), (0.5, 0.5), (HUGE, None), (-HUGE, None), (float("nan"), None),
    (float("inf"), None), (True, None), ("1", None), (None, None)])
def test_a_finite_number_is_read_and_anything_else_is_none(value: object,
                                                            expected: float | None) -> None:
    assert validation.finite_number(value) == expected


@pytest.mark.parametrize("value", [HUGE, -HUGE, 2**1024, float("inf"), float("nan")])
def test_a_duration_beyond_a_float_is_a_problem_not_an_overflow(value: object) -> None:
    problem = validation.seconds_problem(value, "every")
    assert problem is not None and problem.field == "every"
    with pytest.raises(ConfigurationError) as raised:
        to_timedelta(value, "every")  # type: ignore[arg-type]
    assert raised.value.details[0].field == "every"
    assert validation.seconds_problem(60, "every") is None
    assert validation.seconds_problem(timedelta(days=1), "every") is None


def test_a_count_and_a_factor_of_any_size_are_problems_naming_them() -> None:
    count = validation.count_problem(HUGE, "max_runs", minimum=1, maximum=10)
    assert count is not None and len(count.message) < 120
    factor = backoff_problems(timedelta(seconds=60), HUGE, None)
    assert [p.field for p in factor] == ["failure_backoff_factor"]
    assert [p.field for p in backoff_problems(timedelta(seconds=60), float("nan"), None)] == [
        "failure_backoff_factor"]


def test_an_integer_too_long_to_write_out_is_shown_by_its_size() -> None:
    assert validation.shown_value(10**5000) == "an integer of 16610 bits"


@pytest.mark.parametrize("depth", [33, 500, 5000])
def test_json_nested_deeper_than_the_limit_is_refused_without_recursing(depth: int) -> None:
    value: object = []
    for _ in range(depth - 1):
        value = [value]
    problem = validation.json_shape_problem({"a": value}, "kwargs")
    assert problem is not None and "nested too deeply" in problem.message
    assert [p.field for p in validation.payload_problems("kwargs", {"a": value})] == ["kwargs"]


def test_json_at_the_limit_is_kept() -> None:
    value: object = []
    for _ in range(validation.MAX_NESTING - 1):
        value = [value]
    assert validation.json_shape_problem(value, "args") is None
    assert validation.payload_problems("args", value) == []


@pytest.mark.parametrize("value", ["\ud800", ["a\udfff"], {"\ud800": 1}, {"k": {"j": "\udc00"}}])
def test_a_lone_surrogate_anywhere_in_json_is_refused(value: object) -> None:
    assert [p.field for p in validation.payload_problems("kwargs", value)] == ["kwargs"]
    assert validation.payload_problems("kwargs", {"emoji": "\U0001f600"}) == []


@pytest.mark.parametrize(("dates", "ranges", "field"), [
    (5, (), "dates"), ({"2030-01-01": 1}, (), "dates"), (True, (), "dates"),
    ((), 5, "ranges"), ((), False, "ranges"), ([5], (), "dates")])
def test_a_calendar_of_dates_of_the_wrong_type_is_refused_naming_them(
        dates: object, ranges: object, field: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        calendar_of("holidays", dates, ranges, None)
    assert [p.field for p in raised.value.details] == [field]


def test_a_calendar_takes_lists_and_one_date_or_range_given_bare() -> None:
    made = calendar_of("holidays", "2030-01-01", {"from": "2030-02-01", "to": "2030-02-03"},
                       None)
    assert [d.isoformat() for d in made.dates] == ["2030-01-01"] and len(made.ranges) == 1
    assert calendar_of("c", iter(["2030-01-02"]), [], None).dates
