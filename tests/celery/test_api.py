"""The Schedules API on the SQLite store: cron day semantics and edits that keep the zone."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.config import GoatbeatConfig
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.store import open_store


@pytest.fixture
def schedules(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'api.sqlite3'}"
    api = Schedules(open_store(url), config=GoatbeatConfig(database_url=url),
                    default_timezone="UTC")
    yield api
    api.close()


def test_cron_days_match_either_by_default_and_both_with_day_or_false(schedules: Schedules):
    either = schedules.create("either", "t", cron="0 0 13 * fri")
    both = schedules.create("both", "t", cron="0 0 13 * fri", day_or=False)
    after = datetime(2026, 1, 1, tzinfo=timezone.utc)
    build = schedules.triggers.build
    # 2026-01-02 is a Friday; the first Friday the 13th of 2026 is in February.
    assert build(either.spec.trigger).next_after(after) == datetime(2026, 1, 2,
                                                                    tzinfo=timezone.utc)
    assert build(both.spec.trigger).next_after(after) == datetime(2026, 2, 13,
                                                                  tzinfo=timezone.utc)


def test_editing_a_cron_expression_keeps_its_zone_and_day_semantics(schedules: Schedules):
    schedules.create("report", "t", cron="0 7 * * mon", timezone="Europe/Paris", day_or=False)
    updated = schedules.update("report", cron="30 8 * * mon")
    assert updated.spec.trigger.params == {"expression": "30 8 * * mon",
                                           "timezone": "Europe/Paris", "day_or": False}
    rezoned = schedules.update("report", timezone="Asia/Tokyo")
    assert rezoned.spec.trigger.params["expression"] == "30 8 * * mon"
    assert rezoned.spec.trigger.params["timezone"] == "Asia/Tokyo"
    assert rezoned.row_version == updated.row_version + 1


# -- validation at the door: every problem named, nothing stored ----------------------------

BAD_INPUTS = {
    "retry-option": ({"options": {"retry": False}}, "options.retry"),
    "countdown-text": ({"options": {"countdown": "soon"}}, "options.countdown"),
    "unknown-serializer": ({"options": {"serializer": "nope"}}, "options.serializer"),
    "unknown-compression": ({"options": {"compression": "nope"}}, "options.compression"),
    "queue-number": ({"options": {"queue": 5}}, "options.queue"),
    "task-id": ({"options": {"task_id": "mine"}}, "options.task_id"),
    "headers-list": ({"options": {"headers": [1]}}, "options.headers"),
    "options-list": ({"options": [1]}, "options"),
    "args-text": ({"args": "abc"}, "args"),
    "kwargs-list": ({"kwargs": [1]}, "kwargs"),
    "kwargs-int-key": ({"kwargs": {1: "x"}}, "kwargs"),
    "huge-args": ({"args": ["x" * 70_000]}, "args"),
    "huge-grace": ({"misfire_grace": 1e12}, "misfire_grace"),
    "nan-grace": ({"misfire_grace": float("nan")}, "misfire_grace"),
    "tiny-every": ({"every": 1e-6}, "every"),
    "nan-every": ({"every": float("nan")}, "every"),
    "inf-every": ({"every": float("inf")}, "every"),
    "huge-jitter": ({"jitter": 1e12}, "jitter"),
    "huge-catchup": ({"max_catchup": 10**9}, "max_catchup"),
    "long-name": ({"name": "x" * 10_000}, "name"),
    "rtl-name": ({"name": "report\u202egnp.exe"}, "name"),
    "newline-name": ({"name": "a\nb"}, "name"),
    "spaced-task": ({"task": "app.t ask"}, "task"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_refused_naming_the_field_and_nothing_is_stored(schedules: Schedules,
                                                                     case: str):
    changes, field = BAD_INPUTS[case]
    values = {"name": "job", "task": "app.job", "every": 60, **changes}
    with pytest.raises(ConfigurationError) as raised:
        schedules.create(**values)
    assert any(f"{field}:" in problem for problem in raised.value.problems), \
        raised.value.problems
    assert len(str(raised.value)) < 2_000, "the message quotes a long value in full"
    assert schedules.list() == []


def test_every_problem_of_one_call_is_reported_at_once(schedules: Schedules):
    with pytest.raises(ConfigurationError) as raised:
        schedules.create("a\tb", "app.job", every=float("nan"), args="abc",
                         options={"retry": False, "queue": 5})
    # A problem reads "[schedule '<name>': ]<field>: <what to do>".
    fields = {problem.removeprefix("schedule 'a\\tb': ").split(": ")[0]
              for problem in raised.value.problems}
    assert {"name", "every", "args", "options.retry", "options.queue"} <= fields


def test_a_manual_run_never_shares_a_key_with_a_schedule_named_like_it(schedules: Schedules):
    schedules.create("x", "app.job", every=60)
    schedules.create("x:manual", "app.job", every=60)
    manual = schedules.run_now("x")
    assert not manual.key.startswith("x:manual:")
    assert manual.key.endswith(":manual")


# -- rows damaged by hand ----------------------------------------------------------------------

def _corrupt(path: Path, column: str, value: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(f"UPDATE goatbeat_schedule SET {column} = ? WHERE name = 'job'", (value,))


def test_a_damaged_row_is_listed_and_shown_with_what_cannot_be_read(schedules: Schedules,
                                                                    tmp_path: Path):
    schedules.create("job", "app.job", every=60)
    _corrupt(tmp_path / "api.sqlite3", "trigger", "{}")

    [listed] = schedules.list()
    shown = schedules.get("job")

    assert listed.damage == shown.damage
    assert shown.damage and shown.damage[0].field == "trigger"


def test_a_damaged_row_is_not_paused_over_its_unreadable_columns(schedules: Schedules,
                                                                 tmp_path: Path):
    schedules.create("job", "app.job", every=60, args=(1, 2))
    _corrupt(tmp_path / "api.sqlite3", "trigger", "{}")

    for write in (schedules.pause, schedules.resume, schedules.run_now):
        with pytest.raises(ConfigurationError) as raised:
            write("job")
        assert ("edit it giving at, cron, every, rrule, solar anew, or delete it"
                in str(raised.value))
    with pytest.raises(ConfigurationError):
        schedules.update("job", args=(3,))


def test_an_edit_giving_the_damaged_columns_anew_repairs_the_row(schedules: Schedules,
                                                                 tmp_path: Path):
    schedules.create("job", "app.job", every=60, args=(1, 2))
    _corrupt(tmp_path / "api.sqlite3", "trigger", "{}")

    repaired = schedules.update("job", every=30)

    assert repaired.damage == () and repaired.fault is None
    assert repaired.spec.args == (1, 2), "the readable columns are kept"
    assert repaired.next_run_at is not None


def test_a_damaged_row_can_be_deleted(schedules: Schedules, tmp_path: Path):
    schedules.create("job", "app.job", every=60)
    _corrupt(tmp_path / "api.sqlite3", "options", "not json at all")

    schedules.delete("job")

    assert schedules.list() == []


def test_an_edit_equal_to_a_damaged_columns_stand_in_still_rewrites_it(schedules: Schedules,
                                                                      tmp_path: Path):
    schedules.create("job", "app.job", every=60, args=(1,))
    _corrupt(tmp_path / "api.sqlite3", "args", "5")

    repaired = schedules.update("job", args=())

    assert repaired.damage == ()
    assert schedules.get("job").damage == ()
