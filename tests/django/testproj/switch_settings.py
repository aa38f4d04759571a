"""The test project as tests/django/processes.py runs it in real processes (beat, worker): a
Redis broker and a queue of the test's own, the task that records its runs, and for
tests/django/test_switch.py the solar entry the import's advice gives for the periodic task
it refuses."""

from __future__ import annotations

import os
from typing import Any

from celery.schedules import solar

from tests.django.testproj.settings import *  # noqa: F403

#: The solar periodic task of the test, and the task every periodic task runs.
SOLAR_NAME = "noon"
RECORD_TASK = "switch.record"


def beat_schedule(latitude: float, longitude: float) -> dict[str, Any]:
    """CELERY_BEAT_SCHEDULE with the entry the import's advice gives for the solar task."""
    return {SOLAR_NAME: {"task": RECORD_TASK,
                         "schedule": solar("solar_noon", latitude, longitude),
                         "args": [SOLAR_NAME]}}


if "SWITCH_QUEUE" in os.environ:
    CELERY_BROKER_URL = os.environ["SWITCH_BROKER_URL"]
    CELERY_TASK_DEFAULT_QUEUE = os.environ["SWITCH_QUEUE"]
    CELERY_IMPORTS = ["tests.django.testproj.switch_tasks"]
    if "SWITCH_SOLAR" in os.environ:
        _latitude, _longitude = (float(part) for part in os.environ["SWITCH_SOLAR"].split(","))
        CELERY_BEAT_SCHEDULE = beat_schedule(_latitude, _longitude)
    # django-celery-beat's DatabaseScheduler looks for changed periodic tasks once a loop: at
    # most a second (5 s by default) after the export, it runs what goatbeat ran.
    CELERY_BEAT_MAX_LOOP_INTERVAL = 1
