"""``--rrule`` and ``--solar`` on add and edit, shown by list and show, checked against what
PostgreSQL stores."""

from __future__ import annotations

from datetime import timedelta
from zoneinfo import ZoneInfo

from goatbeat_celery.store import Store

from .conftest import Cli, field_lines, instant, table_rows

USAGE = 2  # click's exit status for a bad option value
TUESDAYS = "FREQ=WEEKLY;BYDAY=TU;BYHOUR=9;BYMINUTE=0"


# -- rrule ----------------------------------------------------------------------------------
def test_add_rrule_stores_the_rule_from_midnight_today_in_its_zone(
    cli: Cli, store: Store
) -> None:
    shown = cli.json("add", "standup", "team.standup", "--rrule", TUESDAYS,
                     "--timezone", "Europe/Paris")

    params = store.get_schedule("standup").spec.trigger.params
    today = store.now().astimezone(ZoneInfo("Europe/Paris")).strftime("%Y%m%d")
    assert params == {"rule": f"DTSTART;TZID=Europe/Paris:{today}T000000\nRRULE:{TUESDAYS}",
                      "timezone": "Europe/Paris"}
    assert shown["trigger"]["kind"] == "rrule" and shown["timezone"] == "Europe/Paris"
    next_run = instant(shown["next_run_at"])
    assert next_run is not None and next_run == store.get_schedule("standup").next_run_at
    local = next_run.astimezone(ZoneInfo("Europe/Paris"))
    assert (local.weekday(), local.hour, local.minute) == (1, 9, 0)
    assert next_run - store.now() <= timedelta(days=7)


def test_add_rrule_with_a_dtstart_and_no_zone_uses_the_app_timezone(
    cli: Cli, store: Store
) -> None:
    cli.configure(timezone="Asia/Tokyo")
    rule = "DTSTART;TZID=Asia/Tokyo:20260105T073000\nRRULE:FREQ=DAILY"

    shown = cli.json("add", "digest", "mail.digest", "--rrule", rule)

    assert store.get_schedule("digest").spec.trigger.params == {
        "rule": rule, "timezone": "Asia/Tokyo"}
    next_run = instant(shown["next_run_at"])
    assert next_run is not None
    local = next_run.astimezone(ZoneInfo("Asia/Tokyo"))
    assert (local.hour, local.minute) == (7, 30)


def test_edit_timezone_alone_keeps_a_rule_of_wall_times(cli: Cli, store: Store) -> None:
    rule = f"DTSTART:20260106T090000\nRRULE:{TUESDAYS}"  # no TZID: wall times of its zone
    cli.ok("add", "standup", "team.standup", "--rrule", rule, "--timezone", "UTC")

    cli.ok("edit", "standup", "--timezone", "America/New_York")

    params = store.get_schedule("standup").spec.trigger.params
    assert params == {"rule": rule, "timezone": "America/New_York"}
    next_run = store.get_schedule("standup").next_run_at
    assert next_run is not None
    local = next_run.astimezone(ZoneInfo("America/New_York"))
    assert (local.weekday(), local.hour) == (1, 9)


def test_edit_timezone_alone_is_refused_for_a_rule_naming_its_zone(
    cli: Cli, store: Store
) -> None:
    cli.ok("add", "standup", "team.standup", "--rrule", TUESDAYS, "--timezone", "UTC")
    before = store.get_schedule("standup")

    result = cli.fails("edit", "standup", "--timezone", "America/New_York")

    assert "--rrule: DTSTART's TZID 'UTC' is not the schedule's zone" in result.stderr
    assert store.get_schedule("standup").row_version == before.row_version


