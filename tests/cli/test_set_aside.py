"""Set-aside schedules and rows edited by hand: visible in list, show and status, and removable.

A schedule is set aside by the leader (through the store, as a beat replica does) when it cannot
run as stored; a row whose columns cannot be read at all is written here with raw SQL.
"""

from __future__ import annotations

import sqlalchemy as sa

from goatbeat_celery.store import Store

from .conftest import (
    Cli,
    field_values,
    insert_row,
    instant,
    set_aside,
    table_instant,
    table_rows,
)

REASON = "task 'proj.gone' is not registered with the worker's app"


def _columns(damage: list[str]) -> list[str]:
    """The column each damage entry names (``"args: expected …"`` → ``"args"``)."""
    return [entry.split(":", 1)[0] for entry in damage]


# -- set aside by the leader ----------------------------------------------------------------
def test_show_says_why_since_when_how_often_and_when_it_is_retried(
    cli: Cli, store: Store
) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    set_aside(store, "poll", REASON, retry_in=300, times=3)
    stored = store.get_schedule("poll")

    lines = field_values(cli.ok("show", "poll").stdout)

    assert lines["set aside"] == [REASON]
    assert stored.fault_at is not None and stored.next_run_at is not None
    assert lines["set aside since"][0].startswith(table_instant(stored.fault_at) + " (")
    assert lines["times in a row"] == ["3"]
    assert lines["retry at"][0].startswith(table_instant(stored.next_run_at) + " (in ")
    assert "damage" not in lines


