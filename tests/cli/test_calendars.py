"""Exclusion calendars on the command line: calendar add, show, list, edit and remove, with
--json; add and edit --calendar make a schedule observe them; next skips the excluded dates;
bad dates, unknown calendars and a calendar in use are refused naming what is wrong, and
change nothing."""

from __future__ import annotations

from datetime import date

from goatbeat_celery.store import Store

from .conftest import Cli, field_lines, table_rows


def test_calendar_add_stores_dates_and_ranges_and_shows_them(cli: Cli, store: Store) -> None:
    shown = cli.json("calendar", "add", "holidays", "2026-12-25", "2026-12-24..2027-01-02",
                     "--description", "Office closed")
    stored = store.get_calendar("holidays")
    assert stored.dates == (date(2026, 12, 25),)
    assert stored.ranges == ((date(2026, 12, 24), date(2027, 1, 2)),)
    assert {key: shown[key] for key in ("name", "description", "entries", "version")} == {
        "name": "holidays", "description": "Office closed",
        "entries": ["2026-12-25", {"from": "2026-12-24", "to": "2027-01-02"}], "version": 1}
    lines = cli.ok("calendar", "show", "holidays").output
    assert field_lines(lines)["excluded"] == "2026-12-25"
    assert "2026-12-24..2027-01-02" in lines
    assert field_lines(lines)["description"] == "Office closed"


def test_calendar_list_shows_every_calendar_by_name(cli: Cli) -> None:
    assert "no calendars" in cli.ok("calendar", "list").output
    cli.ok("calendar", "add", "freeze", "2026-12-01..2026-12-31")
    cli.ok("calendar", "add", "bank", "2026-05-01", "2026-05-08", "2026-07-14", "2026-08-15")
    rows = table_rows(cli.ok("calendar", "list").output)
    assert [row["NAME"] for row in rows] == ["bank", "freeze"]
    assert rows[0]["EXCLUDED"] == "2026-05-01, 2026-05-08, 2026-07-14, … (4)"
    assert [c["name"] for c in cli.json("calendar", "list")] == ["bank", "freeze"]


def test_calendar_edit_adds_removes_and_clears_entries(cli: Cli, store: Store) -> None:
    cli.ok("calendar", "add", "holidays", "2026-12-25", "2026-12-24..2027-01-02")
    shown = cli.json("calendar", "edit", "holidays", "--add", "2027-05-01",
                     "--remove", "2026-12-24..2027-01-02", "--description", "Bank holidays")
    assert shown["entries"] == ["2026-12-25", "2027-05-01"]
    assert (shown["version"], shown["description"]) == (2, "Bank holidays")
    cli.ok("calendar", "edit", "holidays", "--clear", "--add", "2028-01-01",
           "--description", "")
    stored = store.get_calendar("holidays")
    assert (stored.dates, stored.ranges, stored.description) == ((date(2028, 1, 1),), (), None)


def test_calendar_edit_refuses_to_remove_an_entry_it_does_not_hold(cli: Cli,
                                                                    store: Store) -> None:
    cli.ok("calendar", "add", "holidays", "2026-12-25")
    result = cli.fails("calendar", "edit", "holidays", "--remove", "2026-12-26", exit_code=2)
    assert "--remove: 2026-12-26 not in calendar 'holidays'" in result.output
    assert store.get_calendar("holidays").version == 1


def test_bad_entries_are_all_named_and_nothing_is_stored(cli: Cli, store: Store) -> None:
    result = cli.fails("calendar", "add", "holidays", "2026-02-30", "2026-12..2027-01-01",
                       exit_code=2)
    assert "ENTRY: '2026-02-30' is not a date" in result.output
    assert "ENTRY: '2026-12' is not a date" in result.output
    assert store.list_calendars() == []


def test_a_range_ending_before_it_starts_is_refused(cli: Cli, store: Store) -> None:
    result = cli.fails("calendar", "add", "holidays", "2027-01-02..2026-12-24")
    assert "ends before it starts" in result.output
    assert store.list_calendars() == []


def test_add_and_edit_calendar_make_a_schedule_observe_calendars(cli: Cli,
                                                                   store: Store) -> None:
    cli.ok("calendar", "add", "holidays", "2030-01-01")
    cli.ok("calendar", "add", "freeze", "2030-02-01..2030-02-07")
    shown = cli.json("add", "report", "proj.report", "--cron", "0 9 * * *",
                     "--calendar", "holidays", "--calendar", "freeze")
    assert shown["calendars"] == ["holidays", "freeze"]
    assert field_lines(cli.ok("show", "report").output)["calendars"] == "holidays, freeze"
    cli.ok("edit", "report", "--calendar", "freeze")
    assert store.get_schedule("report").spec.calendars == ("freeze",)
    cli.ok("edit", "report", "--calendar", "")
    assert store.get_schedule("report").spec.calendars == ()


def test_an_unknown_calendar_is_refused_naming_the_option(cli: Cli, store: Store) -> None:
    result = cli.fails("add", "report", "proj.report", "--every", "60",
                       "--calendar", "nope")
    assert "--calendar: no calendar named 'nope'" in result.output
    assert store.list_schedules() == []


def test_next_skips_the_dates_a_calendar_excludes(cli: Cli) -> None:
    cli.ok("add", "report", "proj.report", "--cron", "0 9 * * *", "--timezone",
           "Europe/Paris")
    first = cli.json("next", "report", "--count", "3")
    excluded = first[1][:10]
    cli.ok("calendar", "add", "day", excluded)
    cli.ok("edit", "report", "--calendar", "day")
    after = cli.json("next", "report", "--count", "3")
    assert after[0] == first[0] and after[1] == first[2]
    assert all(not run.startswith(excluded) for run in after)


def test_a_calendar_in_use_cannot_be_removed_until_its_schedules_leave_it(
        cli: Cli, store: Store) -> None:
    cli.ok("calendar", "add", "holidays", "2030-01-01")
    cli.ok("add", "report", "proj.report", "--every", "60", "--calendar", "holidays")
    result = cli.fails("calendar", "remove", "holidays", "--yes")
    assert "calendar 'holidays' is observed by 'report'" in result.output
    assert field_lines(cli.ok("calendar", "show", "holidays").output)["observed by"] == "report"
    assert cli.json("calendar", "show", "holidays")["observed_by"] == ["report"]
    assert store.get_calendar("holidays").version == 1
    cli.ok("edit", "report", "--calendar", "")
    assert cli.json("calendar", "remove", "holidays", "--yes") == {"removed": "holidays"}
    result = cli.fails("calendar", "show", "holidays")
    assert "no calendar named 'holidays'" in result.output
    assert "calendar list" in result.output
