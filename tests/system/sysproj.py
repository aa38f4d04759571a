"""The Celery app the system tests run in real ``celery beat`` and ``celery worker`` processes.

Everything comes from the environment and a JSON file the test writes (``SYS_CONFIG``), so one
module serves every scenario. The ``sysproj.record`` task appends what it received (task id,
schedule, occurrence, token, arrival time) to a Redis list the test reads afterwards.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import time
from datetime import timedelta
from typing import Any

import redis
from celery import Celery
from celery.schedules import crontab

# `kill -USR1 <pid>` writes every thread's stack to the process's log (for diagnosis only).
faulthandler.register(signal.SIGUSR1)

with open(os.environ["SYS_CONFIG"]) as handle:
    CONFIG: dict[str, Any] = json.load(handle)

QUEUE = os.environ["SYS_QUEUE"]
RECORD_KEY = os.environ["SYS_RECORD_KEY"]

app = Celery("sysproj", broker=os.environ["SYS_BROKER_URL"])
app.conf.update(
    timezone=CONFIG.get("timezone", "UTC"),
    task_default_queue=QUEUE,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    goatbeat_database_url=os.environ["SYS_DATABASE_URL"],
    **{f"goatbeat_{key}": value for key, value in CONFIG.get("settings", {}).items()},
)


def _schedule(entry: dict[str, Any]) -> Any:
    if "every" in entry:
        return timedelta(seconds=entry["every"])
    if "crontab" in entry:
        return crontab(**entry["crontab"])
    return entry["schedule"]


app.conf.beat_schedule = {
    name: {
        "task": entry.get("task", "sysproj.record"),
        "schedule": _schedule(entry),
        "args": entry.get("args", [name]),
        **({"goatbeat": entry["goatbeat"]} if "goatbeat" in entry else {}),
        **({"options": entry["options"]} if "options" in entry else {}),
    }
    for name, entry in CONFIG.get("schedules", {}).items()
}

_redis = redis.Redis.from_url(os.environ["SYS_RECORD_URL"])


def append_record(request: Any, label: str, received_at: float, **more: Any) -> None:
    """Append what a task received to the scenario's record list: its task id, label,
    goatbeat's headers and when it arrived, and ``more``."""
    _redis.rpush(RECORD_KEY, json.dumps({
        "id": request.id,
        "label": label,
        "schedule": getattr(request, "goatbeat_schedule", None),
        "occurrence": getattr(request, "goatbeat_occurrence", None),
        "token": getattr(request, "goatbeat_token", None),
        "received_at": received_at,
        **more,
    }))


@app.task(bind=True, name="sysproj.record")
def record(self: Any, label: str = "") -> None:
    append_record(self.request, label, time.time())


@app.task(bind=True, name="sysproj.where")
def where(self: Any, label: str = "") -> None:
    """As ``record``, with the queue the message came from and the worker that ran it."""
    append_record(self.request, label, time.time(),
                  queue=(self.request.delivery_info or {}).get("routing_key"),
                  worker=self.request.hostname)