def test_show_json_carries_the_fault_and_an_empty_damage_list(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    set_aside(store, "poll", REASON, times=2)
    stored = store.get_schedule("poll")

    shown = cli.json("show", "poll")

    assert (shown["set_aside"], shown["fault"], shown["faults"], shown["damage"]) == (
        True, REASON, 2, [])
    assert instant(shown["fault_at"]) == stored.fault_at
    assert instant(shown["next_run_at"]) == stored.next_run_at


def test_a_healthy_schedule_shows_no_fault_lines_and_empty_fault_fields(cli: Cli) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")

    lines = field_values(cli.ok("show", "poll").stdout)
    shown = cli.json("show", "poll")

    assert not {"set aside", "set aside since", "times in a row", "retry at",
                "damage"} & set(lines)
    assert (shown["set_aside"], shown["fault"], shown["fault_at"], shown["faults"],
            shown["damage"]) == (False, None, None, 0, [])


def test_list_marks_set_aside_rows_in_the_state_column(cli: Cli, store: Store) -> None:
    cli.ok("add", "healthy", "feeds.poll", "--every", "60")
    cli.ok("add", "broken", "feeds.poll", "--every", "60")
    cli.ok("add", "resting", "feeds.poll", "--every", "60", "--paused")
    set_aside(store, "broken", REASON)

    rows = {row["NAME"]: row for row in table_rows(cli.ok("list").stdout)}

    assert {name: row["STATE"] for name, row in rows.items()} == {
        "broken": "set aside", "healthy": "enabled", "resting": "paused"}
    assert rows["broken"]["NEXT RUN"] == table_instant(store.get_schedule("broken").next_run_at)
    listed = {s["name"]: s for s in cli.json("list")}
    assert (listed["broken"]["set_aside"], listed["broken"]["fault"]) == (True, REASON)
    assert (listed["healthy"]["set_aside"], listed["healthy"]["fault"]) == (False, None)


def test_list_set_aside_shows_only_those_and_combines_with_other_filters(
    cli: Cli, store: Store, pg_tables_engine: sa.Engine
) -> None:
    for name in ("feeds.a", "feeds.b", "report"):
        cli.ok("add", name, "feeds.poll", "--every", "60")
    set_aside(store, "feeds.b", REASON)
    set_aside(store, "report", REASON)
    insert_row(pg_tables_engine, "feeds.torn", trigger="{}")  # not yet seen by a leader

    def names(*options: str) -> list[str]:
        return [s["name"] for s in cli.json("list", *options)]

    assert names("--set-aside") == ["feeds.b", "feeds.torn", "report"]
    assert names("--set-aside", "--prefix", "feeds.") == ["feeds.b", "feeds.torn"]
    assert [row["NAME"] for row in table_rows(cli.ok("list", "--set-aside").stdout)] == [
        "feeds.b", "feeds.torn", "report"]
    assert cli.ok("list", "--set-aside", "--prefix", "nothing").stdout.strip() == \
        "no schedules match"


def test_an_edit_clears_the_fault(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    set_aside(store, "poll", REASON)

    edited = cli.json("edit", "poll", "--task", "feeds.poll_v2")

    assert (edited["set_aside"], edited["fault"], edited["faults"]) == (False, None, 0)
    assert table_rows(cli.ok("list").stdout)[0]["STATE"] == "enabled"


# -- status ---------------------------------------------------------------------------------
def test_status_says_when_nothing_is_set_aside(cli: Cli) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")

    assert field_values(cli.ok("status").stdout)["set aside"] == ["none"]
    assert cli.json("status")["set_aside"] == {"count": 0, "schedules": []}


def test_status_counts_the_set_aside_schedules_and_names_them_with_reasons(
    cli: Cli, store: Store
) -> None:
    for name in ("a", "b", "healthy"):
        cli.ok("add", name, "feeds.poll", "--every", "60")
    set_aside(store, "a", "first reason", times=2)
    set_aside(store, "b", "second reason")

    lines = field_values(cli.ok("status").stdout)
    status = cli.json("status")

    assert lines["set aside"] == ["2 schedules", "a: first reason", "b: second reason"]
    assert status["set_aside"]["count"] == 2
    first, second = status["set_aside"]["schedules"]
    stored = store.get_schedule("a")
    assert (first["name"], first["fault"], first["faults"]) == ("a", "first reason", 2)
    assert instant(first["fault_at"]) == stored.fault_at
    assert instant(first["retry_at"]) == stored.next_run_at
    assert (second["name"], second["fault"], second["faults"]) == ("b", "second reason", 1)


def test_status_names_at_most_ten_set_aside_schedules(cli: Cli, store: Store) -> None:
    names = [f"s{i:02d}" for i in range(12)]
    for name in names:
        cli.ok("add", name, "feeds.poll", "--every", "60")
        set_aside(store, name, REASON)

    lines = field_values(cli.ok("status").stdout)["set aside"]
    status = cli.json("status")["set_aside"]

    assert lines[0] == "12 schedules"
    assert lines[1:11] == [f"{name}: {REASON}" for name in names[:10]]
    assert lines[11] == (f"and 2 more: `celery -A {cli.module} goatbeat list --set-aside` lists "
                         "them all")
    assert len(lines) == 12
    assert status["count"] == 12
    assert [s["name"] for s in status["schedules"]] == names[:10]


# -- rows edited by hand --------------------------------------------------------------------
def test_corrupt_rows_can_be_listed_shown_and_removed(
    cli: Cli, store: Store, pg_tables_engine: sa.Engine
) -> None:
    cli.ok("add", "healthy", "feeds.poll", "--every", "60")
    insert_row(pg_tables_engine, "torn-trigger", trigger="{}")
    insert_row(pg_tables_engine, "torn-columns", args="5", kwargs="[1]",
               misfire_policy="bogus", misfire_grace_seconds="NaN")

    rows = {row["NAME"]: row for row in table_rows(cli.ok("list").stdout)}
    listed = {s["name"]: s for s in cli.json("list")}

    assert rows["torn-trigger"]["STATE"] == rows["torn-columns"]["STATE"] == "set aside"
    assert rows["torn-trigger"]["TRIGGER"] == "invalid {}"
    assert rows["healthy"]["STATE"] == "enabled"
    assert _columns(listed["torn-trigger"]["damage"]) == ["trigger"]
    assert set(_columns(listed["torn-columns"]["damage"])) == {
        "args", "kwargs", "misfire_policy", "misfire_grace_seconds"}
    assert listed["torn-columns"]["set_aside"] is True
    assert listed["torn-trigger"]["trigger"] == {"kind": "invalid"}

    torn = field_values(cli.ok("show", "torn-columns").stdout)
    assert set(_columns(torn["damage"])) == {
        "args", "kwargs", "misfire_policy", "misfire_grace_seconds"}
    assert torn["set aside"] == ["not yet: the leader sets it aside when it next reads it"]
    trigger = field_values(cli.ok("show", "torn-trigger").stdout)
    assert trigger["trigger"] == ["invalid {}"]
    assert _columns(trigger["damage"]) == ["trigger"]
    shown = cli.json("show", "torn-trigger")
    assert (shown["set_aside"], _columns(shown["damage"])) == (True, ["trigger"])

    assert cli.ok("remove", "torn-trigger", "--yes").stdout.strip() == "removed 'torn-trigger'"
    assert cli.json("remove", "torn-columns", "--yes") == {"removed": "torn-columns"}
    assert [s.name for s in store.list_schedules()] == ["healthy"]


def test_a_corrupt_row_is_removed_after_the_prompt(
    cli: Cli, store: Store, pg_tables_engine: sa.Engine
) -> None:
    insert_row(pg_tables_engine, "torn", trigger='"every minute"', task="proj.tasks.tick")

    result = cli.ok("remove", "torn", input="y\n")

    assert "Remove schedule 'torn' (invalid {}, proj.tasks.tick)?" in result.output
    assert store.list_schedules() == []


def test_a_set_aside_corrupt_row_shows_its_fault_and_its_damage(
    cli: Cli, store: Store, pg_tables_engine: sa.Engine
) -> None:
    insert_row(pg_tables_engine, "torn", trigger="{}", options="[]")
    set_aside(store, "torn", "the stored row cannot be read", retry_in=600)

    lines = field_values(cli.ok("show", "torn").stdout)
    status = cli.json("status")["set_aside"]

    assert lines["set aside"] == ["the stored row cannot be read"]
    assert lines["times in a row"] == ["1"]
    assert sorted(_columns(lines["damage"])) == ["options", "trigger"]
    assert status["count"] == 1
    assert sorted(_columns(status["schedules"][0]["damage"])) == ["options", "trigger"]


def test_status_and_history_work_beside_a_corrupt_row(
    cli: Cli, pg_tables_engine: sa.Engine
) -> None:
    insert_row(pg_tables_engine, "torn", trigger="{}", args='{"a": 1}',
               offset_seconds="Infinity", jitter_seconds="NaN", max_catchup=0)

    cli.ok("status")
    assert cli.ok("history", "torn").stdout.strip() == "no executions of 'torn' yet"
    shown = cli.json("show", "torn")
    assert "args" in _columns(shown["damage"])


def test_a_corrupt_row_is_not_paused_over_its_unreadable_columns(
    cli: Cli, store: Store, pg_tables_engine: sa.Engine
) -> None:
    insert_row(pg_tables_engine, "torn", args="5", misfire_policy="bogus")
    before = store.get_schedule("torn")

    result = cli.fails("pause", "torn")

    assert "  - args: expected a JSON array, found 5\n" in result.stderr
    assert ("  - misfire_policy: unknown policy 'bogus'; use one of: latest, all, skip\n"
            in result.stderr)
    assert "cannot be read as stored; edit it giving --args, --misfire-policy anew" in \
        result.stderr
    assert store.get_schedule("torn") == before


def test_an_edit_giving_the_unreadable_columns_anew_repairs_a_corrupt_row(
    cli: Cli, store: Store, pg_tables_engine: sa.Engine
) -> None:
    insert_row(pg_tables_engine, "torn", args="5", misfire_policy="bogus")

    refused = cli.fails("edit", "torn", "--args", "[1]").stderr
    # What the row holds is named by its column, what to give by its option.
    assert "  - misfire_policy: unknown policy 'bogus'; use one of: latest, all, skip\n" in refused
    assert "edit it giving --misfire-policy anew" in refused
    assert "args: expected" not in refused
    edited = cli.json("edit", "torn", "--args", "[1]", "--misfire-policy", "skip")

    assert (edited["set_aside"], edited["damage"], edited["args"]) == (False, [], [1])
    assert table_rows(cli.ok("list").stdout)[0]["STATE"] == "enabled"
    assert store.get_schedule("torn").damage == ()
