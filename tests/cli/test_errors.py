"""Invalid input: a clear message naming the option and the fix, non-zero exit, no change."""

from __future__ import annotations

from datetime import datetime

import pytest

from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.store import Store

from .conftest import Cli

USAGE = 2  # click's exit status for a bad option value


def test_a_bad_cron_expression_names_the_option_and_stores_nothing(
    cli: Cli, store: Store
) -> None:
    result = cli.fails("add", "report", "proj.report", "--cron", "61 * * *")

    assert "--cron: '61 * * *' has 4 fields" in result.stderr
    assert "minute hour day-of-month month day-of-week" in result.stderr
    assert store.list_schedules() == []


def test_an_out_of_range_cron_field_is_refused(cli: Cli, store: Store) -> None:
    result = cli.fails("add", "report", "proj.report", "--cron", "61 * * * *")

    assert "--cron" in result.stderr
    assert store.list_schedules() == []


def test_an_unknown_zone_is_refused_with_a_suggestion(cli: Cli, store: Store) -> None:
    result = cli.fails("add", "report", "proj.report", "--cron", "0 7 * * *",
                       "--timezone", "Europe/Pariss")

    assert "--timezone: unknown zone 'Europe/Pariss'" in result.stderr
    assert "'Europe/Paris'" in result.stderr
    assert store.list_schedules() == []


def test_every_problem_is_listed_at_once(cli: Cli, store: Store) -> None:
    result = cli.fails("add", "report", "proj.report", "--cron", "0 7 * *",
                       "--timezone", "Mars/Olympus")

    assert "(2 problems)" in result.stderr
    assert "--cron:" in result.stderr and "--timezone:" in result.stderr
    assert store.list_schedules() == []


def test_an_unknown_misfire_policy_is_a_usage_error(cli: Cli, store: Store) -> None:
    result = cli.fails("add", "poll", "feeds.poll", "--every", "60", "--misfire-policy", "some",
                       exit_code=USAGE)

    assert "Invalid value for '--misfire-policy'" in result.stderr
    assert "'latest', 'all', 'skip'" in result.stderr
    assert store.list_schedules() == []


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--args", "[1,", "is not valid JSON"),
    ("--args", '{"a": 1}', "expected a json array"),
    ("--kwargs", "{'a': 1}", "is not valid JSON"),
    ("--kwargs", "[1]", "expected a json object"),
], ids=["args-syntax", "args-object", "kwargs-quotes", "kwargs-array"])
def test_bad_json_arguments_are_refused_before_anything_is_stored(
    cli: Cli, store: Store, option: str, value: str, message: str
) -> None:
    result = cli.fails("add", "poll", "feeds.poll", "--every", "60", option, value,
                       exit_code=USAGE)

    assert f"Invalid value for '{option}'" in result.stderr
    assert message in result.stderr
    assert store.list_schedules() == []


