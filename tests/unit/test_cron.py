"""CronTrigger outside daylight saving: validation, storage, day semantics, the Trigger contract."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest

from goatbeat_celery.core.rules.triggers import Trigger, TriggerRegistry
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.spec import TriggerSpec
from goatbeat_celery.cron import CronTrigger, register

UTC = timezone.utc


def run_dates(trigger: CronTrigger, start: datetime, count: int) -> list[str]:
    found = []
    cursor = start
    for _ in range(count):
        following = trigger.next_after(cursor)
        assert following is not None
        found.append(following.date().isoformat())
        cursor = following
    return found


# -- the Trigger contract ----------------------------------------------------------------------

def test_a_cron_trigger_is_a_trigger() -> None:
    assert isinstance(CronTrigger("0 3 * * *"), Trigger)
    assert CronTrigger("0 3 * * *").kind == "cron"


def test_next_after_is_strictly_after_and_in_utc() -> None:
    trigger = CronTrigger("0 3 * * *", "Europe/Paris")
    on_a_match = datetime.fromisoformat("2026-06-01T03:00:00+02:00")

    following = trigger.next_after(on_a_match)

    assert following == datetime.fromisoformat("2026-06-02T03:00:00+02:00")
    assert following is not None and following.tzinfo is UTC


def test_next_after_ignores_seconds_of_the_instant() -> None:
    trigger = CronTrigger("*/5 * * * *")

    assert trigger.next_after(datetime(2026, 1, 1, 10, 4, 59, 999999, tzinfo=UTC)) == \
        datetime(2026, 1, 1, 10, 5, tzinfo=UTC)
    assert trigger.next_after(datetime(2026, 1, 1, 10, 5, 0, 1, tzinfo=UTC)) == \
        datetime(2026, 1, 1, 10, 10, tzinfo=UTC)


def test_next_after_accepts_any_aware_instant() -> None:
    trigger = CronTrigger("0 12 * * *", "UTC")
    in_tokyo = datetime(2026, 1, 1, 20, 0, tzinfo=timezone(timedelta(hours=9)))  # 11:00 UTC

    assert trigger.next_after(in_tokyo) == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_next_after_refuses_a_naive_instant() -> None:
    with pytest.raises(ConfigurationError, match="naive"):
        CronTrigger("0 3 * * *").next_after(datetime(2026, 1, 1))


def test_the_expression_is_evaluated_in_its_zone() -> None:
    trigger = CronTrigger("0 9 * * *", "Asia/Tokyo")

    assert trigger.next_after(datetime(2025, 12, 31, 12, tzinfo=UTC)) == \
        datetime(2026, 1, 1, 0, 0, tzinfo=UTC)  # 09:00 in Tokyo


def test_nothing_after_the_last_representable_date() -> None:
    assert CronTrigger("0 0 * * *").next_after(datetime(9999, 12, 31, 1, tzinfo=UTC)) is None


def test_one_trigger_gives_the_same_answers_from_many_threads() -> None:
    trigger = CronTrigger("*/7 1-22 * * 1-5", "Europe/Paris")
    starts = [datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=37 * i) for i in range(400)]
    expected = [trigger.next_after(start) for start in starts]
    results: dict[int, list[datetime | None]] = {}

    def work(index: int) -> None:
        results[index] = [trigger.next_after(start) for start in starts]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert all(answers == expected for answers in results.values())


# -- storage and registry ----------------------------------------------------------------------

def test_to_spec_and_from_params_round_trip() -> None:
    trigger = CronTrigger("30 2 * * 1-5", "Europe/Paris", day_or=False)

    spec = trigger.to_spec()
    rebuilt = CronTrigger.from_params(spec.params)

    assert spec == TriggerSpec(kind="cron", params={
        "expression": "30 2 * * 1-5", "timezone": "Europe/Paris", "day_or": False})
    assert rebuilt == trigger
    assert (rebuilt.expression, rebuilt.timezone, rebuilt.day_or) == \
        ("30 2 * * 1-5", "Europe/Paris", False)


def test_from_params_defaults_to_utc_and_or_semantics() -> None:
    trigger = CronTrigger.from_params({"expression": "0 3 * * *"})

    assert (trigger.timezone, trigger.day_or) == ("UTC", True)


def test_register_adds_the_cron_kind_to_a_copy_of_the_registry() -> None:
    base = TriggerRegistry.default()

    registry = register(base)
    trigger = registry.build(TriggerSpec(kind="cron", params={
        "expression": "0 3 * * *", "timezone": "Europe/Paris", "day_or": True}))

    assert isinstance(trigger, CronTrigger)
    assert "cron" in registry.kinds and "cron" not in base.kinds


def test_describe_names_the_expression_zone_and_day_semantics() -> None:
    assert CronTrigger("0 3 * * *", "Europe/Paris").describe() == "cron 0 3 * * * Europe/Paris"
    assert "AND" in CronTrigger("0 3 13 * 5", day_or=False).describe()


# -- wildcard or fixed -------------------------------------------------------------------------

@pytest.mark.parametrize(("expression", "wildcard"), [
    ("*/15 * * * *", True),
    ("0 * * * *", True),
    ("* 3 * * *", True),
    ("*/5 2 * * *", True),
    ("30 2 * * *", False),
    ("0-59/5 2 * * *", False),
    ("0 0,12 * * *", False),
    ("@hourly", True),
    ("@daily", False),
], ids=lambda value: str(value))
def test_a_job_is_wildcard_when_its_minute_or_hour_field_starts_with_a_star(
    expression: str, wildcard: bool,
) -> None:
    assert CronTrigger(expression).wildcard is wildcard


def test_macros_stand_for_their_five_field_expressions() -> None:
    start = datetime(2026, 1, 1, 12, tzinfo=UTC)
    for macro, expression in (("@daily", "0 0 * * *"), ("@weekly", "0 0 * * 0"),
                              ("@monthly", "0 0 1 * *"), ("@yearly", "0 0 1 1 *"),
                              ("@hourly", "0 * * * *")):
        assert CronTrigger(macro).next_after(start) == CronTrigger(expression).next_after(start)


# -- day-of-month with day-of-week -------------------------------------------------------------

def test_day_of_month_or_day_of_week_by_default() -> None:
    trigger = CronTrigger("0 0 13 * 5")  # the 13th, or any Friday

    assert run_dates(trigger, datetime(2026, 1, 1, tzinfo=UTC), 5) == [
        "2026-01-02", "2026-01-09", "2026-01-13", "2026-01-16", "2026-01-23"]


def test_day_or_false_gives_celerys_and_semantics() -> None:
    trigger = CronTrigger("0 0 13 * 5", day_or=False)  # Friday the 13th only

    assert run_dates(trigger, datetime(2026, 1, 1, tzinfo=UTC), 4) == [
        "2026-02-13", "2026-03-13", "2026-11-13", "2027-08-13"]


def test_a_stepped_day_of_month_counts_as_restricted() -> None:
    # POSIX semantics: */10 restricts the day of month, so it is ORed with Mondays.
    trigger = CronTrigger("0 0 */10 * 1")

    assert run_dates(trigger, datetime(2026, 1, 1, tzinfo=UTC), 7) == [
        "2026-01-05", "2026-01-11", "2026-01-12", "2026-01-19", "2026-01-21", "2026-01-26",
        "2026-01-31"]


@pytest.mark.parametrize("day_or", [True, False])
def test_a_star_day_field_leaves_the_other_alone(day_or: bool) -> None:
    mondays = CronTrigger("0 0 * * 1", day_or=day_or)
    firsts = CronTrigger("0 0 1 * *", day_or=day_or)
    start = datetime(2026, 1, 1, tzinfo=UTC)

    assert run_dates(mondays, start, 3) == ["2026-01-05", "2026-01-12", "2026-01-19"]
    assert run_dates(firsts, start, 3) == ["2026-02-01", "2026-03-01", "2026-04-01"]


# -- refusals ----------------------------------------------------------------------------------

def problems_of(*args: object, **kwargs: object) -> tuple[str, ...]:
    with pytest.raises(ConfigurationError) as raised:
        CronTrigger(*args, **kwargs)  # type: ignore[arg-type]
    return raised.value.problems


@pytest.mark.parametrize("expression", [
    "61 * * * *", "* 24 * * *", "* * 32 * *", "* * * 13 *", "*/0 * * * *", "a b c d e",
    "1,,2 * * * *",
], ids=lambda value: str(value))
def test_an_invalid_expression_is_refused_naming_the_field(expression: str) -> None:
    problems = problems_of(expression)

    assert len(problems) == 1
    assert problems[0].startswith("cron expression:")
    assert repr(expression) in problems[0]
    assert "e.g. '30 2 * * *'" in problems[0]


@pytest.mark.parametrize(("expression", "hint"), [
    ("0 0 * * * *", "seconds"),
    ("0 0 * * * * 2026", "seconds"),
    ("0 0 * *", "4 fields"),
    ("", "0 fields"),
    ("@reboot", "1 fields"),
], ids=["six-fields", "seven-fields", "four-fields", "empty", "reboot"])
def test_only_five_fields_are_accepted(expression: str, hint: str) -> None:
    problems = problems_of(expression)

    assert problems[0].startswith("cron expression:")
    assert hint in problems[0]


@pytest.mark.parametrize("expression", ["R * * * *", "H 3 * * *", "0 H(0-5) * * *",
                                        "0 3 * * r"])
def test_random_and_hashed_values_are_refused(expression: str) -> None:
    problems = problems_of(expression)

    assert problems[0].startswith("cron expression:")
    assert "offset or jitter" in problems[0]


def test_month_and_weekday_names_are_not_mistaken_for_random_values() -> None:
    assert CronTrigger("0 3 * mar fri").next_after(datetime(2026, 1, 1, tzinfo=UTC)) == \
        datetime(2026, 3, 6, 3, tzinfo=UTC)


def test_an_expression_that_never_matches_is_refused() -> None:
    problems = problems_of("0 0 30 2 *")

    assert problems[0].startswith("cron expression:")
    assert "never matches" in problems[0]


def test_an_unknown_zone_is_refused_with_the_likely_correction() -> None:
    problems = problems_of("0 3 * * *", "Europe/Pariss")

    assert problems == (
        "timezone: unknown zone 'Europe/Pariss'; use an IANA name such as 'Europe/Paris'",
    )


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "", "../../etc/passwd", "Europe"])
def test_an_unusable_zone_name_is_refused_naming_the_field(zone: str) -> None:
    problems = problems_of("0 3 * * *", zone)

    assert len(problems) == 1
    assert problems[0].startswith("timezone:")
    assert "IANA" in problems[0]


def test_a_bad_expression_and_a_bad_zone_are_reported_together() -> None:
    problems = problems_of("61 * * * *", "Europe/Pariss")

    assert [p.split(":")[0] for p in problems] == ["cron expression", "timezone"]


def test_from_params_reports_every_bad_parameter_at_once() -> None:
    with pytest.raises(ConfigurationError) as raised:
        CronTrigger.from_params({"timezone": 3, "day_or": "yes"})

    assert [p.split(":")[0] for p in raised.value.problems] == \
        ["cron expression", "timezone", "day_or"]
