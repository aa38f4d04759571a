"""``list`` fits the terminal's width (``COLUMNS``, else the terminal's, else 100 columns): the
low-priority columns are left out first, then long names, tasks, triggers and states are cut
short with an ellipsis (escapes kept whole); ``--wide`` shows every column whole."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from goatbeat_celery import display
from goatbeat_celery.core.rules.validation import hidden_characters
from goatbeat_celery.display import layout

from .conftest import Cli, insert_row, table_rows

LONG_NAME = "nightly-" + "export-" * 12 + "end"
LONG_TASK = "proj." + "very_long_module." * 5 + "task"
LONG_CRON = "0,5,10,15,20,25,30,35,40,45,50,55 0,2,4,6,8,10,12,14,16,18,20,22 * * mon-fri"
LONG_ZONE = "America/Argentina/ComodRivadavia"
ELLIPSIS = display.ELLIPSIS


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Standard output is a terminal of 80 columns (the returned monkeypatch sets another
    width); ``COLUMNS`` is not set."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(layout, "_terminal_columns", lambda: 80)
    return monkeypatch


def add_long(cli: Cli) -> None:
    cli.ok("add", LONG_NAME, LONG_TASK, "--cron", LONG_CRON, "--timezone", LONG_ZONE)
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    cli.ok("add", "resting", "feeds.poll", "--every", "60")
    cli.ok("pause", "resting", "--until", "2099-01-01T00:00:00Z")


def widest(output: str) -> int:
    return max(len(line) for line in output.splitlines())


@pytest.mark.parametrize("width", [80, 100, 200])
def test_list_fits_columns_leaving_out_low_priority_columns_first(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    add_long(cli)

    output = cli.ok("list").stdout

    assert widest(output) <= width
    rows = {row["NAME"]: row for row in table_rows(output)}
    left_out = {column for column in display.SCHEDULE_COLUMNS if column not in rows["poll"]}
    # None ran yet: LAST RUN holds nothing and is the first to go; then the others in order.
    assert left_out <= set(display.SCHEDULE_DROPPED)
    holding = [column for column in display.SCHEDULE_DROPPED if column != "LAST RUN"]
    assert left_out - {"LAST RUN"} == set(holding[:len(left_out - {"LAST RUN"})])
    if left_out:
        assert "LAST RUN" in left_out
    if width == 80:
        assert left_out == set(display.SCHEDULE_DROPPED)
    if width == 200:
        assert left_out <= {"LAST RUN"}
        assert rows["poll"]["MISFIRE"] == "default (latest)"
    long = next(row for name, row in rows.items() if name not in ("poll", "resting"))
    assert LONG_NAME.startswith(long["NAME"].removesuffix(ELLIPSIS))
    assert f"cron {LONG_CRON}".startswith(long["TRIGGER"].removesuffix(ELLIPSIS))
    head, _, tail = long["TASK"].partition(ELLIPSIS)  # a task keeps its start and its end
    assert LONG_TASK.startswith(head) and LONG_TASK.endswith(tail) and tail.endswith("task")
    for column in ("NAME", "TASK", "TRIGGER"):
        assert ELLIPSIS in long[column] and len(long[column]) >= display.CLIPPED_MIN, column
    # Short values are never cut.
    assert (rows["poll"]["TASK"], rows["poll"]["TRIGGER"]) == ("feeds.poll", "every 1m")
    assert rows["poll"]["STATE"] == "enabled"
    assert rows["resting"]["STATE"].startswith("paused until")


def test_a_wider_table_keeps_more_of_each_value(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    add_long(cli)
    cut = {}
    for width in (80, 200):
        monkeypatch.setenv("COLUMNS", str(width))
        cut[width] = {row["NAME"]: row for row in table_rows(cli.ok("list").stdout)}

    narrow, wide = (next(row for name, row in cut[w].items() if name not in ("poll", "resting"))
                    for w in (80, 200))
    for column in ("NAME", "TASK", "TRIGGER"):
        assert len(narrow[column]) < len(wide[column]), column


def test_a_terminal_is_filled_when_columns_is_not_set(cli: Cli,
                                                      terminal: pytest.MonkeyPatch) -> None:
    terminal.setattr(layout, "_terminal_columns", lambda: 160)
    add_long(cli)

    assert 100 < widest(cli.ok("list").stdout) <= 160


@pytest.mark.usefixtures("terminal")
def test_columns_wins_over_the_terminals_width(cli: Cli,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    add_long(cli)
    monkeypatch.setenv("COLUMNS", "120")

    assert 80 < widest(cli.ok("list").stdout) <= 120


@pytest.mark.parametrize("columns", [None, "", "0", "-5", "wide"],
                         ids=["unset", "empty", "zero", "negative", "not-a-number"])
def test_without_a_terminal_or_columns_list_fits_the_default_width(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, columns: str | None
) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    add_long(cli)

    output = cli.ok("list").stdout

    assert display.DEFAULT_WIDTH == 100
    assert 80 < widest(output) <= display.DEFAULT_WIDTH
    assert ELLIPSIS in output


@pytest.mark.parametrize("width", [80, 100, 200])
def test_list_wide_shows_every_column_whole(cli: Cli, monkeypatch: pytest.MonkeyPatch,
                                            width: int) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    add_long(cli)

    output = cli.ok("list", "--wide").stdout

    rows = {row["NAME"]: row for row in table_rows(output)}
    assert tuple(rows[LONG_NAME]) == display.SCHEDULE_COLUMNS
    assert (rows[LONG_NAME]["TASK"], rows[LONG_NAME]["TRIGGER"], rows[LONG_NAME]["ZONE"]) == (
        LONG_TASK, f"cron {LONG_CRON}", LONG_ZONE)
    assert ELLIPSIS not in output
    assert widest(output) > 200


def test_a_table_that_fits_is_neither_cut_nor_narrowed(cli: Cli,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
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


def test_columns_are_left_out_in_order_until_the_cut_ones_keep_enough() -> None:
    headers = ["NAME", "ZONE", "SOURCE", "MISFIRE"]
    row = ["n" * 30, "Europe/Paris", "api", "default (latest)"]

    def shown_headers(width: int) -> list[str]:
        return display.table(headers, [row], width=width, clipped={"NAME": "end"},
                             dropped=["MISFIRE", "SOURCE", "ZONE"]).splitlines()[0].split()

    assert shown_headers(200) == headers  # fits: nothing left out, nothing cut
    # NAME would keep fewer than ROOMY (24) characters: MISFIRE goes first, then SOURCE.
    assert shown_headers(50) == ["NAME", "ZONE", "SOURCE"]
    assert shown_headers(40) == ["NAME", "ZONE"]
    assert shown_headers(20) == ["NAME"]
    assert display.table(headers, [row], width=20, clipped={"NAME": "end"},
                         dropped=["MISFIRE", "SOURCE", "ZONE"]) == (
        "NAME\n" + "n" * 19 + ELLIPSIS)


def test_a_column_with_nothing_in_it_is_left_out_before_the_others() -> None:
    headers = ["WHY", "LATE", "RUNTIME"]
    rows = [["x" * 40, "1s", "-"], ["y" * 40, "2s", "-"]]

    text = display.table(headers, rows, width=50, clipped={"WHY": "end"},
                         dropped=["LATE", "RUNTIME"], roomy=12)

    assert text.splitlines()[0].split() == ["WHY", "LATE"]
    assert max(len(line) for line in text.splitlines()) <= 50
    assert ELLIPSIS not in text
