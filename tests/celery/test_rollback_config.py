"""The way back needs no edit: a ``beat_schedule`` whose entries carry goatbeat's options under
``options["goatbeat"]`` starts under goatbeat and under Celery's own ``PersistentScheduler``
alike, and goatbeat applies those options and sends none of them as a message option. The
entry's older top-level ``goatbeat`` key still works, with a warning at start, since Celery's
``ScheduleEntry`` refuses it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from celery import Celery, beat

from goatbeat_celery.beat.scheduler import Scheduler
from goatbeat_celery.core.types.spec import MisfirePolicy
from goatbeat_celery.store import open_store

OWN = {"misfire_policy": "all", "max_catchup": 3}


def app_with(tmp_path: Path, entry: dict[str, Any]) -> Celery:
    app = Celery("rollback", set_as_current=False)
    app.conf.update(broker_url="memory://", result_backend="cache+memory://",
                    goatbeat_database_url=f"sqlite:///{tmp_path / 'goatbeat.sqlite3'}",
                    goatbeat_max_interval=0.2,
                    beat_schedule={"nightly": {"task": "proj.nightly", "schedule": 60.0,
                                               **entry}})
    return app


def stored_spec(tmp_path: Path) -> Any:
    store = open_store(f"sqlite:///{tmp_path / 'goatbeat.sqlite3'}")
    try:
        return store.get_schedule("nightly").spec
    finally:
        store.close()


def test_options_goatbeat_start_under_celerys_scheduler_and_apply_under_goatbeats(
        tmp_path: Path):
    app = app_with(tmp_path, {"options": {"queue": "nightly", "goatbeat": OWN}})
    celerys = beat.PersistentScheduler(app, schedule_filename=str(tmp_path / "celerybeat"))
    try:
        assert sorted(celerys.schedule) == ["nightly"]
        assert celerys.schedule["nightly"].options == {"queue": "nightly", "goatbeat": OWN}
    finally:
        celerys.close()
    ours = Scheduler(app)
    try:
        ours.tick()
        assert sorted(ours.schedule) == ["nightly"]
    finally:
        ours.close()
    spec = stored_spec(tmp_path)
    assert (spec.misfire_policy, spec.max_catchup) == (MisfirePolicy.ALL, 3)
    assert dict(spec.options) == {"queue": "nightly"}  # never a message option


def test_the_top_level_goatbeat_key_still_works_and_is_warned_about(
        tmp_path: Path, caplog: pytest.LogCaptureFixture):
    app = app_with(tmp_path, {"goatbeat": OWN})
    with pytest.raises(TypeError, match="goatbeat"):
        beat.PersistentScheduler(app, schedule_filename=str(tmp_path / "celerybeat"))
    caplog.set_level(logging.WARNING, logger="goatbeat_celery")
    ours = Scheduler(app)
    try:
        ours.tick()
    finally:
        ours.close()
    assert "beat_schedule['nightly'].goatbeat: deprecated; move it into the entry's options" \
        in caplog.text
    assert stored_spec(tmp_path).misfire_policy is MisfirePolicy.ALL


def test_goatbeat_options_in_both_places_are_refused_naming_both(tmp_path: Path):
    app = app_with(tmp_path, {"goatbeat": OWN, "options": {"goatbeat": {"jitter": 5}}})
    with pytest.raises(SystemExit, match=r"beat_schedule\['nightly'\]\.goatbeat: given here "
                                         r"and in options\['goatbeat'\]"):
        Scheduler(app, lazy=True)


def test_a_bad_option_under_options_goatbeat_is_named_where_it_was_given(tmp_path: Path):
    app = app_with(tmp_path, {"options": {"goatbeat": {"misfire_grace": "soon", "nope": 1}}})
    with pytest.raises(SystemExit) as raised:
        Scheduler(app, lazy=True)
    text = str(raised.value)
    assert "beat_schedule['nightly'].options.goatbeat.misfire_grace" in text
    assert "beat_schedule['nightly'].options.goatbeat.nope: unknown option" in text
