"""The view helpers on their own: escaping, and no exception whatever a schedule holds.

A row edited by hand reaches the views with stand-ins (a trigger of kind ``invalid`` and no
parameters) or with parameters of any JSON type; every helper must still give text.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from typing import Any

import pytest

from goatbeat_celery import display
from goatbeat_celery.core.rules.validation import hidden_characters
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec

NOW = datetime(2026, 11, 29, 21, 40, 2, tzinfo=UTC)
DEFAULTS = Settings()


def schedule(trigger: TriggerSpec, **fields: Any) -> Schedule:
    spec = ScheduleSpec(name="poll", task="feeds.poll", trigger=trigger)
    return Schedule(spec=spec, next_occurrence_at=NOW, next_run_at=NOW, **fields)


# -- shown ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    ("plain name", "plain name"),
    ("caf\u00e9 \u65e5\u672c", "caf\u00e9 \u65e5\u672c"),
    ("a\u00a0b", "a\u00a0b"),  # a no-break space is shown as a space
    ("back\\slash", "back\\slash"),
    ("two\nlines", "two\\nlines"),
    ("tab\there\rcr", "tab\\there\\rcr"),
    ("\x1b[31mred", "\\x1b[31mred"),
    ("nul\x00del\x7fc1\x85", "nul\\x00del\\x7fc1\\x85"),
    ("invoice\u202etxt.exe", "invoice\\u202etxt.exe"),
    ("zero\u200bwidth\ufeffbom", "zero\\u200bwidth\\ufeffbom"),
    ("line\u2028para\u2029", "line\\u2028para\\u2029"),
    ("isolate\u2066x\u2069", "isolate\\u2066x\\u2069"),
    ("tag\U000e0041", "tag\\U000e0041"),
    ("private\ue000", "private\\ue000"),
], ids=["plain", "unicode", "no-break-space", "backslash", "newline", "tab-cr", "escape",
        "c0-del-c1", "rlo", "invisible", "separators", "isolates", "astral", "private-use"])
def test_shown_escapes_exactly_what_a_terminal_would_not_show(text: str, expected: str) -> None:
    assert display.shown(text) == expected
    assert hidden_characters(display.shown(text)) == []


def test_shown_can_keep_the_line_breaks_of_a_message_built_here() -> None:
    message = "invalid schedule (2 problems):\n  - a\x1b\n  - b\u202e"

    assert display.shown(message, keep_newlines=True) == \
        "invalid schedule (2 problems):\n  - a\\x1b\n  - b\\u202e"


def test_table_escapes_every_cell_and_aligns_on_what_is_shown() -> None:
    text = display.table(("NAME", "TASK"), [("a\u202eb", "t\n1"), ("plain", "t")])

    assert text.splitlines() == [
        "NAME      TASK",
        "a\\u202eb  t\\n1",
        "plain     t",
    ]


def test_fields_escape_values_and_show_a_tuple_as_lines() -> None:
    text = display.fields([("name", "evil\nfake  line"), ("damage", ("args: x\x1b", "kwargs: y"))])

    assert text.splitlines() == [
        "name    evil\\nfake  line",
        "damage  args: x\\x1b",
        "        kwargs: y",
    ]


def test_a_json_document_is_ascii_and_reads_back_exactly() -> None:
    data = {"name": "invoice\u202etxt.exe", "task": "t\x1b", "note": "caf\u00e9"}

    text = display.document(data)

    assert text.isascii() and "\\u202e" in text
    assert json.loads(text) == data


# -- stand-ins and odd parameters -----------------------------------------------------------
ODD_TRIGGERS = [
    TriggerSpec(kind="invalid", params={}),
    TriggerSpec(kind="interval", params={}),
    TriggerSpec(kind="interval", params={"every": "60"}),
    TriggerSpec(kind="interval", params={"every": True}),
    TriggerSpec(kind="interval", params={"every": math.nan}),
    TriggerSpec(kind="interval", params={"every": math.inf}),
    TriggerSpec(kind="interval", params={"every": -5}),
    TriggerSpec(kind="interval", params={"every": 1e300}),
    TriggerSpec(kind="cron", params={}),
    TriggerSpec(kind="cron", params={"expression": 5, "timezone": ["Europe/Paris"]}),
    TriggerSpec(kind="cron", params={"expression": {"minute": 0}, "day_or": "no"}),
    TriggerSpec(kind="once", params={}),
    TriggerSpec(kind="once", params={"at": 12}),
    TriggerSpec(kind="once", params={"at": "tomorrow"}),
    TriggerSpec(kind="once", params={"at": "2030-01-01T00:00:00"}),
    TriggerSpec(kind="once", params={"at": "0001-01-01T00:00:00+05:00"}),
    TriggerSpec(kind="once", params={"at": "9999-12-31T23:59:59-05:00"}),
    TriggerSpec(kind="celery", params={}),
    TriggerSpec(kind="celery", params={"repr": None}),
    TriggerSpec(kind="solar", params={"event": "sunrise", "lat": 48.8, "lon": [2.3]}),
    TriggerSpec(kind="odd", params={"nested": {"b": [1, {"c": None}]}, "nan": math.nan}),
    TriggerSpec(kind="odd", params={"when": NOW, "keys": {1: "a", "b": 2}}),
    TriggerSpec(kind="", params={"\x1b": "\u202e"}),
    TriggerSpec(kind="not a mapping", params=[1, 2]),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("trigger", ODD_TRIGGERS, ids=[
    "stand-in", "interval-empty", "interval-text", "interval-bool", "interval-nan",
    "interval-inf", "interval-negative", "interval-huge", "cron-empty", "cron-number",
    "cron-object", "once-empty", "once-number", "once-text", "once-naive", "once-year-1",
    "once-year-10000", "celery-empty", "celery-null", "unknown-kind", "nested-and-nan",
    "python-objects", "control-characters", "params-not-a-mapping"])
def test_every_view_helper_gives_text_for_an_odd_trigger(trigger: TriggerSpec) -> None:
    odd = schedule(trigger, damage=(
        Problem("trigger", "expected a JSON object with a 'kind', found {}"),))

    description = display.describe_trigger(trigger)
    display.zone_of(trigger)
    row = display.schedule_row(odd, DEFAULTS, NOW)
    lines = display.fields(display.schedule_fields(odd, DEFAULTS, NOW))
    document = display.schedule_json(odd, DEFAULTS, NOW)

    assert isinstance(description, str) and description
    assert row[2] == description
    assert display.shown(description) in lines
    assert document["trigger"]["kind"] == trigger.kind
    assert document["description"] == description
    display.document(document)
    display.table(display.SCHEDULE_COLUMNS, [row])


def test_the_stand_in_trigger_is_described_by_its_kind() -> None:
    assert display.describe_trigger(TriggerSpec(kind="invalid", params={})) == "invalid {}"


@pytest.mark.parametrize(("trigger", "expected"), [
    (TriggerSpec(kind="interval", params={"every": 90}), "every 1m30s"),
    (TriggerSpec(kind="interval", params={"every": True}), 'interval {"every": true}'),
    (TriggerSpec(kind="interval", params={"every": math.nan}), 'interval {"every": NaN}'),
    (TriggerSpec(kind="cron", params={"expression": 5}), 'cron {"expression": 5}'),
    (TriggerSpec(kind="once", params={"at": "2030-01-01T01:00:00+01:00"}),
     "once at 2030-01-01T00:00:00Z"),
    (TriggerSpec(kind="once", params={"at": "tomorrow"}), "once at tomorrow"),
    (TriggerSpec(kind="once", params={"at": "0001-01-01T00:00:00+05:00"}),
     "once at 0001-01-01T00:00:00+05:00"),
    (TriggerSpec(kind="once", params={"at": 12}), 'once {"at": 12}'),
    (TriggerSpec(kind="celery", params={"repr": "<crontab: 0 7 * * *>"}),
     "celery <crontab: 0 7 * * *>"),
], ids=["interval", "interval-bool", "interval-nan", "cron-number", "once", "once-text",
        "once-out-of-range", "once-number", "celery"])
def test_odd_parameters_are_shown_as_stored(trigger: TriggerSpec, expected: str) -> None:
    assert display.describe_trigger(trigger) == expected


@pytest.mark.parametrize(("expression", "expected"), [
    ("0 9 1-7 * fri", "cron 0 9 1-7 * fri (day of month and day of week)"),
    ("30 7 * * mon-fri", "cron 30 7 * * mon-fri"),
    ("0 4 * * *", "cron 0 4 * * *"),
    ("0 0 13 * *", "cron 0 0 13 * *"),
])
def test_matching_both_days_is_said_only_where_it_differs_from_either(
        expression: str, expected: str) -> None:
    # Celery's crontab (day_or false) matches both day fields; cron matches either. With one
    # of them "*" the two rules pick the same days, and the note would only puzzle.
    trigger = TriggerSpec(kind="cron", params={"expression": expression, "day_or": False})
    assert display.describe_trigger(trigger) == expected


def test_a_duration_that_is_no_number_of_seconds_is_shown_as_it_is() -> None:
    assert display.human_seconds(math.nan) == "nans"
    assert display.human_seconds(math.inf) == "infs"
    assert display.human_seconds(-math.inf) == "-infs"


def test_compact_json_never_raises() -> None:
    looped: list[Any] = []
    looped.append(looped)

    assert display.compact_json({"b": 1, "a": [2]}) == '{"a": [2], "b": 1}'
    assert display.compact_json({1: "a", "b": 2}) == "{1: 'a', 'b': 2}"
    assert display.compact_json(looped) == "[[...]]"
    assert display.compact_json({"at": NOW}) == json.dumps({"at": repr(NOW)})


# -- set aside ------------------------------------------------------------------------------
def test_state_reads_enabled_paused_or_set_aside() -> None:
    trigger = TriggerSpec(kind="interval", params={"every": 60})
    healthy = schedule(trigger)
    faulted = schedule(trigger, fault="boom", fault_at=NOW, faults=2)
    damaged = schedule(trigger, damage=(Problem("args", "expected a JSON array, found 5"),))
    paused = Schedule(spec=ScheduleSpec(name="p", task="t", trigger=trigger, enabled=False),
                      next_occurrence_at=None, next_run_at=None, damage=damaged.damage)

    assert [display.state_text(s, NOW) for s in (healthy, faulted, damaged, paused)] == [
        "enabled", "set aside", "set aside", "paused, damaged"]


def test_fault_fields_say_why_since_when_how_often_and_when_next() -> None:
    faulted = schedule(TriggerSpec(kind="invalid", params={}), fault="boom\nagain",
                       fault_at=NOW - timedelta(minutes=3), faults=4,
                       damage=(Problem("trigger", "unreadable"), Problem("args", "unreadable")))

    pairs = dict(display.fault_fields(faulted, display.when))

    assert pairs == {
        "set aside": "boom\nagain",
        "set aside since": "2026-11-29T21:37:02Z",
        "times in a row": "4",
        "retry at": "2026-11-29T21:40:02Z",
        "damage": ("trigger: unreadable", "args: unreadable"),
    }
    assert "set aside        boom\\nagain" in display.fields(list(pairs.items()))


def test_set_aside_lines_count_and_cut_the_list_short() -> None:
    trigger = TriggerSpec(kind="interval", params={"every": 60})
    many = [Schedule(spec=ScheduleSpec(name=f"s{i:02d}", task="t", trigger=trigger),
                     next_occurrence_at=NOW, next_run_at=NOW, fault=f"reason {i}",
                     fault_at=NOW, faults=1) for i in range(12)]

    lines = display.set_aside_lines(many, "goatbeat list")
    document = display.set_aside_json(many)

    assert display.set_aside_lines([], "goatbeat list") == "none"
    assert lines[0] == "12 schedules" and lines[1] == "s00: reason 0"
    assert lines[-1] == "and 2 more: `goatbeat list --set-aside` lists them all"
    assert len(lines) == 1 + display.SET_ASIDE_SHOWN + 1
    assert document["count"] == 12 and len(document["schedules"]) == display.SET_ASIDE_SHOWN
    assert document["schedules"][0] == {
        "name": "s00", "fault": "reason 0", "fault_at": NOW.isoformat(), "faults": 1,
        "retry_at": NOW.isoformat(), "damage": []}
