"""The Celery schedule object each sent entry carries: one per trigger, a config entry's own."""

from __future__ import annotations

from datetime import timedelta

from celery import Celery
from celery.schedules import crontab, schedule

from goatbeat_celery.beat.entries import ScheduleObjects


def test_schedules_sharing_a_trigger_share_its_object_and_a_config_entry_keeps_its_own() -> None:
    app = Celery("objects", set_as_current=False)
    configured = schedule(timedelta(seconds=60))
    app.conf.beat_schedule = {"nightly": {"task": "t", "schedule": configured}}
    objects = ScheduleObjects(app)
    every_minute = {"kind": "interval", "every": 60}

    first = objects.get("a", every_minute)
    assert first == schedule(timedelta(seconds=60)) and first is not configured
    # The same trigger again, as another schedule of a burst holds it: the same object.
    assert objects.get("b", dict(every_minute)) is first
    # A config entry's own object, even right after another schedule's equal trigger.
    assert objects.get("nightly", every_minute) is configured
    assert objects.get("c", every_minute) is first
    # Another trigger, another object; the first is still kept.
    cron = objects.get("d", {"kind": "cron", "expression": "0 3 * * *"})
    assert isinstance(cron, crontab) and cron is not first
    assert objects.get("e", every_minute) is first
    assert objects.get("f", None) is None
