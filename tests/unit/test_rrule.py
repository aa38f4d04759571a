"""RRuleTrigger: RFC 5545 rules in a zone, with cron's rules across daylight-saving changes."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from dateutil.rrule import rrulestr
from hypothesis import given, settings
from hypothesis import strategies as st

from goatbeat_celery.config import base_registry
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.spec import TriggerSpec
from goatbeat_celery.cron import CronTrigger
from goatbeat_celery.rrule import RRuleTrigger, with_start

from .test_cron_dst import TRANSITIONS

UTC = timezone.utc


def walk(trigger: RRuleTrigger | CronTrigger, start: datetime, end: datetime) -> list[datetime]:
    found, cursor = [], start
    while (following := trigger.next_after(cursor)) is not None and following < end:
        assert following > cursor and following.tzinfo is UTC
        found.append(following)
        cursor = following
    return found


#: cron expressions and the recurrence rules meaning the same, fixed and wildcard jobs alike.
SAME = [
    ("30 2 * * *", "FREQ=DAILY;BYHOUR=2;BYMINUTE=30"),
    ("0,30 2,3 * * *", "FREQ=DAILY;BYHOUR=2,3;BYMINUTE=0,30"),
    ("0 * * * *", "FREQ=HOURLY;BYMINUTE=0"),
    ("*/15 * * * *", "FREQ=MINUTELY;INTERVAL=15"),
    ("*/30 2 * * *", "FREQ=MINUTELY;INTERVAL=30;BYHOUR=2"),
    ("45 1 * * *", "FREQ=DAILY;BYHOUR=1;BYMINUTE=45"),
]


@pytest.mark.parametrize(("zone", "instant", "before", "after"), TRANSITIONS,
                         ids=[f"{zone}-{instant[:10]}" for zone, instant, _, _ in TRANSITIONS])
@pytest.mark.parametrize(("expression", "rule"), SAME, ids=[e for e, _ in SAME])
def test_a_rule_runs_as_the_same_cron_job_across_each_transition(
        zone: str, instant: str, before: float, after: float, expression: str, rule: str) -> None:
    at = datetime.fromisoformat(instant)
    start, end = at - timedelta(days=1), at + timedelta(days=1)
    trigger = RRuleTrigger(f"DTSTART;TZID={zone}:20260101T000000\nRRULE:{rule}", zone)

    assert walk(trigger, start, end) == walk(CronTrigger(expression, zone), start, end)


def test_paris_fixed_rule_in_the_spring_gap_runs_once_when_the_gap_ends() -> None:
    trigger = RRuleTrigger("DTSTART;TZID=Europe/Paris:20260101T023000\nRRULE:FREQ=DAILY",
                           "Europe/Paris")
    found = walk(trigger, datetime.fromisoformat("2026-03-28T00:00+00:00"),
                 datetime.fromisoformat("2026-03-31T00:00+00:00"))
    assert [f.astimezone(trigger.zone).isoformat() for f in found] == [
        "2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"]


def test_paris_hourly_rule_runs_on_both_passes_of_the_autumn_overlap() -> None:
    trigger = RRuleTrigger("DTSTART;TZID=Europe/Paris:20260101T000000\nRRULE:FREQ=HOURLY",
                           "Europe/Paris")
    found = walk(trigger, datetime.fromisoformat("2026-10-25T01:30+02:00"),
                 datetime.fromisoformat("2026-10-25T03:30+01:00"))
    assert [f.astimezone(trigger.zone).isoformat() for f in found] == [
        "2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T03:00:00+01:00"]


def test_second_tuesdays_last_weekdays_and_exdate() -> None:
    every_other = RRuleTrigger("DTSTART;TZID=Europe/Paris:20260106T090000\n"
                               "RRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=TU\n"
                               "EXDATE;TZID=Europe/Paris:20260120T090000", "Europe/Paris")
    last_weekday = RRuleTrigger("DTSTART:20260101T180000\n"
                                "RRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;COUNT=2",
                                "UTC")
    start = datetime(2026, 1, 1, tzinfo=UTC)

    assert walk(every_other, start, datetime(2026, 2, 18, tzinfo=UTC)) == [
        datetime(2026, 1, 6, 8, tzinfo=UTC), datetime(2026, 2, 3, 8, tzinfo=UTC),
        datetime(2026, 2, 17, 8, tzinfo=UTC)]
    assert walk(last_weekday, start, datetime(2027, 1, 1, tzinfo=UTC)) == [
        datetime(2026, 1, 30, 18, tzinfo=UTC), datetime(2026, 2, 27, 18, tzinfo=UTC)]


def test_until_in_utc_is_the_instant_it_names() -> None:
    trigger = RRuleTrigger("DTSTART;TZID=Europe/Paris:20260101T090000\n"
                           "RRULE:FREQ=DAILY;UNTIL=20260103T080000Z", "Europe/Paris")
    assert walk(trigger, datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)) \
        == [datetime(2026, 1, d, 8, tzinfo=UTC) for d in (1, 2, 3)]


def test_every_problem_is_reported_at_once_naming_the_field() -> None:
    with pytest.raises(ConfigurationError) as caught:
        RRuleTrigger("RRULE:INTERVAL=2\nRRULE:FREQ=DAILY;COUNT=2;UNTIL=20270101T000000Z",
                     "Europe/Pariss")
    text = "\n".join(caught.value.problems)
    for expected in ("timezone: unknown zone", "rule: DTSTART missing", "rule: FREQ missing",
                     "rule: COUNT and UNTIL"):
        assert expected in text


def test_a_bad_rule_text_and_a_foreign_tzid_are_refused() -> None:
    for rule in ("DTSTART:20260101T000000\nRRULE:FREQ=SOMETIMES",
                 "DTSTART;TZID=Asia/Tokyo:20260101T000000\nRRULE:FREQ=DAILY"):
        with pytest.raises(ConfigurationError, match="rule:"):
            RRuleTrigger(rule, "Europe/Paris")


def test_the_registry_builds_it_from_its_stored_spec() -> None:
    rule = with_start("FREQ=DAILY;BYHOUR=9", "Europe/Paris",
                      datetime(2026, 3, 1, 23, 30, tzinfo=UTC))
    assert rule.startswith("DTSTART;TZID=Europe/Paris:20260302T000000\n")
    trigger = base_registry().build(TriggerSpec(kind="rrule", params={
        "rule": rule, "timezone": "Europe/Paris"}))
    assert trigger.next_after(datetime(2026, 3, 2, tzinfo=UTC)) == datetime(2026, 3, 2, 8,
                                                                             tzinfo=UTC)


def test_a_minutely_rule_years_after_its_start_answers_from_its_own_grid() -> None:
    trigger = RRuleTrigger("DTSTART:20260101T000700\nRRULE:FREQ=MINUTELY;INTERVAL=90", "UTC")
    after = datetime(2035, 6, 1, 12, 0, 30, tzinfo=UTC)
    grid = datetime(2026, 1, 1, 0, 7, tzinfo=UTC)
    expected = grid + ((after - grid) // timedelta(minutes=90) + 1) * timedelta(minutes=90)
    assert trigger.next_after(after) == expected


RULES = ["FREQ=DAILY;BYHOUR=9;BYMINUTE=15", "FREQ=MINUTELY;INTERVAL=90;BYHOUR=8,9,10,11,12,"
         "13,14,15,16,17;BYDAY=MO,TU,WE,TH,FR", "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU",
         "FREQ=MONTHLY;BYDAY=-1FR", "FREQ=HOURLY;INTERVAL=5", "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29"]


@settings(max_examples=200, deadline=None)
@given(rule=st.sampled_from(RULES), zone=st.sampled_from(["UTC", "Asia/Tokyo", "Asia/Kolkata"]),
       moment=st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2040, 1, 1)))
def test_next_after_is_dateutils_answer_where_there_is_no_daylight_saving(
        rule: str, zone: str, moment: datetime) -> None:
    text = f"DTSTART:20260101T000000\nRRULE:{rule}"
    tz = ZoneInfo(zone)
    expected = rrulestr(text).after(moment, inc=False)

    found = RRuleTrigger(text, zone).next_after(moment.replace(tzinfo=tz))

    assert found == expected.replace(tzinfo=tz).astimezone(UTC)
