"""Bad arguments to the schedules API, on every store: a ConfigurationError naming the argument
and what it takes (or ScheduleNotFound for a name no schedule can have), never a driver error,
a TypeError or a traceback from the database (a 500 on the web dashboard)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.types.errors import (
    BackfillNotFound,
    CalendarNotFound,
    ConfigurationError,
    GoatbeatError,
    ScheduleNotFound,
)
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.listing import RunOrderCursor

from .conftest import Store, StoreClock

RANGE = "from 1970-01-01T00:00:00Z to 9000-01-01T00:00:00Z"


@pytest.fixture
def api(store: Store) -> Schedules:
    schedules = Schedules(store)
    schedules.create("poll", "proj.tasks.poll", every=60)
    return schedules


def refused(call: Callable[[], Any]) -> list[str]:
    """The problems of the ConfigurationError ``call`` raises."""
    with pytest.raises(ConfigurationError) as raised:
        call()
    assert raised.value.problems, "refused without a reason"
    return list(raised.value.problems)


# -- list, history, backfills ---------------------------------------------------------------
@pytest.mark.parametrize(("arguments", "start", "accepted"), [
    ({"source": "bogus"}, "source: unknown source 'bogus'", "use one of: config, api"),
    ({"source": 5}, "source: unknown source 5", "use one of: config, api"),
    ({"order": "bogus"}, "order: unknown order 'bogus'", "use one of: name, next_run"),
    ({"limit": -1}, "limit: must be an integer from 1 to 1000000", "got -1"),
    ({"limit": 0}, "limit: must be an integer from 1 to 1000000", "or None for no limit"),
    ({"limit": "x"}, "limit: must be an integer from 1 to 1000000", "got 'x'"),
    ({"limit": 10**30}, "limit: must be an integer from 1 to 1000000", "got 1"),
    ({"limit": 2.5}, "limit: must be an integer from 1 to 1000000", "got 2.5"),
    ({"enabled": "yes"}, "enabled: expected true, false or None", "'yes'"),
    ({"set_aside": 1}, "set_aside: expected true, false or None", "got 1"),
    ({"prefix": "po\x00"}, "prefix: 'po\\x00' contains a NUL character", "remove it"),
    ({"prefix": 5}, "prefix: expected text", "got 5"),
    ({"tags": ["a\x00"]}, "tags: 'a\\x00' contains a NUL character", "remove it"),
    ({"tags": [5]}, "tags: expected text", "got 5"),
    ({"after": "p\x00"}, "after: 'p\\x00' contains a NUL character", "remove it"),
    ({"after": RunOrderCursor(next_run_at=None, name="poll")},
     "after: schedules listed by name page on from the last name seen", "RunOrderCursor"),
    ({"order": "next_run", "after": "poll"},
     "after: schedules listed by next_run page on from a RunOrderCursor", "'poll'"),
], ids=["source-unknown", "source-number", "order-unknown", "limit-negative", "limit-zero",
        "limit-text", "limit-huge", "limit-float", "enabled-text", "set-aside-number",
        "prefix-nul", "prefix-number", "tag-nul", "tag-number", "after-nul", "after-cursor",
        "after-name-by-next-run"])
def test_list_refuses_a_bad_argument_naming_it_and_what_it_takes(
        api: Schedules, arguments: dict[str, Any], start: str, accepted: str) -> None:
    problems = refused(lambda: api.list(**arguments))

    assert len(problems) == 1, problems
    assert problems[0].startswith(start), problems
    assert accepted in problems[0], problems


def test_list_names_every_bad_argument_at_once(api: Schedules) -> None:
    problems = refused(lambda: api.list(source="bogus", limit=-1, order="sideways"))

    assert [p.split(":")[0] for p in problems] == ["source", "order", "limit"]


def test_list_still_takes_what_it_documents(api: Schedules) -> None:
    api.create("tagged", "proj.tasks.poll", every=60, tags=["nightly"])

    assert [s.name for s in api.list(source="api", limit=1)] == ["poll"]
    assert [s.name for s in api.list(tags="nightly")] == ["tagged"]
    assert [s.name for s in api.list(enabled=True, set_aside=False, prefix="t")] == ["tagged"]
    first = api.list(order="next_run", limit=1)[0]
    cursor = RunOrderCursor(next_run_at=first.next_run_at, name=first.name)
    assert len(api.list(order="next_run", after=cursor)) == 1


@pytest.mark.parametrize("limit", [-1, 0, "x", 10**30, None, True],
                         ids=["negative", "zero", "text", "huge", "none", "bool"])
def test_history_refuses_a_bad_limit_naming_it(api: Schedules, limit: Any) -> None:
    problems = refused(lambda: api.history("poll", limit=limit))

    assert problems[0].startswith("limit: must be an integer from 1 to 1000000, got ")


@pytest.mark.parametrize(("arguments", "start"), [
    ({"limit": -1}, "limit: must be an integer from 1 to 1000000"),
    ({"limit": "x"}, "limit: must be an integer from 1 to 1000000"),
    ({"name": "po\x00"}, "name: 'po\\x00' contains a NUL character"),
    ({"active": "yes"}, "active: expected true, false or None"),
], ids=["limit-negative", "limit-text", "name-nul", "active-text"])
def test_backfills_refuses_a_bad_argument_naming_it(api: Schedules, arguments: dict[str, Any],
                                                    start: str) -> None:
    problems = refused(lambda: api.backfills(**arguments))

    assert problems[0].startswith(start), problems


# -- a name no schedule can have ------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda api: api.get("poll\x00"),
    lambda api: api.history("poll\x00"),
    lambda api: api.next_runs("poll\x00"),
    lambda api: api.update("poll\x00", every=30),
    lambda api: api.pause("poll\x00"),
    lambda api: api.resume("poll\x00"),
    lambda api: api.delete("poll\x00"),
    lambda api: api.run_now("poll\x00"),
], ids=["get", "history", "next_runs", "update", "pause", "resume", "delete", "run_now"])
def test_a_name_holding_a_nul_is_not_found(api: Schedules,
                                           call: Callable[[Schedules], Any]) -> None:
    with pytest.raises(ScheduleNotFound) as missing:
        call(api)

    assert "no schedule named 'poll\\x00'" in str(missing.value)
    assert [s.name for s in api.list()] == ["poll"]


NOT_TEXT = [0, None, b"poll", 1.5, ("poll",)]
NOT_TEXT_IDS = ["int", "none", "bytes", "float", "tuple"]


@pytest.mark.parametrize("name", NOT_TEXT, ids=NOT_TEXT_IDS)
@pytest.mark.parametrize("call", [
    lambda api, name: api.get(name),
    lambda api, name: api.history(name),
    lambda api, name: api.next_runs(name),
    lambda api, name: api.update(name, every=30),
    lambda api, name: api.pause(name),
    lambda api, name: api.pause(name, note="why", until=datetime(2100, 1, 1, tzinfo=UTC)),
    lambda api, name: api.resume(name),
    lambda api, name: api.delete(name),
    lambda api, name: api.run_now(name),
    lambda api, name: api.get_calendar(name),
    lambda api, name: api.observing(name),
    lambda api, name: api.update_calendar(name, dates=[]),
    lambda api, name: api.delete_calendar(name),
], ids=["get", "history", "next_runs", "update", "pause", "pause-until", "resume", "delete",
        "run_now", "get_calendar", "observing", "update_calendar", "delete_calendar"])
def test_a_name_that_is_not_text_is_refused_naming_it(
        api: Schedules, call: Callable[[Schedules, Any], Any], name: Any) -> None:
    """Sent to a database, ``0`` would fail against the text column (PostgreSQL) or match the
    schedule named ``'0'`` (SQLite's type affinity)."""
    api.create("0", "proj.tasks.poll", every=60)
    api.create_calendar("0")

    problems = refused(lambda: call(api, name))

    assert len(problems) == 1 and problems[0].startswith("name: expected a string, got "), (
        problems)
    assert [s.name for s in api.list()] == ["0", "poll"]
    assert api.get("0").spec.enabled and [c.name for c in api.list_calendars()] == ["0"]


@pytest.mark.parametrize(("name", "arguments", "field"), [
    (0, {"jitter": 1}, "name"),
    ("launch", {"offset": timedelta(days=-730120)}, "offset"),
    ("launch", {"jitter": timedelta.max}, "jitter"),
], ids=["integer-name-with-jitter", "offset-730120-days-back", "jitter-max"])
def test_a_one_off_with_a_bad_name_or_shift_is_refused_naming_the_field(
        store: Store, name: Any, arguments: dict[str, Any], field: str) -> None:
    """Found by the property test of Schedules.create: each used to raise from the check that
    a one-off's instant is still ahead (AttributeError, OverflowError)."""
    for at in (datetime(1980, 1, 1, tzinfo=UTC), store.now() + timedelta(days=1)):
        problems = refused(lambda at=at: Schedules(store).create(
            name, "proj.tasks.launch", at=at, **arguments))

        assert any(f": {field}: " in problem for problem in problems), problems
    assert store.list_schedules() == []


@pytest.mark.parametrize("call", [
    lambda api: api.get_calendar("days\x00"),
    lambda api: api.observing("days\x00"),
    lambda api: api.update_calendar("days\x00", dates=[]),
    lambda api: api.delete_calendar("days\x00"),
], ids=["get", "observing", "update", "delete"])
def test_a_calendar_name_holding_a_nul_is_not_found(api: Schedules,
                                                    call: Callable[[Schedules], Any]) -> None:
    with pytest.raises(CalendarNotFound):
        call(api)


@pytest.mark.parametrize("backfill_id", [-1, 0, "x", 10**30, 2**63, None, 2.5, True],
                         ids=["negative", "zero", "text", "huge", "past-bigint", "none", "float",
                              "bool"])
def test_a_backfill_id_no_backfill_can_have_is_not_found(api: Schedules,
                                                         backfill_id: Any) -> None:
    with pytest.raises(BackfillNotFound):
        api.get_backfill(backfill_id)
    with pytest.raises(BackfillNotFound):
        api.cancel_backfill(backfill_id)


@pytest.mark.parametrize(("field", "value"), [
    ("name", "poll\x00"), ("task", "proj.tasks\x00"), ("description", "a\x00b"),
    ("tags", ["a\x00"]), ("calendars", ["a\x00"]), ("options", {"queue": "q\x00"}),
    ("args", ["a\x00"]), ("kwargs", {"k\x00": 1}),
], ids=["name", "task", "description", "tags", "calendars", "queue", "args", "kwargs"])
def test_a_nul_in_any_text_field_is_refused_before_the_store(store: Store, field: str,
                                                             value: Any) -> None:
    arguments: dict[str, Any] = {"name": "new", "task": "proj.tasks.poll", field: value}

    problems = refused(lambda: Schedules(store).create(every=60, **arguments))

    assert any(field in p for p in problems), problems
    assert store.list_schedules() == []


# -- zones ------------------------------------------------------------------------------------
@pytest.mark.parametrize("zone", ["", "   "], ids=["empty", "blank"])
def test_an_empty_timezone_is_refused_not_read_as_the_apps(api: Schedules, zone: str) -> None:
    problems = refused(lambda: api.create("report", "proj.tasks.report", cron="0 7 * * *",
                                          timezone=zone))

    assert problems == ["timezone: is empty; give an IANA zone such as 'Europe/Paris', or "
                        "leave it out for the app's zone (UTC)"]
    problems = refused(lambda: api.update("poll", cron="0 7 * * *", timezone=zone))
    assert problems[0].startswith("timezone: is empty")


@pytest.mark.parametrize("trigger", [{"every": 60},
                                     {"at": datetime(2999, 1, 1, tzinfo=UTC)}],
                         ids=["every", "at"])
def test_a_timezone_without_cron_is_refused_not_ignored(api: Schedules,
                                                        trigger: dict[str, Any]) -> None:
    problems = refused(lambda: api.create("report", "proj.tasks.report",
                                          timezone="Europe/Paris", **trigger))

    assert len(problems) == 1
    assert problems[0].startswith("timezone: applies to cron and rrule schedules only")
    assert [s.name for s in api.list()] == ["poll"]
    problems = refused(lambda: api.update("poll", timezone="Europe/Paris", **trigger))
    assert problems[0].startswith("timezone: applies to cron and rrule schedules only")


# -- one-time schedules in the past -----------------------------------------------------------
def test_a_one_time_instant_in_the_past_is_refused_on_create(api: Schedules,
                                                             store: Store) -> None:
    past = store.now() - timedelta(minutes=5)

    for enabled in (True, False):
        problems = refused(lambda enabled=enabled: api.create(
            "launch", "proj.tasks.launch", at=past, enabled=enabled))
        assert len(problems) == 1
        assert problems[0].startswith(f"at: {past.isoformat()} is not after now (")
        assert "it would never run" in problems[0]
    assert [s.name for s in api.list()] == ["poll"]


def test_a_one_time_instant_in_the_past_is_refused_on_update(api: Schedules,
                                                             store: Store) -> None:
    launch = api.create("launch", "proj.tasks.launch", at=store.now() + timedelta(days=1))

    problems = refused(lambda: api.update("launch", at=store.now() - timedelta(days=1)))

    assert problems[0].startswith("at: ")
    assert api.get("launch") == launch
    # Other edits of a one-time schedule do not judge its instant again.
    assert api.update("launch", description="the sales open").spec.description


def test_a_one_time_instant_past_but_due_later_after_its_offset_is_accepted(
        api: Schedules, store: Store) -> None:
    created = api.create("launch", "proj.tasks.launch",
                         at=store.now() - timedelta(minutes=5), offset=timedelta(hours=1))

    assert created.next_run_at is not None and created.next_run_at > store.now()


# -- instants out of range ----------------------------------------------------------------
OUTSIDE = [datetime(9999, 3, 1, tzinfo=UTC), datetime(1, 1, 1, tzinfo=UTC),
           datetime(1, 1, 1, 1, tzinfo=UTC),
           datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5)))]
