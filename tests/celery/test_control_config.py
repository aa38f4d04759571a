"""The schedule controls read from ``goatbeat`` options of beat_schedule entries: bounds as
aware datetimes or ISO-8601 text, a run limit, a description and tags, checked as the API
checks them, every problem at once."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from goatbeat_celery.config import load
from goatbeat_celery.core.types.errors import ConfigurationError

from .support import entry, make_app

UTC = timezone.utc


def test_an_entry_gives_every_control_under_its_goatbeat_options() -> None:
    app = make_app(beat_schedule={"poll": entry(
        start_at="2030-01-01T09:00:00+01:00", end_at=datetime(2030, 2, 1, tzinfo=UTC),
        max_runs=10, description="Polls the vendor.", tags=["vendor", "eu"])})
    (spec,) = load(app).schedules
    assert spec.start_at == datetime(2030, 1, 1, 8, 0, tzinfo=UTC)
    assert spec.end_at == datetime(2030, 2, 1, tzinfo=UTC)
    assert (spec.max_runs, spec.description, spec.tags) == (10, "Polls the vendor.",
                                                            ("vendor", "eu"))


def test_an_entry_without_controls_keeps_its_hash() -> None:
    (plain,) = load(make_app(beat_schedule={"poll": entry()})).schedules
    (described,) = load(make_app(beat_schedule={"poll": entry(description="x")})).schedules
    assert (plain.start_at, plain.max_runs, plain.tags) == (None, None, ())
    # A changed description is a changed entry: config sync writes it again.
    assert plain.spec_hash() != described.spec_hash()


def test_bad_controls_in_an_entry_are_all_reported() -> None:
    with pytest.raises(ConfigurationError) as raised:
        load(make_app(beat_schedule={"poll": entry(
            start_at="tomorrow", end_at=datetime(2030, 1, 1),  # noqa: DTZ001 - refused
            max_runs=0, tags=["two words"])}))
    text = "\n".join(raised.value.problems)
    for expected in ("beat_schedule['poll'].goatbeat.start_at: cannot read 'tomorrow'",
                     "beat_schedule['poll'].goatbeat.end_at: naive datetime",
                     "max_runs: must be an integer from 1",
                     "tags: 'two words' contains whitespace"):
        assert expected in text, text


def test_an_end_before_the_start_is_refused_naming_both() -> None:
    start = datetime(2030, 1, 2, tzinfo=UTC)
    with pytest.raises(ConfigurationError, match="end_at: .* is before start_at"):
        load(make_app(beat_schedule={"poll": entry(start_at=start,
                                                    end_at=start - timedelta(days=1))}))


def test_an_entry_observes_calendars_by_name() -> None:
    app = make_app(beat_schedule={"poll": entry(calendars=["holidays", "freeze"])})
    (spec,) = load(app).schedules
    assert spec.calendars == ("holidays", "freeze")
    (plain,) = load(make_app(beat_schedule={"poll": entry()})).schedules
    # Observing a calendar is a changed entry: config sync writes it again.
    assert plain.spec_hash() != spec.spec_hash()


@pytest.mark.parametrize("calendars", ["holidays", ["two words"], ["a", "a"]])
def test_calendars_of_the_wrong_shape_in_an_entry_are_refused(calendars: object) -> None:
    with pytest.raises(ConfigurationError, match="calendars: "):
        load(make_app(beat_schedule={"poll": entry(calendars=calendars)}))


def test_a_config_entry_observing_a_missing_calendar_is_set_aside_naming_it() -> None:
    from goatbeat_celery.api import Schedules
    from goatbeat_celery.config import base_registry
    from goatbeat_celery.testing import ManualClock, MemoryStore, RecordingSubmitter, build_engine

    (spec,) = load(make_app(beat_schedule={"poll": entry(calendars=["holidays"])})).schedules
    clock = ManualClock()
    store = MemoryStore(clock)
    submitter = RecordingSubmitter()
    engine = build_engine(store, clock=clock, submitter=submitter, holder="a",
                          triggers=base_registry(), config_schedules=[spec])
    engine.tick()
    clock.advance(61)
    engine.tick()
    fault = store.get_schedule("poll").fault
    assert fault is not None and "no calendar named 'holidays'" in fault
    assert submitter.dispatches == []
    # Once the calendar exists, the schedule runs again at its next retry.
    Schedules(store).create_calendar("holidays")
    assert Schedules(store).get_calendar("holidays").version == 1
