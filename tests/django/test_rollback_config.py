"""The way back to django-celery-beat needs no edit: its ``DatabaseScheduler`` starts with the
``beat_schedule`` goatbeat's scheduler starts with, goatbeat's options under
``options["goatbeat"]``; it stores each entry as a periodic task with the Celery options it
knows, and leaves goatbeat's out."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery

from goatbeat_celery import Scheduler


@pytest.fixture
def periodic_tasks(django_db: str) -> Iterator[Any]:
    from django_celery_beat.models import PeriodicTask

    PeriodicTask.objects.all().delete()
    yield PeriodicTask
    PeriodicTask.objects.all().delete()


def app_with(entry: dict[str, Any], database_url: str = "") -> Celery:
    app = Celery("rollback", set_as_current=False)
    app.conf.update(broker_url="memory://", timezone="UTC", goatbeat_database_url=database_url,
                    beat_schedule={"nightly": {"task": "proj.nightly", "schedule": 60.0,
                                               **entry}})
    return app


def started(entry: dict[str, Any]) -> Any:
    """django-celery-beat's scheduler started (not lazily) on an app with ``entry``."""
    from django_celery_beat.schedulers import DatabaseScheduler

    return DatabaseScheduler(app=app_with(entry))


def test_database_scheduler_starts_with_goatbeats_options_under_options(
        periodic_tasks: Any, django_db: str, caplog: pytest.LogCaptureFixture):
    entry = {"options": {"queue": "nightly", "priority": 3, "goatbeat": {
        "misfire_policy": "all", "jitter": 5}}}
    goatbeats = Scheduler(app_with(entry, django_db), lazy=True)  # reads and checks the config
    assert "nightly" in goatbeats.schedule
    goatbeats.close()
    caplog.set_level(logging.WARNING)
    scheduler = started(entry)
    try:
        assert "nightly" in scheduler.schedule
    finally:
        scheduler.close()
    task = periodic_tasks.objects.get(name="nightly")
    assert (task.task, task.queue, task.priority) == ("proj.nightly", "nightly", 3)
    assert "goatbeat" not in task.headers
    assert [record for record in caplog.records if record.levelno >= logging.ERROR] == []


def test_the_top_level_key_is_what_would_need_an_edit(periodic_tasks: Any,
                                                      caplog: pytest.LogCaptureFixture):
    """Why goatbeat warns about the older spelling: django-celery-beat refuses the entry."""
    caplog.set_level(logging.ERROR)
    scheduler = started({"goatbeat": {"misfire_policy": "all"}})
    scheduler.close()
    assert not periodic_tasks.objects.filter(name="nightly").exists()
    assert "nightly" in caplog.text