OUTSIDE_IDS = ["9999", "0001", "0001-01", "9999-minus-5h"]


@pytest.mark.parametrize("value", OUTSIDE, ids=OUTSIDE_IDS)
@pytest.mark.parametrize("field", ["start_at", "end_at"])
@pytest.mark.parametrize("trigger", [{"every": 60}, {"cron": "0 7 * * *"}],
                         ids=["every", "cron"])
def test_a_bound_out_of_range_is_refused_naming_the_field_and_the_range(
        api: Schedules, field: str, value: datetime, trigger: dict[str, Any]) -> None:
    problems = refused(lambda: api.create("report", "proj.tasks.report", **trigger,
                                          **{field: value}))

    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{field}: ") and RANGE in problems[0]
    problems = refused(lambda: api.update("poll", **{field: value}))
    assert problems[0].startswith(f"{field}: ") and RANGE in problems[0]


@pytest.mark.parametrize("value", OUTSIDE, ids=OUTSIDE_IDS)
def test_a_pause_until_out_of_range_is_refused(api: Schedules, value: datetime) -> None:
    problems = refused(lambda: api.pause("poll", until=value))

    assert problems[0].startswith("until: ") and RANGE in problems[0]
    assert api.get("poll").paused_until is None


@pytest.mark.parametrize("value", OUTSIDE, ids=OUTSIDE_IDS)
@pytest.mark.parametrize("end", ["start", "end"])
def test_a_backfill_range_out_of_range_is_refused(api: Schedules, store: Store,
                                                  end: str, value: datetime) -> None:
    ends = {"start": store.now() - timedelta(hours=1), "end": store.now()}
    ends[end] = value

    problems = refused(lambda: api.backfill("poll", ends["start"], ends["end"], dry_run=True))

    assert any(p.startswith(f"{end}: ") and RANGE in p for p in problems), problems