def test_edit_rrule_replaces_another_trigger(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")

    cli.ok("edit", "poll", "--rrule", "FREQ=HOURLY;BYMINUTE=15", "--timezone", "UTC")

    stored = store.get_schedule("poll")
    assert stored.spec.trigger.kind == "rrule"
    assert stored.next_run_at is not None and stored.next_run_at.minute == 15


def test_a_bad_rule_names_the_option_and_stores_nothing(cli: Cli, store: Store) -> None:
    result = cli.fails("add", "standup", "team.standup", "--rrule", "BYDAY=TU")

    assert "--rrule: FREQ missing" in result.stderr
    assert store.list_schedules() == []


def test_a_rule_with_an_unknown_zone_names_both_options(cli: Cli, store: Store) -> None:
    result = cli.fails("add", "standup", "team.standup", "--rrule", TUESDAYS,
                       "--timezone", "Europe/Pari")

    assert "--timezone: unknown zone 'Europe/Pari'" in result.stderr
    assert store.list_schedules() == []


# -- solar ----------------------------------------------------------------------------------
def test_add_solar_stores_the_event_and_the_place(cli: Cli, store: Store) -> None:
    shown = cli.json("add", "lights", "home.lights_on", "--solar", "sunset", "37.77", "-122.42")

    stored = store.get_schedule("lights")
    assert stored.spec.trigger.to_json() == {
        "kind": "solar", "event": "sunset", "latitude": 37.77, "longitude": -122.42}
    assert shown["trigger"] == stored.spec.trigger.to_json()
    assert shown["timezone"] is None
    next_run = instant(shown["next_run_at"])
    # A sunset comes every day at that latitude, a few minutes earlier or later each day.
    assert next_run is not None and next_run == stored.next_run_at
    assert store.now() < next_run <= store.now() + timedelta(hours=25)


def test_edit_solar_replaces_a_cron_and_its_zone(cli: Cli, store: Store) -> None:
    cli.ok("add", "lights", "home.lights_on", "--cron", "0 18 * * *", "--timezone", "UTC")

    shown = cli.json("edit", "lights", "--solar", "dusk_civil", "48.85", "2.35")

    assert store.get_schedule("lights").spec.trigger.to_json() == {
        "kind": "solar", "event": "dusk_civil", "latitude": 48.85, "longitude": 2.35}
    assert shown["timezone"] is None


def test_bad_solar_values_are_each_named(cli: Cli, store: Store) -> None:
    result = cli.fails("add", "lights", "home.lights_on", "--solar", "moonrise", "100", "2")

    assert "--solar EVENT: unknown solar event 'moonrise'" in result.stderr
    assert "--solar LAT: 100 is out of range -90 to 90" in result.stderr
    assert store.list_schedules() == []


def test_a_solar_place_that_is_not_a_number_is_a_usage_error(cli: Cli, store: Store) -> None:
    result = cli.fails("add", "lights", "home.lights_on", "--solar", "sunset", "north", "2",
                       exit_code=USAGE)

    assert "'--solar'" in result.stderr and "'north'" in result.stderr
    assert store.list_schedules() == []


def test_a_timezone_with_solar_is_refused(cli: Cli, store: Store) -> None:
    result = cli.fails("add", "lights", "home.lights_on", "--solar", "sunset", "48.85", "2.35",
                       "--timezone", "Europe/Paris", exit_code=USAGE)

    assert "--timezone applies to cron and rrule schedules" in result.stderr
    assert store.list_schedules() == []


def test_a_timezone_alone_on_a_solar_schedule_is_refused(cli: Cli, store: Store) -> None:
    cli.ok("add", "lights", "home.lights_on", "--solar", "sunset", "48.85", "2.35")
    before = store.get_schedule("lights")

    result = cli.fails("edit", "lights", "--timezone", "Europe/Paris", exit_code=USAGE)

    assert "--timezone applies to cron and rrule schedules" in result.stderr
    assert store.get_schedule("lights").row_version == before.row_version


# -- list and show --------------------------------------------------------------------------
def test_list_and_show_describe_both_kinds(cli: Cli, store: Store) -> None:
    rule = "DTSTART;TZID=Europe/Paris:20260106T090000\nRRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=TU"
    cli.ok("add", "standup", "team.standup", "--rrule", rule, "--timezone", "Europe/Paris")
    cli.ok("add", "lights", "home.lights_on", "--solar", "sunset", "37.77", "-122.42")

    rows = {row["NAME"]: row for row in table_rows(cli.ok("list", "--wide").stdout)}
    standup = field_lines(cli.ok("show", "standup").stdout)
    lights = field_lines(cli.ok("show", "lights").stdout)

    described = "rrule FREQ=WEEKLY;INTERVAL=2;BYDAY=TU from 2026-01-06 09:00"
    assert (rows["standup"]["TRIGGER"], rows["standup"]["ZONE"]) == (described, "Europe/Paris")
    assert (rows["lights"]["TRIGGER"], rows["lights"]["ZONE"]) == (
        "solar sunset at 37.77°N 122.42°W", "-")
    assert (standup["trigger"], standup["zone"]) == (described, "Europe/Paris")
    assert (lights["trigger"], lights["zone"]) == ("solar sunset at 37.77°N 122.42°W", "-")
