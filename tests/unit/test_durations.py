"""Durations are read as the CLI prints them (``1m30s``, ``2d``, ``0.25s``) and as seconds.

One parser, in the core, serves every place a duration is read: settings, the API, config
entries (through :func:`to_timedelta`) and the CLI's options (through :func:`parse_duration`).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.instants import DURATION_FORMS, parse_duration, to_timedelta
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.display import human_seconds


@pytest.mark.parametrize(("text", "seconds"), [
    ("60", 60), ("0.5", 0.5), ("1m", 60), ("90s", 90), ("1h30m", 5400), ("2d", 172_800),
    ("1.5h", 5400), ("1d2h3m4.5s", 93_784.5), (" 1h 30m ", 5400), (".5m", 30), ("0s", 0),
])
def test_a_duration_is_read_with_units_or_as_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert to_timedelta(text, "every") == timedelta(seconds=seconds)


@pytest.mark.parametrize("seconds", [1, 0.25, 60, 90, 3600, 5400, 86_400, 93_784.5, 1_000_000])
def test_every_duration_the_cli_prints_is_read_back(seconds: float) -> None:
    assert parse_duration(human_seconds(seconds)) == pytest.approx(seconds)


@pytest.mark.parametrize(("text", "reason"), [
    ("nan", "must be a finite duration, got 'nan'"),
    ("inf", "must be a finite duration, got 'inf'"),
    ("1e400", "must be a finite duration"),
    ("-1m", "must not be negative, got '-1m'"),
    ("-5", "must not be negative, got '-5'"),
    ("1x", f"cannot read '1x' as a duration; give {DURATION_FORMS}"),
    ("", "cannot read '' as a duration"),
    ("1h30", "cannot read '1h30'"),
    ("30m1h", "cannot read '30m1h'"),  # largest unit first, as printed
    ("500ms", "cannot read '500ms'"),
    ("1.2.3s", "cannot read '1.2.3s'"),
    ("m", "cannot read 'm'"),
])
def test_a_bad_duration_is_refused_naming_the_field_and_the_forms(text: str,
                                                                   reason: str) -> None:
    with pytest.raises(ValueError, match="^" + reason.replace("(", r"\(").replace(")", r"\)")
                       .replace(".", r"\.")):
        parse_duration(text)
    problems: list[Problem] = []

    assert to_timedelta(text, "misfire_grace", problems) == timedelta(0)
    assert len(problems) == 1 and problems[0].field == "misfire_grace"
    assert problems[0].text.startswith(f"misfire_grace: {reason}")
    with pytest.raises(ConfigurationError, match="misfire_grace: "):
        to_timedelta(text, "misfire_grace")


def test_the_forms_are_listed_where_a_text_cannot_be_read() -> None:
    problems: list[Problem] = []

    to_timedelta("soon", "offset", problems)

    assert problems == [Problem("offset", "cannot read 'soon' as a duration",
                                f"give {DURATION_FORMS}")]
    assert "90s" in DURATION_FORMS and "1h30m" in DURATION_FORMS and "0.5" in DURATION_FORMS


def test_a_duration_text_beyond_the_longest_duration_is_refused() -> None:
    problems: list[Problem] = []

    to_timedelta("9999999d", "retention", problems)

    assert problems and str(problems[0]).startswith("retention: must be at most 3650 days")


def test_the_api_takes_durations_as_text() -> None:
    from goatbeat_celery.api import Schedules
    from goatbeat_celery.store import open_store

    with Schedules(open_store("memory://")) as schedules:
        schedule = schedules.create("poll", "feeds.poll", every="1m", misfire_grace="5m",
                                    offset="10s")  # type: ignore[arg-type]
        edited = schedules.update("poll", every="1h30m")  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="every: cannot read '1x' as a duration"):
            schedules.create("bad", "feeds.poll", every="1x")  # type: ignore[arg-type]

    assert schedule.spec.trigger.params["every"] == 60
    assert (schedule.spec.misfire_grace, schedule.spec.offset) == (
        timedelta(minutes=5), timedelta(seconds=10))
    assert edited.spec.trigger.params["every"] == 5400