def test_a_schedule_near_the_upper_bound_previews_without_overflowing(api: Schedules) -> None:
    near = datetime(8999, 12, 31, 23, tzinfo=UTC)
    api.create("last", "proj.tasks.report", cron="0 * * * *", start_at=near)
    api.create("rare", "proj.tasks.report", every=timedelta(days=3650), start_at=near)

    assert api.next_runs("last", 10) == [near, datetime(9000, 1, 1, tzinfo=UTC)]
    assert api.next_runs("rare", 10) == []  # its next grid point is past the bound


# -- routing options --------------------------------------------------------------------------
@pytest.mark.parametrize("option", ["queue", "exchange", "routing_key"])
def test_a_routing_option_with_control_characters_is_refused(store: Store, option: str) -> None:
    problems = refused(lambda: Schedules(store).create(
        "poll", "proj.tasks.poll", every=60, options={option: "reports\x1b[2J"}))

    assert any(f"options.{option}: contains control or invisible characters" in p
               for p in problems), problems
    assert store.list_schedules() == []


def test_no_bad_argument_reaches_the_store_as_a_driver_error(api: Schedules) -> None:
    calls: list[Callable[[], Any]] = [
        lambda: api.list(source="bogus"), lambda: api.list(limit=-1),
        lambda: api.history("poll", limit="x"), lambda: api.get("a\x00"),
        lambda: api.list(prefix="a\x00"), lambda: api.backfills(limit=-1),
    ]
    for call in calls:
        with pytest.raises(GoatbeatError) as raised:
            call()
        assert isinstance(raised.value, (ConfigurationError, ScheduleNotFound)), raised.value


def test_an_edit_giving_a_one_off_its_own_past_instant_again_is_accepted(
        api: Schedules, store: Store, clock: StoreClock) -> None:
    """A form sends every field, the stored instant among them: once the one-off has run,
    editing its description must not be refused for an instant nobody changed."""
    at = (store.now() + timedelta(seconds=1)).replace(microsecond=0) + timedelta(seconds=1)
    api.create("launch", "proj.tasks.launch", at=at)
    clock.move_to(at + timedelta(seconds=1))

    edited = api.update("launch", at=at, description="the sales opened")

    assert edited.spec.description == "the sales opened"
    assert refused(lambda: api.update("launch", at=at - timedelta(seconds=1)))
