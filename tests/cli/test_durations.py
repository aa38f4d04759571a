"""Durations are typed as the tables print them (``1m30s``, ``2d``, ``0.25s``) or as seconds,
in every option that takes one, and settings and ``beat_schedule`` entries take them too."""

from __future__ import annotations

from datetime import timedelta

import pytest

from goatbeat_celery.core.types.instants import DURATION_FORMS
from goatbeat_celery.store import Store

from .conftest import Cli, field_lines

USAGE = 2


@pytest.mark.parametrize(("every", "seconds"), [
    ("1m", 60), ("90s", 90), ("1h30m", 5400), ("2d", 172_800), ("1.5h", 5400), ("60", 60),
    ("1.5", 1.5),
])
def test_every_takes_a_duration_with_units_or_seconds(cli: Cli, store: Store, every: str,
                                                      seconds: float) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", every)

    assert store.get_schedule("poll").spec.trigger.params["every"] == seconds


def test_what_show_prints_is_accepted_back(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "5400", "--misfire-grace", "300",
           "--offset", "90")
    shown = field_lines(cli.ok("show", "poll").stdout)
    assert (shown["trigger"], shown["misfire grace"], shown["offset"]) == (
        "every 1h30m", "5m", "offset 1m30s")

    cli.ok("add", "copy", "feeds.poll", "--every", shown["trigger"].removeprefix("every "),
           "--misfire-grace", shown["misfire grace"],
           "--offset", shown["offset"].removeprefix("offset "))

    original, copy = store.get_schedule("poll").spec, store.get_schedule("copy").spec
    assert copy.spec_hash() == original.spec_hash()


def test_edit_takes_durations_too(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "1m")

    cli.ok("edit", "poll", "--every", "2d", "--misfire-grace", "1h", "--jitter", "30s")

    spec = store.get_schedule("poll").spec
    assert spec.trigger.params["every"] == 172_800
    assert (spec.misfire_grace, spec.jitter) == (timedelta(hours=1), timedelta(seconds=30))


@pytest.mark.parametrize(("option", "value", "reason"), [
    ("--every", "1x", f"cannot read '1x' as a duration; give {DURATION_FORMS}"),
    ("--every", "0s", "must be more than zero, got '0s'"),
    ("--every", "nan", "must be a finite duration, got 'nan'"),
    ("--every", "inf", "must be a finite duration, got 'inf'"),
    ("--misfire-grace", "-1m", "must not be negative, got '-1m'"),
    ("--offset", "30m1h", "cannot read '30m1h' as a duration"),
    ("--jitter", "-5", "must not be negative, got '-5'"),
], ids=lambda v: str(v))
def test_a_bad_duration_is_refused_naming_the_option(cli: Cli, store: Store, option: str,
                                                     value: str, reason: str) -> None:
    every = () if option == "--every" else ("--every", "1h")

    result = cli.fails("add", "poll", "feeds.poll", *every, option, value, exit_code=USAGE)

    assert f"Invalid value for '{option}': {reason}" in result.stderr
    assert store.list_schedules() == []


def test_settings_and_beat_schedule_entries_take_durations(cli: Cli) -> None:
    cli.configure(goatbeat_statement_timeout="2s", beat_schedule={
        "tick": {"task": "proj.tick", "schedule": 60, "options": {
            "goatbeat": {"offset": "10s", "misfire_grace": "5m", "jitter": None}}},
    })

    checks = {c["name"]: c for c in cli.json("check")["checks"]}

    assert checks["settings"]["status"] == "ok", checks["settings"]["detail"]
    assert checks["beat_schedule"] == {"name": "beat_schedule", "ok": True, "status": "ok",
                                       "detail": "1 valid entry"}


def test_a_bad_duration_setting_is_named(cli: Cli) -> None:
    cli.configure(beat_schedule={
        "tick": {"task": "proj.tick", "schedule": 60, "goatbeat": {"offset": "soon"}},
    })

    result = cli.fails("check")

    assert "beat_schedule['tick'].goatbeat.offset: cannot read 'soon' as a duration" \
        in result.stdout
