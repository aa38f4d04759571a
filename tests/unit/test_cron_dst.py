"""CronTrigger across daylight-saving transitions, pinned to real transitions in several zones.

Expected occurrences are written as local ISO-8601 instants with their offset, so the pass of a
repeated wall time (``02:00+02:00`` then ``02:00+01:00``) is visible in the test itself.

Rules (Vixie cron / cronie): *wildcard* jobs (minute or hour field starting with ``*``) run at
every real instant whose wall time matches; *fixed* jobs run once per wall-clock match — a match
in a spring-forward gap at the first instant after the gap, a match in a fall-back overlap on
its first pass only.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goatbeat_celery.cron import CronTrigger

from .cron_oracle import expected_occurrences

UTC = timezone.utc


def occurrences(trigger: CronTrigger, start: str, end: str) -> list[str]:
    """Iterate next_after from ``start`` while before ``end``; local ISO strings."""
    zone = ZoneInfo(trigger.timezone)
    cursor = datetime.fromisoformat(start)
    stop = datetime.fromisoformat(end)
    found: list[str] = []
    while True:
        following = trigger.next_after(cursor)
        assert following is not None
        assert following > cursor, "next_after must move strictly forward"
        assert following.tzinfo is UTC
        if following >= stop:
            return found
        found.append(following.astimezone(zone).isoformat())
        cursor = following


def cron(expression: str, zone: str, *, day_or: bool = True) -> CronTrigger:
    return CronTrigger(expression, zone, day_or=day_or)


# -- the transitions these tests rely on -------------------------------------------------------

#: (zone, instant of the transition in UTC, offset before, offset after)
TRANSITIONS = [
    ("Europe/Paris", "2026-03-29T01:00:00+00:00", 1, 2),
    ("Europe/Paris", "2026-10-25T01:00:00+00:00", 2, 1),
    ("America/New_York", "2026-03-08T07:00:00+00:00", -5, -4),
    ("America/New_York", "2026-11-01T06:00:00+00:00", -4, -5),
    ("Australia/Lord_Howe", "2026-04-04T15:00:00+00:00", 11, 10.5),
    ("Australia/Lord_Howe", "2026-10-03T15:30:00+00:00", 10.5, 11),
    ("America/Havana", "2026-03-08T05:00:00+00:00", -5, -4),
    ("America/Havana", "2026-11-01T05:00:00+00:00", -4, -5),
    ("America/Santiago", "2026-04-05T03:00:00+00:00", -3, -4),
    ("America/Santiago", "2026-09-06T04:00:00+00:00", -4, -3),
]


@pytest.mark.parametrize(
    ("zone", "instant", "before", "after"), TRANSITIONS,
    ids=[f"{zone}-{instant[:10]}" for zone, instant, _, _ in TRANSITIONS],
)
def test_the_pinned_transitions_are_real(zone: str, instant: str, before: float,
                                         after: float) -> None:
    # If the installed tzdata ever changes these rules, the cases below need new dates.
    at = datetime.fromisoformat(instant)
    tz = ZoneInfo(zone)
    second = timedelta(seconds=1)
    assert (at - second).astimezone(tz).utcoffset() == timedelta(hours=before)
    assert at.astimezone(tz).utcoffset() == timedelta(hours=after)


# -- Europe/Paris: 2026-03-29 02:00 CET -> 03:00 CEST, 2026-10-25 03:00 CEST -> 02:00 CET --------

def test_paris_fixed_job_in_the_spring_gap_runs_once_when_the_gap_ends() -> None:
    assert occurrences(cron("30 2 * * *", "Europe/Paris"),
                       "2026-03-28T00:00+00:00", "2026-03-31T00:00+00:00") == [
        "2026-03-28T02:30:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
    ]


def test_paris_fixed_matches_in_and_right_after_the_gap_run_once_together() -> None:
    # 02:00 and 02:30 do not exist and 03:00 is the first instant after the gap: one run.
    assert occurrences(cron("0,30 2,3 * * *", "Europe/Paris"),
                       "2026-03-29T00:00+01:00", "2026-03-29T12:00+02:00") == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-29T03:30:00+02:00",
    ]


def test_paris_hourly_wildcard_job_skips_the_hour_that_does_not_exist() -> None:
    assert occurrences(cron("0 * * * *", "Europe/Paris"),
                       "2026-03-28T23:30+01:00", "2026-03-29T05:30+02:00") == [
        "2026-03-29T00:00:00+01:00",
        "2026-03-29T01:00:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-29T04:00:00+02:00",
        "2026-03-29T05:00:00+02:00",
    ]


def test_paris_quarter_hour_wildcard_job_keeps_its_real_rhythm_through_the_gap() -> None:
    assert occurrences(cron("*/15 * * * *", "Europe/Paris"),
                       "2026-03-29T01:20+01:00", "2026-03-29T03:20+02:00") == [
        "2026-03-29T01:30:00+01:00",
        "2026-03-29T01:45:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-29T03:15:00+02:00",
    ]


def test_paris_wildcard_minutes_in_a_fixed_hour_do_not_run_in_the_gap() -> None:
    # The minute field starts with '*': a wildcard job, whose wall times in the gap never occur.
    assert occurrences(cron("*/30 2 * * *", "Europe/Paris"),
                       "2026-03-28T00:00+00:00", "2026-03-31T00:00+00:00") == [
        "2026-03-28T02:00:00+01:00",
        "2026-03-28T02:30:00+01:00",
        "2026-03-30T02:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
    ]


def test_paris_fixed_job_in_the_autumn_overlap_runs_on_the_first_pass_only() -> None:
    assert occurrences(cron("30 2 * * *", "Europe/Paris"),
                       "2026-10-24T00:00+00:00", "2026-10-27T00:00+00:00") == [
        "2026-10-24T02:30:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:30:00+01:00",
    ]


def test_paris_fixed_job_asked_during_the_second_pass_waits_for_the_next_day() -> None:
    trigger = cron("30 2 * * *", "Europe/Paris")

    following = trigger.next_after(datetime.fromisoformat("2026-10-25T02:10:00+01:00"))

    assert following == datetime.fromisoformat("2026-10-26T02:30:00+01:00")


def test_paris_fixed_job_asked_during_the_first_pass_runs_later_that_pass() -> None:
    trigger = cron("45 2 * * *", "Europe/Paris")

    following = trigger.next_after(datetime.fromisoformat("2026-10-25T02:10:00+02:00"))

    assert following == datetime.fromisoformat("2026-10-25T02:45:00+02:00")


def test_paris_hourly_wildcard_job_runs_every_real_hour_through_the_overlap() -> None:
    assert occurrences(cron("0 * * * *", "Europe/Paris"),
                       "2026-10-25T00:30+02:00", "2026-10-25T04:30+01:00") == [
        "2026-10-25T01:00:00+02:00",
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:00:00+01:00",
        "2026-10-25T03:00:00+01:00",
        "2026-10-25T04:00:00+01:00",
    ]


def test_paris_quarter_hour_wildcard_job_runs_on_both_passes_of_the_overlap() -> None:
    assert occurrences(cron("*/15 * * * *", "Europe/Paris"),
                       "2026-10-25T01:50+02:00", "2026-10-25T03:10+01:00") == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:15:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-10-25T02:45:00+02:00",
        "2026-10-25T02:00:00+01:00",
        "2026-10-25T02:15:00+01:00",
        "2026-10-25T02:30:00+01:00",
        "2026-10-25T02:45:00+01:00",
        "2026-10-25T03:00:00+01:00",
    ]


@pytest.mark.parametrize("start", [
    "2026-10-25T02:20:00+02:00",  # first pass, between two matches
    "2026-10-25T02:30:00+02:00",  # first pass, on a match
    "2026-10-25T02:59:59.999999+02:00",  # the last instant of the first pass
    "2026-10-25T02:00:00+01:00",  # the transition itself
    "2026-10-25T02:40:00+01:00",  # second pass
], ids=["first-pass", "first-pass-on-match", "end-of-first-pass", "transition", "second-pass"])
def test_paris_wildcard_job_asked_anywhere_in_the_overlap_answers_the_next_real_match(
    start: str,
) -> None:
    trigger = cron("*/30 * * * *", "Europe/Paris")
    instant = datetime.fromisoformat(start)
    expected = expected_occurrences("*/30 * * * *", ZoneInfo("Europe/Paris"),
                                    instant, instant + timedelta(hours=2))

    assert trigger.next_after(instant) == expected[0]


# -- America/New_York: 2026-03-08 02:00 EST -> 03:00 EDT, 2026-11-01 02:00 EDT -> 01:00 EST ------

def test_new_york_fixed_job_in_the_spring_gap_runs_at_three() -> None:
    assert occurrences(cron("30 2 * * *", "America/New_York"),
                       "2026-03-07T00:00-05:00", "2026-03-10T00:00-04:00") == [
        "2026-03-07T02:30:00-05:00",
        "2026-03-08T03:00:00-04:00",
        "2026-03-09T02:30:00-04:00",
    ]


def test_new_york_fixed_job_in_the_autumn_overlap_runs_once() -> None:
    assert occurrences(cron("30 1 * * *", "America/New_York"),
                       "2026-10-31T00:00-04:00", "2026-11-03T00:00-05:00") == [
        "2026-10-31T01:30:00-04:00",
        "2026-11-01T01:30:00-04:00",
        "2026-11-02T01:30:00-05:00",
    ]


def test_new_york_half_hour_wildcard_job_runs_on_both_passes() -> None:
    assert occurrences(cron("*/30 * * * *", "America/New_York"),
                       "2026-11-01T00:15-04:00", "2026-11-01T02:15-05:00") == [
        "2026-11-01T00:30:00-04:00",
        "2026-11-01T01:00:00-04:00",
        "2026-11-01T01:30:00-04:00",
        "2026-11-01T01:00:00-05:00",
        "2026-11-01T01:30:00-05:00",
        "2026-11-01T02:00:00-05:00",
    ]


def test_new_york_hourly_wildcard_job_skips_two_oclock_in_spring() -> None:
    assert occurrences(cron("0 * * * *", "America/New_York"),
                       "2026-03-08T00:30-05:00", "2026-03-08T04:30-04:00") == [
        "2026-03-08T01:00:00-05:00",
        "2026-03-08T03:00:00-04:00",
        "2026-03-08T04:00:00-04:00",
    ]


# -- Australia/Lord_Howe: a 30-minute shift --------------------------------------------------
# 2026-04-05 02:00 +11 -> 01:30 +10:30 (01:30-02:00 repeats);
# 2026-10-04 02:00 +10:30 -> 02:30 +11 (02:00-02:30 does not exist).

def test_lord_howe_quarter_hour_wildcard_job_repeats_only_the_half_hour_overlap() -> None:
    assert occurrences(cron("*/15 * * * *", "Australia/Lord_Howe"),
                       "2026-04-05T01:10+11:00", "2026-04-05T02:10+10:30") == [
        "2026-04-05T01:15:00+11:00",
        "2026-04-05T01:30:00+11:00",
        "2026-04-05T01:45:00+11:00",
        "2026-04-05T01:30:00+10:30",
        "2026-04-05T01:45:00+10:30",
        "2026-04-05T02:00:00+10:30",
    ]


def test_lord_howe_fixed_job_in_the_half_hour_overlap_runs_once() -> None:
    assert occurrences(cron("45 1 * * *", "Australia/Lord_Howe"),
                       "2026-04-04T00:00+11:00", "2026-04-07T00:00+10:30") == [
        "2026-04-04T01:45:00+11:00",
        "2026-04-05T01:45:00+11:00",
        "2026-04-06T01:45:00+10:30",
    ]


def test_lord_howe_hourly_wildcard_job_is_unaffected_by_the_half_hour_overlap() -> None:
    # No whole hour falls in 01:30-02:00, so nothing repeats.
    assert occurrences(cron("0 * * * *", "Australia/Lord_Howe"),
                       "2026-04-05T00:30+11:00", "2026-04-05T03:30+10:30") == [
        "2026-04-05T01:00:00+11:00",
        "2026-04-05T02:00:00+10:30",
        "2026-04-05T03:00:00+10:30",
    ]


@pytest.mark.parametrize("expression", ["0 2 * * *", "15 2 * * *"])
def test_lord_howe_fixed_job_in_the_half_hour_gap_runs_at_half_past_two(expression: str) -> None:
    minute = expression.split()[0].zfill(2)
    assert occurrences(cron(expression, "Australia/Lord_Howe"),
                       "2026-10-03T00:00+10:30", "2026-10-06T00:00+11:00") == [
        f"2026-10-03T02:{minute}:00+10:30",
        "2026-10-04T02:30:00+11:00",
        f"2026-10-05T02:{minute}:00+11:00",
    ]


def test_lord_howe_quarter_hour_wildcard_job_skips_the_half_hour_gap() -> None:
    assert occurrences(cron("*/15 * * * *", "Australia/Lord_Howe"),
                       "2026-10-04T01:40+10:30", "2026-10-04T03:00+11:00") == [
        "2026-10-04T01:45:00+10:30",
        "2026-10-04T02:30:00+11:00",
        "2026-10-04T02:45:00+11:00",
    ]


# -- America/Havana: transitions at midnight ---------------------------------------------------
# 2026-03-08 00:00 CST -> 01:00 CDT; 2026-11-01 01:00 CDT -> 00:00 CST.

def test_havana_midnight_job_on_the_day_midnight_is_skipped_runs_at_one() -> None:
    assert occurrences(cron("0 0 * * *", "America/Havana"),
                       "2026-03-06T12:00-05:00", "2026-03-09T12:00-04:00") == [
        "2026-03-07T00:00:00-05:00",
        "2026-03-08T01:00:00-04:00",
        "2026-03-09T00:00:00-04:00",
    ]


def test_havana_job_for_one_date_runs_on_that_date_even_when_its_time_is_skipped() -> None:
    # Only March 8th at 00:30: in 2026 that wall time does not exist, in 2027 it does.
    assert occurrences(cron("30 0 8 3 *", "America/Havana"),
                       "2026-01-01T00:00-05:00", "2028-01-01T00:00-05:00") == [
        "2026-03-08T01:00:00-04:00",
        "2027-03-08T00:30:00-05:00",
    ]


def test_havana_midnight_job_runs_once_when_midnight_repeats() -> None:
    assert occurrences(cron("0 0 * * *", "America/Havana"),
                       "2026-10-30T12:00-04:00", "2026-11-02T12:00-05:00") == [
        "2026-10-31T00:00:00-04:00",
        "2026-11-01T00:00:00-04:00",
        "2026-11-02T00:00:00-05:00",
    ]


def test_havana_hourly_wildcard_job_across_both_midnight_transitions() -> None:
    assert occurrences(cron("0 * * * *", "America/Havana"),
                       "2026-03-07T22:30-05:00", "2026-03-08T02:30-04:00") == [
        "2026-03-07T23:00:00-05:00",
        "2026-03-08T01:00:00-04:00",
        "2026-03-08T02:00:00-04:00",
    ]
    assert occurrences(cron("0 * * * *", "America/Havana"),
                       "2026-10-31T22:30-04:00", "2026-11-01T01:30-05:00") == [
        "2026-10-31T23:00:00-04:00",
        "2026-11-01T00:00:00-04:00",
        "2026-11-01T00:00:00-05:00",
        "2026-11-01T01:00:00-05:00",
    ]


# -- America/Santiago: clocks change at 24:00, so the overlap ends a calendar day --------------
# 2026-04-05 00:00 -03 -> 2026-04-04 23:00 -04; 2026-09-06 00:00 -04 -> 01:00 -03.

def test_santiago_overlap_repeats_the_last_hour_of_the_day() -> None:
    assert occurrences(cron("30 23 * * *", "America/Santiago"),
                       "2026-04-03T12:00-03:00", "2026-04-06T12:00-04:00") == [
        "2026-04-03T23:30:00-03:00",
        "2026-04-04T23:30:00-03:00",
        "2026-04-05T23:30:00-04:00",
    ]
    assert occurrences(cron("*/30 * * * *", "America/Santiago"),
                       "2026-04-04T22:45-03:00", "2026-04-05T00:15-04:00") == [
        "2026-04-04T23:00:00-03:00",
        "2026-04-04T23:30:00-03:00",
        "2026-04-04T23:00:00-04:00",
        "2026-04-04T23:30:00-04:00",
        "2026-04-05T00:00:00-04:00",
    ]


def test_santiago_midnight_job_on_the_skipped_midnight_runs_at_one() -> None:
    assert occurrences(cron("0 0 * * *", "America/Santiago"),
                       "2026-09-05T12:00-04:00", "2026-09-07T12:00-03:00") == [
        "2026-09-06T01:00:00-03:00",
        "2026-09-07T00:00:00-03:00",
    ]


# -- Asia/Kolkata: no daylight saving --------------------------------------------------------

def test_kolkata_has_no_transitions_so_every_day_is_alike() -> None:
    found = occurrences(cron("30 2 * * *", "Asia/Kolkata"),
                        "2026-01-01T00:00+05:30", "2027-01-01T00:00+05:30")

    assert len(found) == 365
    assert all(stamp.endswith("T02:30:00+05:30") for stamp in found)


def test_kolkata_quarter_hour_job_is_evenly_spaced_on_european_transition_days() -> None:
    trigger = cron("*/15 * * * *", "Asia/Kolkata")
    cursor = datetime.fromisoformat("2026-10-24T12:00+00:00")
    instants = []
    for _ in range(4 * 24 * 2):
        following = trigger.next_after(cursor)
        assert following is not None
        instants.append(following)
        cursor = following

    gaps = {later - earlier for earlier, later in zip(instants, instants[1:], strict=False)}
    assert gaps == {timedelta(minutes=15)}


# -- against the brute-force model -------------------------------------------------------------

ORACLE_CASES = [
    (zone, instant, expression)
    for zone, instant, _, _ in TRANSITIONS
    for expression in ("*/15 * * * *", "0 * * * *", "30 2 * * *", "0 0 * * *", "45 1 * * *",
                       "*/20 0-3 * * *", "0,30 1,2,23 * * *", "10 * * * *", "59 23 * * *")
]


@pytest.mark.parametrize(
    ("zone", "instant", "expression"), ORACLE_CASES,
    ids=[f"{zone}-{instant[:10]}-{expression.replace(' ', '_')}"
         for zone, instant, expression in ORACLE_CASES],
)
def test_iterating_across_a_transition_matches_the_brute_force_model(
    zone: str, instant: str, expression: str,
) -> None:
    transition = datetime.fromisoformat(instant)
    start, end = transition - timedelta(days=2), transition + timedelta(days=2)
    trigger = cron(expression, zone)
    found = []
    cursor = start
    while True:
        following = trigger.next_after(cursor)
        assert following is not None and following > cursor
        if following > end:
            break
        found.append(following)
        cursor = following

    assert found == expected_occurrences(expression, ZoneInfo(zone), start, end)


def _field(values: st.SearchStrategy[int], *, allow_star: bool) -> st.SearchStrategy[str]:
    listed = st.lists(values, min_size=1, max_size=4, unique=True).map(
        lambda items: ",".join(str(v) for v in sorted(items)))
    options = [listed]
    if allow_star:
        options += [st.just("*"), st.integers(2, 30).map(lambda step: f"*/{step}")]
    return st.one_of(*options)


expressions = st.tuples(
    _field(st.integers(0, 59), allow_star=True),
    _field(st.integers(0, 23), allow_star=True),
    st.one_of(st.just("*"), _field(st.integers(1, 28), allow_star=False)),
    st.just("*"),
    st.one_of(st.just("*"), _field(st.integers(0, 6), allow_star=False)),
).map(" ".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    transition=st.sampled_from(TRANSITIONS),
    expression=expressions,
    day_or=st.booleans(),
    start_offset=st.integers(-6 * 3600 * 10**6, 6 * 3600 * 10**6),
)
def test_next_after_any_instant_near_a_transition_is_the_first_later_occurrence(
    transition: tuple[str, str, float, float], expression: str, day_or: bool,
    start_offset: int,
) -> None:
    zone, instant = transition[0], transition[1]
    start = datetime.fromisoformat(instant) + timedelta(microseconds=start_offset)
    trigger = cron(expression, zone, day_or=day_or)

    following = trigger.next_after(start)

    expected = expected_occurrences(expression, ZoneInfo(zone), start,
                                    start + timedelta(hours=8), day_or=day_or)
    if expected:
        assert following == expected[0]
    else:
        assert following is None or following > start + timedelta(hours=8)


# -- last, nearest-weekday and nth days across transitions -------------------------------------
def test_paris_last_sunday_job_meets_both_transitions_as_any_fixed_job() -> None:
    # Europe's clocks change on the last Sunday of March and October, at the job's hour.
    trigger = cron("30 2 * * 7L", "Europe/Paris")
    assert occurrences(trigger, "2026-03-01T00:00:00+01:00", "2026-11-01T00:00:00+01:00")[::7] == [
        "2026-03-29T03:00:00+02:00",  # 02:30 is in the gap: the first instant after it
        "2026-10-25T02:30:00+02:00",  # 02:30 comes twice: the first pass only
    ]


@pytest.mark.parametrize("expression", ["30 2 * * 0L", "30 2 * * sunL", "30 2 * * L0"])
def test_the_last_sunday_reads_the_same_in_each_spelling(expression: str) -> None:
    assert occurrences(cron(expression, "Europe/Paris"), "2026-10-01T00:00:00+02:00",
                       "2026-12-01T00:00:00+01:00") == [
        "2026-10-25T02:30:00+02:00", "2026-11-29T02:30:00+01:00"]


def test_new_york_first_sunday_fixed_job_runs_once_in_the_november_overlap() -> None:
    trigger = cron("30 1 * * 0#1", "America/New_York")
    assert occurrences(trigger, "2026-10-15T00:00:00-04:00", "2026-12-31T00:00:00-05:00") == [
        "2026-11-01T01:30:00-04:00", "2026-12-06T01:30:00-05:00"]


def test_new_york_first_sunday_wildcard_job_runs_on_both_passes() -> None:
    trigger = cron("*/30 1 * * sun#1", "America/New_York")
    assert occurrences(trigger, "2026-10-31T00:00:00-04:00", "2026-11-02T00:00:00-05:00") == [
        "2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00",
        "2026-11-01T01:00:00-05:00", "2026-11-01T01:30:00-05:00"]


def test_the_last_day_and_the_nearest_weekday_are_days_of_the_zone_not_of_utc() -> None:
    # 00:30 in Auckland is the previous day in UTC; 15 March 2026 is a Sunday.
    assert occurrences(cron("30 0 L * *", "Pacific/Auckland"), "2026-01-15T00:00:00+13:00",
                       "2026-04-01T00:00:00+13:00") == [
        "2026-01-31T00:30:00+13:00", "2026-02-28T00:30:00+13:00", "2026-03-31T00:30:00+13:00"]
    assert occurrences(cron("0 9 15W * *", "Pacific/Auckland"), "2026-03-01T00:00:00+13:00",
                       "2026-05-01T00:00:00+12:00") == [
        "2026-03-16T09:00:00+13:00", "2026-04-15T09:00:00+12:00"]
