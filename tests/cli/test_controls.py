"""The schedule controls on the command line: add and edit set bounds, a run limit, a
description and tags; list filters by tags; pause takes a note and an end; next previews the
runs; show, list and --json print them; bad values name the option and change nothing."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from goatbeat_celery.store import Store

from .conftest import Cli, field_lines, table_rows

UTC = timezone.utc
START = datetime(2030, 3, 1, 8, 0, tzinfo=UTC)


def test_add_stores_every_control_and_shows_it(cli: Cli, store: Store) -> None:
    shown = cli.json("add", "poll", "feeds.poll", "--every", "1h", "--start-at",
                     "2030-03-01T09:00:00+01:00", "--end-at", "2030-03-02T08:00:00Z",
                     "--max-runs", "10", "--description", "Polls the vendor feed.",
                     "--tag", "vendor", "--tag", "eu")
    spec = store.get_schedule("poll").spec
    assert (spec.start_at, spec.end_at, spec.max_runs) == (START, START + timedelta(days=1), 10)
    assert (spec.description, spec.tags) == ("Polls the vendor feed.", ("vendor", "eu"))
    assert {key: shown[key] for key in ("start_at", "end_at", "max_runs", "runs_left",
                                        "schedule_description", "tags", "next_run_at")} == {
        "start_at": "2030-03-01T08:00:00+00:00", "end_at": "2030-03-02T08:00:00+00:00",
        "max_runs": 10,
        "runs_left": 10, "schedule_description": "Polls the vendor feed.",
        "tags": ["vendor", "eu"], "next_run_at": "2030-03-01T08:00:00+00:00"}
    assert shown["description"] == "every 1h"  # the trigger's, as before
    lines = field_lines(cli.ok("show", "poll").output)
    assert lines["description"] == "Polls the vendor feed."
    assert lines["tags"] == "vendor, eu"
    assert lines["starts"] == "2030-03-01T08:00:00Z"
    assert lines["ends"] == "2030-03-02T08:00:00Z"
    assert lines["max runs"] == "10 (10 left)"


def test_edit_changes_and_removes_controls(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "1h", "--start-at", "2030-03-01T08:00:00Z",
           "--max-runs", "3", "--description", "x", "--tag", "a")
    cli.ok("edit", "poll", "--tag", "b", "--tag", "c", "--end-at", "2031-01-01T00:00:00Z")
    spec = store.get_schedule("poll").spec
    assert (spec.tags, spec.end_at) == (("b", "c"), datetime(2031, 1, 1, tzinfo=UTC))
    cli.ok("edit", "poll", "--start-at", "none", "--end-at", "none", "--max-runs", "0",
           "--description", "", "--tag", "")
    spec = store.get_schedule("poll").spec
    assert (spec.start_at, spec.end_at, spec.max_runs, spec.description, spec.tags) == (
        None, None, None, None, ())


def test_list_filters_by_every_tag_given(cli: Cli) -> None:
    cli.ok("add", "a", "feeds.poll", "--every", "60", "--tag", "billing", "--tag", "nightly")
    cli.ok("add", "b", "feeds.poll", "--every", "60", "--tag", "billing")
    cli.ok("add", "c", "feeds.poll", "--every", "60")
    assert [row["NAME"] for row in table_rows(cli.ok("list", "--tag", "billing").output)] == [
        "a", "b"]
    assert [s["name"] for s in cli.json("list", "--tag", "billing", "--tag", "nightly")] == [
        "a"]
    assert cli.ok("list", "--tag", "nope").output.strip() == "no schedules match"


def test_list_refuses_more_tags_than_a_listing_takes_naming_the_option(cli: Cli) -> None:
    from goatbeat_celery.core.rules.controls import MAX_FILTER_TAGS

    cli.ok("add", "a", "feeds.poll", "--every", "60", "--tag", "t0")
    words = [word for index in range(MAX_FILTER_TAGS + 1) for word in ("--tag", f"t{index}")]
    refused = cli.fails("list", *words)
    assert "--tag" in refused.output and f"at most {MAX_FILTER_TAGS}" in refused.output
    assert cli.ok("list", *words[:-2]).output.strip() == "no schedules match"


def test_pause_with_a_note_and_an_end_is_shown_everywhere(cli: Cli) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "1h")
    shown = cli.json("pause", "poll", "--note", "vendor maintenance", "--until",
                     "2030-03-01T08:30:00Z")
    assert (shown["paused_until"], shown["paused_reason"], shown["enabled"]) == (
        "2030-03-01T08:30:00+00:00", "vendor maintenance", True)
    assert shown["state"] == "paused until"  # until when: paused_until
    assert shown["next_run_at"] == "2030-03-01T09:00:00+00:00"
    lines = field_lines(cli.ok("show", "poll").output)
    assert lines["paused because"] == "vendor maintenance"
    assert lines["paused until"].startswith("2030-03-01T08:30:00Z")
    (row,) = table_rows(cli.ok("list", "--wide").output)
    assert row["STATE"] == "paused until 2030-03-01T08:30:00Z"
    resumed = cli.json("resume", "poll")
    assert (resumed["paused_until"], resumed["paused_reason"], resumed["state"]) == (
        None, None, "enabled")


def test_pause_without_an_end_keeps_its_note(cli: Cli) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "1h")
    shown = cli.json("pause", "poll", "--note", "waiting for the vendor")
    assert (shown["enabled"], shown["paused_reason"], shown["state"]) == (
        False, "waiting for the vendor", "paused")


def test_next_lists_the_runs_within_the_bounds_and_the_limit(cli: Cli) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "1h", "--offset", "5m",
           "--start-at", "2030-03-01T08:00:00Z", "--max-runs", "3")
    assert cli.json("next", "poll", "--count", "5") == [
        "2030-03-01T08:05:00+00:00", "2030-03-01T09:05:00+00:00", "2030-03-01T10:05:00+00:00"]
    output = cli.ok("next", "poll", "--count", "2").output.splitlines()
    assert [line.split()[0] for line in output] == ["2030-03-01T08:05:00Z",
                                                    "2030-03-01T09:05:00Z"]


def test_next_of_a_paused_schedule_says_it_has_none(cli: Cli) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "1h", "--paused")
    assert "has no next run" in cli.ok("next", "poll").output


def test_next_with_a_bad_count_names_the_option(cli: Cli) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "1h")
    result = cli.fails("next", "poll", "--count", "0", exit_code=2)
    assert "Invalid value for '--count': 0 is not in the range 1<=x<=1000" in result.output


def test_bad_controls_name_their_options_and_store_nothing(cli: Cli, store: Store) -> None:
    result = cli.fails("add", "poll", "feeds.poll", "--every", "1h", "--start-at",
                       "2030-03-02T00:00:00Z", "--end-at", "2030-03-01T00:00:00Z",
                       "--tag", "two words", "--tag", "a,b")
    for expected in ("--end-at: 2030-03-01T00:00:00+00:00 is before --start-at",
                     "--tag: 'two words' contains whitespace or a comma",
                     "--tag: 'a,b' contains whitespace or a comma"):
        assert expected in result.output, result.output
    assert store.list_schedules() == []


def test_a_naive_start_is_refused_by_the_option(cli: Cli) -> None:
    result = cli("add", "poll", "feeds.poll", "--every", "1h", "--start-at",
                 "2030-03-01T08:00:00")
    assert result.exit_code == 2
    assert "has no zone" in result.output


def test_a_pause_ending_in_the_past_is_refused_and_changes_nothing(cli: Cli,
                                                                   store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "1h")
    before = store.get_schedule("poll")
    result = cli.fails("pause", "poll", "--until", "2020-01-01T00:00:00Z")
    assert "--until: 2020-01-01T00:00:00+00:00 is not after now" in result.output
    assert store.get_schedule("poll") == before
