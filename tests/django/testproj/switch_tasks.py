"""The task the schedules of tests/django/processes.py's project run: it records each run it
makes (its task id, which scheduler sent it and the instant it ran) in a Redis list."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import redis

from goatbeat_celery import occurrence_of
from tests.django.testproj.celery import app
from tests.django.testproj.switch_settings import RECORD_TASK

_redis = redis.Redis.from_url(os.environ["SWITCH_RECORD_URL"])


@app.task(bind=True, name=RECORD_TASK)  # type: ignore[untyped-decorator]
def record(self: Any, name: str) -> None:
    request = self.request
    headers = request.headers if isinstance(request.headers, dict) else {}
    _redis.rpush(os.environ["SWITCH_RECORD_KEY"], json.dumps({
        "name": name,
        "id": request.id,
        # goatbeat's runs carry their occurrence; django-celery-beat's this header only.
        "goatbeat": occurrence_of(request) is not None,
        "periodic_task_name": getattr(request, "periodic_task_name", None)
                              or headers.get("periodic_task_name"),
        "ran_at": time.time(),
    }))
