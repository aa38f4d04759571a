"""User data reaches the terminal escaped: a name, task or reason written into the table by hand
(the API refuses such names) can neither reorder nor hide what an operator reads.

Text output shows ``\\u202e``, ``\\n`` and ``\\x1b`` where the data holds those characters; JSON
output holds the exact data, in ASCII.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from goatbeat_celery.core.rules.validation import hidden_characters
from goatbeat_celery.store import Store

from .conftest import Cli, field_values, insert_row, set_aside, table_rows

#: Names no API call may create, each with what text output shows instead.
NAMES = {
    "invoice\u202etxt.exe": "invoice\\u202etxt.exe",
    "two\nlines": "two\\nlines",
    "red\x1b[31malert": "red\\x1b[31malert",
    "zero\u200bwidth\u2028sep": "zero\\u200bwidth\\u2028sep",
}
TASK = "proj.\x1b[2Jwipe"
TASK_SHOWN = "proj.\\x1b[2Jwipe"


def assert_escaped(output: str) -> None:
    """Only line breaks among the characters a terminal would not show as themselves."""
    assert hidden_characters(output.replace("\n", "")) == [], output


@pytest.fixture
def odd_rows(pg_empty_url: str, pg_tables_engine: sa.Engine) -> None:
    """The rows of :data:`NAMES`, in the database the CLI sees (emptied first)."""
    for name in NAMES:
        insert_row(pg_tables_engine, name, task=TASK)


@pytest.mark.usefixtures("odd_rows")
def test_list_shows_names_and_tasks_escaped_in_their_columns(cli: Cli) -> None:
    output = cli.ok("list").stdout

    assert_escaped(output)
    rows = table_rows(output)
    assert sorted(row["NAME"] for row in rows) == sorted(NAMES.values())
    assert {row["TASK"] for row in rows} == {TASK_SHOWN}
    assert len(output.splitlines()) == 1 + len(NAMES)  # a newline in a name breaks no row


@pytest.mark.usefixtures("odd_rows")
def test_list_json_holds_the_exact_names_in_ascii(cli: Cli) -> None:
    output = cli.ok("list", "--json").stdout

    assert output.isascii()
    assert "\\u202e" in output and "\\u001b" in output
    listed = json.loads(output)
    assert sorted(s["name"] for s in listed) == sorted(NAMES)
    assert {s["task"] for s in listed} == {TASK}


@pytest.mark.parametrize(("name", "escaped"), list(NAMES.items()),
                         ids=["rlo", "newline", "escape", "invisible"])
@pytest.mark.usefixtures("odd_rows")
def test_show_shows_the_name_and_task_escaped(cli: Cli, name: str, escaped: str) -> None:
    output = cli.ok("show", name).stdout

    assert_escaped(output)
    lines = field_values(output)
    assert (lines["name"], lines["task"]) == ([escaped], [TASK_SHOWN])
    shown = json.loads(cli.ok("show", name, "--json").stdout)
    assert (shown["name"], shown["task"]) == (name, TASK)


def test_a_reason_with_control_characters_is_shown_escaped_by_show_and_status(
    cli: Cli, store: Store
) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    set_aside(store, "poll", "refused:\n\x1b[1mfake line\u202e")

    show = cli.ok("show", "poll").stdout
    status = cli.ok("status").stdout

    for output in (show, status):
        assert_escaped(output)
    assert field_values(show)["set aside"] == ["refused:\\n\\x1b[1mfake line\\u202e"]
    assert field_values(status)["set aside"] == [
        "1 schedule", "poll: refused:\\n\\x1b[1mfake line\\u202e"]
    document = cli.ok("status", "--json").stdout
    assert document.isascii()
    assert json.loads(document)["set_aside"]["schedules"][0]["fault"] == \
        "refused:\n\x1b[1mfake line\u202e"


@pytest.mark.usefixtures("odd_rows")
def test_status_names_a_set_aside_schedule_escaped(cli: Cli, store: Store) -> None:
    set_aside(store, "invoice\u202etxt.exe", "unknown task")

    output = cli.ok("status").stdout

    assert_escaped(output)
    assert field_values(output)["set aside"] == [
        "1 schedule", "invoice\\u202etxt.exe: unknown task"]


@pytest.mark.usefixtures("odd_rows")
def test_run_now_and_history_show_the_key_escaped(cli: Cli) -> None:
    name = "invoice\u202etxt.exe"

    queued = cli.ok("run-now", name).stdout
    history = cli.ok("history", name, "--wide").stdout

    for output in (queued, history):
        assert_escaped(output)
    (row,) = table_rows(history)
    assert row["KEY"].startswith("invoice\\u202etxt.exe:")
    assert f"task id {row['KEY']}" in queued
    (execution,) = json.loads(cli.ok("history", name, "--json").stdout)
    assert execution["schedule"] == name and execution["key"].startswith(name + ":")


@pytest.mark.usefixtures("odd_rows")
def test_remove_asks_and_answers_with_the_name_escaped(cli: Cli, store: Store) -> None:
    name = "red\x1b[31malert"

    result = cli.ok("remove", name, input="y\n")

    assert_escaped(result.output)
    assert "Remove schedule 'red\\x1b[31malert' (every 1m, proj.\\x1b[2Jwipe)?" in result.output
    assert "removed 'red\\x1b[31malert'" in result.stdout
    assert name not in {s.name for s in store.list_schedules()}


@pytest.mark.usefixtures("odd_rows")
def test_pause_and_its_error_show_the_name_escaped(cli: Cli) -> None:
    # Pausing rewrites the row, which the API refuses for a name it would not create: either
    # way, what is printed is escaped.
    result = cli("pause", "two\nlines")

    assert_escaped(result.output)
    assert "two\\nlines" in result.output


def test_an_unknown_name_is_reported_escaped(cli: Cli) -> None:
    result = cli.fails("show", "no\u202esuch\x1b[0m")

    assert_escaped(result.output)
    assert "no schedule named 'no\\u202esuch\\x1b[0m'" in result.stderr


def test_trigger_parameters_written_by_hand_are_shown_escaped(
    cli: Cli, pg_tables_engine: sa.Engine
) -> None:
    insert_row(pg_tables_engine, "report", trigger=json.dumps(
        {"kind": "cron", "expression": "0 7 * * *\u202e", "timezone": "Europe/\x1bParis"}))

    output = cli.ok("list").stdout

    assert_escaped(output)
    (row,) = table_rows(output)
    assert (row["TRIGGER"], row["ZONE"]) == ("cron 0 7 * * *\\u202e", "Europe/\\x1bParis")