def test_bad_json_in_edit_changes_nothing(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60", "--args", "[1]")
    before = store.get_schedule("poll")

    cli.fails("edit", "poll", "--args", "[2,", "--every", "30", exit_code=USAGE)

    assert store.get_schedule("poll") == before


def test_an_invalid_edit_changes_nothing(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    before = store.get_schedule("poll")

    result = cli.fails("edit", "poll", "--every", "30", "--offset", "45")

    assert "--offset: must be shorter than the interval" in result.stderr
    assert store.get_schedule("poll") == before


@pytest.mark.parametrize(("value", "message"), [
    ("2030-01-01T09:00:00", "has no zone"),
    ("next tuesday", "is not an ISO-8601 instant"),
], ids=["naive", "not-iso"])
def test_an_at_without_a_zone_or_not_iso_is_refused(
    cli: Cli, store: Store, value: str, message: str
) -> None:
    result = cli.fails("add", "launch", "proj.launch", "--at", value, exit_code=USAGE)

    assert "'--at'" in result.stderr and message in result.stderr
    assert store.list_schedules() == []


@pytest.mark.parametrize("options", [
    (),
    ("--every", "60", "--cron", "* * * * *"),
    ("--every", "60", "--at", "2030-01-01T00:00:00Z"),
    ("--rrule", "FREQ=DAILY", "--solar", "sunrise", "48.85", "2.35"),
], ids=["none", "every-and-cron", "every-and-at", "rrule-and-solar"])
def test_add_needs_exactly_one_trigger(cli: Cli, store: Store, options: tuple[str, ...]) -> None:
    result = cli.fails("add", "poll", "feeds.poll", *options, exit_code=USAGE)

    assert ("give exactly one of --every DURATION, --cron EXPR, --at ISO, --rrule TEXT or "
            "--solar EVENT LAT LON") in result.stderr
    assert store.list_schedules() == []


def test_a_timezone_without_cron_is_refused(cli: Cli, store: Store) -> None:
    result = cli.fails("add", "poll", "feeds.poll", "--every", "60", "--timezone", "UTC",
                       exit_code=USAGE)

    assert "--timezone applies to cron and rrule schedules" in result.stderr
    assert store.list_schedules() == []


def test_a_non_positive_interval_is_refused(cli: Cli, store: Store) -> None:
    result = cli.fails("add", "poll", "feeds.poll", "--every", "0", exit_code=USAGE)

    assert "Invalid value for '--every'" in result.stderr
    assert store.list_schedules() == []


def test_edit_with_nothing_to_change_is_a_usage_error(cli: Cli) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")

    result = cli.fails("edit", "poll", exit_code=USAGE)

    assert "nothing to change" in result.stderr


def test_adding_a_name_that_exists_is_refused_and_keeps_the_original(
    cli: Cli, store: Store
) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    before = store.get_schedule("poll")

    result = cli.fails("add", "poll", "other.task", "--every", "5")

    assert "already exists" in result.stderr and "`edit`" in result.stderr
    assert store.get_schedule("poll") == before


def test_a_task_outside_the_allow_list_is_refused(cli: Cli, store: Store) -> None:
    cli.configure(goatbeat_allowed_tasks=["proj.*"])

    result = cli.fails("add", "poll", "os.system", "--every", "60")

    assert "goatbeat_allowed_tasks" in result.stderr
    assert store.list_schedules() == []


@pytest.mark.parametrize("command", [
    ("show",), ("edit", "--every", "60"), ("pause",), ("resume",), ("remove", "--yes"),
    ("run-now",), ("history",),
], ids=lambda c: c[0])
def test_a_missing_schedule_is_a_clear_error(cli: Cli, command: tuple[str, ...]) -> None:
    result = cli.fails(command[0], "nope", *command[1:])

    assert "no schedule named 'nope'" in result.stderr
    assert "goatbeat list" in result.stderr


def test_invalid_settings_are_all_listed(cli: Cli) -> None:
    cli.configure(goatbeat_lease_ttl=-1, goatbeat_misfire_policy="sometimes",
                  goatbeat_lease_nmae="x")

    result = cli.fails("list")

    assert "goatbeat_lease_ttl" in result.stderr
    assert "goatbeat_misfire_policy" in result.stderr
    assert "did you mean goatbeat_lease_name?" in result.stderr


def test_a_memory_store_is_refused_because_no_other_process_can_see_it(cli: Cli) -> None:
    cli.configure(goatbeat_database_url="memory://")

    result = cli.fails("list")

    assert "memory://" in result.stderr and "postgresql://" in result.stderr


def test_an_unreachable_database_fails_with_its_url_masked(cli: Cli) -> None:
    cli.configure(goatbeat_database_url="postgresql://beat:hunter2@127.0.0.1:1/app")

    result = cli.fails("list", exit_code=69)

    assert "beat:***@127.0.0.1:1/app unavailable" in result.stderr
    assert "hunter2" not in result.output


def test_an_out_of_range_cron_field_is_named_with_its_range(cli: Cli, store: Store) -> None:
    result = cli.fails("add", "report", "proj.report", "--cron", "0 25 * * *")

    assert "--cron: '0 25 * * *': hour field '25' is out of range 0-23" in result.stderr
    assert "not acceptable" not in result.stderr
    assert store.list_schedules() == []


# -- instants: the range every instant a user gives must lie in ------------------------------
RANGE = "from 1970-01-01T00:00:00Z to 9000-01-01T00:00:00Z"
OUT_OF_RANGE = ["9999-03-01T00:00:00Z", "9999-12-31T23:00:00-05:00", "0001-01-01T00:00:00Z",
                "0001-01-01T00:00:00+05:00", "1969-12-31T23:59:59Z"]
INSTANT_COMMANDS = [
    ("add", "report", "proj.report", "--every", "60", "--start-at"),
    ("add", "report", "proj.report", "--cron", "0 7 * * *", "--start-at"),
    ("add", "report", "proj.report", "--every", "60", "--end-at"),
    ("add", "report", "proj.report", "--at"),
    ("edit", "poll", "--start-at"),
    ("edit", "poll", "--end-at"),
    ("edit", "poll", "--at"),
    ("pause", "poll", "--until"),
    ("backfill", "poll", "--to", "2026-01-01T00:00:00Z", "--from"),
    ("backfill", "poll", "--from", "2026-01-01T00:00:00Z", "--to"),
]


@pytest.mark.parametrize("value", OUT_OF_RANGE)
@pytest.mark.parametrize("command", INSTANT_COMMANDS,
                         ids=lambda c: f"{c[0]}{c[-1]}" + ("-cron" if "--cron" in c else ""))
def test_an_instant_out_of_range_is_a_usage_error_naming_the_option_and_the_range(
        cli: Cli, store: Store, command: tuple[str, ...], value: str) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    before = store.list_schedules()

    result = cli.fails(*command, value, exit_code=USAGE)

    assert f"Invalid value for '{command[-1]}'" in result.stderr
    assert f"{value!r} is out of range; give an instant {RANGE}" in result.stderr
    assert store.list_schedules() == before
    assert store.list_backfills() == []


def test_the_ends_of_the_range_are_accepted(cli: Cli, store: Store) -> None:
    cli.ok("add", "report", "proj.report", "--every", "60",
           "--start-at", "1970-01-01T00:00:00Z", "--end-at", "9000-01-01T00:00:00Z")

    stored = store.get_schedule("report").spec
    assert (stored.start_at, stored.end_at) == (datetime(1970, 1, 1, tzinfo=UTC),
                                                datetime(9000, 1, 1, tzinfo=UTC))


def test_a_schedule_starting_near_the_end_of_the_range_shows_its_last_runs(
        cli: Cli, store: Store) -> None:
    cli.ok("add", "last", "proj.report", "--cron", "0 7 * * *",
           "--start-at", "8999-12-30T00:00:00Z")

    runs = cli.json("next", "last", "--count", "5")
    shown = cli.ok("show", "last")

    assert runs == ["8999-12-30T07:00:00+00:00", "8999-12-31T07:00:00+00:00"]
    assert "8999-12-30T07:00:00Z" in shown.stdout


# -- a one-time schedule in the past --------------------------------------------------------
def test_a_one_time_schedule_in_the_past_is_refused_and_nothing_is_stored(
        cli: Cli, store: Store) -> None:
    result = cli.fails("add", "launch", "proj.launch", "--at", "2020-01-01T00:00:00Z")

    assert "--at: 2020-01-01T00:00:00+00:00 is not after now (" in result.stderr
    assert "a one-time schedule runs only at an instant still ahead" in result.stderr
    assert "run-now" in result.stderr
    assert store.list_schedules() == []


def test_a_one_time_schedule_ahead_is_stored_without_a_word(cli: Cli, store: Store) -> None:
    result = cli.ok("add", "launch", "proj.launch", "--at", "2999-01-01T00:00:00Z")

    assert "--at" not in result.stderr
    assert store.get_schedule("launch").next_run_at == datetime(2999, 1, 1, tzinfo=UTC)


def test_editing_to_an_instant_in_the_past_is_refused_and_changes_nothing(
        cli: Cli, store: Store) -> None:
    cli.ok("add", "launch", "proj.launch", "--at", "2999-01-01T00:00:00Z")
    before = store.get_schedule("launch")

    result = cli.fails("edit", "launch", "--at", "2020-01-01T00:00:00+01:00")

    assert "--at: 2019-12-31T23:00:00+00:00 is not after now (" in result.stderr
    assert store.get_schedule("launch") == before


# -- zones and routing options --------------------------------------------------------------
def test_an_empty_timezone_is_refused_not_read_as_the_apps(cli: Cli, store: Store) -> None:
    result = cli.fails("add", "report", "proj.report", "--cron", "0 7 * * *", "--timezone", "")

    assert "--timezone: is empty; give an IANA zone such as 'Europe/Paris'" in result.stderr
    assert store.list_schedules() == []


def test_a_queue_with_control_characters_is_refused(cli: Cli, store: Store) -> None:
    result = cli.fails("add", "poll", "feeds.poll", "--every", "60", "--queue", "feeds\x1b[2J")

    assert "--queue: contains control or invisible characters (U+001B)" in result.stderr
    assert "\x1b" not in result.output  # shown escaped, never acted on by the terminal
    assert store.list_schedules() == []


@pytest.mark.parametrize("command", [("history", "poll"), ("backfills",)], ids=lambda c: c[0])
def test_a_limit_beyond_what_a_read_takes_is_a_usage_error(cli: Cli,
                                                          command: tuple[str, ...]) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")

    result = cli.fails(*command, "--limit", str(10**30), exit_code=USAGE)

    assert "Invalid value for '--limit'" in result.stderr


def test_a_backfill_id_beyond_what_the_database_holds_is_not_found(cli: Cli) -> None:
    result = cli.fails("backfill-cancel", str(10**30))

    assert f"no backfill with id {10**30}" in result.stderr
    assert "out of range" not in result.stderr  # not the database's own error
