"""``list`` on a terminal fits it, at least 120 columns: long names, tasks and triggers are cut
short with an ellipsis (escapes kept whole); ``--wide`` shows every column whole, and so does
output to a pipe or a file, where scripts read whole values."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from goatbeat_celery import display
from goatbeat_celery.core.validation import hidden_characters

from .conftest import Cli, insert_row, table_rows

LONG_NAME = "nightly-" + "export-" * 12 + "end"
LONG_TASK = "proj." + "very_long_module." * 5 + "task"
LONG_CRON = "0,5,10,15,20,25,30,35,40,45,50,55 0,2,4,6,8,10,12,14,16,18,20,22 * * mon-fri"


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Standard output is a terminal of 80 columns: ``list`` fits 120 (the returned monkeypatch
    sets another width)."""
    monkeypatch.setattr(display, "_terminal_columns", lambda: 80)
    return monkeypatch


def add_long(cli: Cli) -> None:
    cli.ok("add", LONG_NAME, LONG_TASK, "--cron", LONG_CRON, "--timezone", "Europe/Paris")
    cli.ok("add", "poll", "feeds.poll", "--every", "60")


@pytest.mark.usefixtures("terminal")
def test_list_fits_120_columns_cutting_long_names_tasks_and_triggers(cli: Cli) -> None:
    add_long(cli)

    output = cli.ok("list").stdout

    assert max(len(line) for line in output.splitlines()) <= display.LIST_WIDTH
    rows = {row["NAME"]: row for row in table_rows(output)}
    long = next(row for name, row in rows.items() if name != "poll")
    assert LONG_NAME.startswith(long["NAME"].removesuffix("\u2026"))
    assert f"cron {LONG_CRON}".startswith(long["TRIGGER"].removesuffix("\u2026"))
    head, _, tail = long["TASK"].partition("\u2026")  # a task keeps its start and its end
    assert LONG_TASK.startswith(head) and LONG_TASK.endswith(tail) and tail.endswith("task")
    for column in ("NAME", "TASK", "TRIGGER"):
        assert "\u2026" in long[column] and len(long[column]) >= display.CLIPPED_MIN, column
    # Short values and the other columns are never cut.
    assert (rows["poll"]["TASK"], rows["poll"]["TRIGGER"]) == ("feeds.poll", "every 1m")
    assert long["ZONE"] == "Europe/Paris" and long["MISFIRE"] == "default (latest)"


def test_a_wider_terminal_is_filled(cli: Cli, terminal: pytest.MonkeyPatch) -> None:
    terminal.setattr(display, "_terminal_columns", lambda: 160)
    add_long(cli)

    lines = cli.ok("list").stdout.splitlines()

    assert display.LIST_WIDTH < max(len(line) for line in lines) <= 160


@pytest.mark.usefixtures("terminal")
def test_list_wide_shows_every_column_whole(cli: Cli) -> None:
    add_long(cli)

    output = cli.ok("list", "--wide").stdout

    rows = {row["NAME"]: row for row in table_rows(output)}
    assert (rows[LONG_NAME]["TASK"], rows[LONG_NAME]["TRIGGER"]) == (LONG_TASK,
                                                                     f"cron {LONG_CRON}")
    assert "\u2026" not in output


def test_a_pipe_gets_every_column_whole(cli: Cli) -> None:
    add_long(cli)

    assert cli.ok("list").stdout == cli.ok("list", "--wide").stdout


@pytest.mark.usefixtures("terminal")
def test_a_table_that_fits_is_not_cut(cli: Cli) -> None:
    cli.ok("add", "report", "proj.tasks.report", "--cron", "0 7 * * mon-fri")

    assert cli.ok("list").stdout == cli.ok("list", "--wide").stdout


@pytest.mark.usefixtures("terminal")
def test_a_cut_keeps_escapes_whole(cli: Cli, pg_empty_url: str,
                                   pg_tables_engine: sa.Engine) -> None:
    # Written by hand: the API refuses such names. Each escape is several characters wide.
    insert_row(pg_tables_engine, "x" + "\u202e" * 40, task="proj." + "\x1b" * 40 + ".end",
               trigger='{"kind": "cron", "expression": "0 7 * * *", "timezone": "Europe/Paris"}')

    output = cli.ok("list").stdout

    assert hidden_characters(output.replace("\n", "")) == []
    (row,) = table_rows(output)
    assert row["NAME"].endswith("\u2026")
    name = row["NAME"].removeprefix("x").removesuffix("\u2026")
    assert name == "\\u202e" * (len(name) // 6)  # no escape cut in the middle
    head, _, tail = row["TASK"].partition("\u2026")
    head, tail = head.removeprefix("proj."), tail.removesuffix(".end")
    assert head == "\\x1b" * (len(head) // 4) and tail == "\\x1b" * (len(tail) // 4)


def test_a_cut_column_ends_with_an_ellipsis_within_the_width() -> None:
    assert display.table(["A", "B"], [["x" * 30, "y"]], width=20, clipped={"A": "end"}) == (
        "A" + " " * 18 + "B\n" + "x" * 16 + "\u2026  y")
    assert display.table(["A", "B"], [["abcdefghijklmnopqrstuvwxyz", "y"]], width=20,
                       clipped={"A": "middle"}).splitlines()[1] == "abcdefgh\u2026stuvwxyz  y"
    assert display.table(["A", "B"], [["xx", "y"]], width=20, clipped={"A": "end"}) == (
        "A   B\nxx  y")
