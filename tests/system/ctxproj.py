"""A Celery project as a user writes one, for ``celery -A ctxproj beat -S
goatbeat_celery.Scheduler``: nothing in it calls ``set_default()``, its one task is registered
on this app only (``shared=False``), and a ``before_task_publish`` handler appends what it saw
(the current app, whether its registry has the task, the thread) to ``CTX_SEEN`` as JSON lines.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from celery import Celery, current_app, signals

app = Celery("ctxproj", broker=os.environ["CTX_BROKER_URL"])
app.conf.update(
    task_default_queue=os.environ["CTX_QUEUE"],
    broker_connection_retry_on_startup=True,
    goatbeat_database_url=os.environ["CTX_DATABASE_URL"],
    goatbeat_lease_ttl=3,
    goatbeat_lease_renew_interval=1,
    beat_schedule={"private-every-second": {"task": "ctxproj.private", "schedule": 1.0}},
)


@app.task(name="ctxproj.private", shared=False)
def private() -> None:
    """Sent by beat, never run here."""


@signals.before_task_publish.connect
def seen_at_publish(sender: Any = None, headers: Any = None, **kwargs: Any) -> None:
    if sender != "ctxproj.private":
        return
    record = {"app": current_app.main, "registered": sender in current_app.tasks,
              "thread": threading.current_thread().name,
              "task_id": (headers or {}).get("id"),
              "send": (headers or {}).get("goatbeat_send")}
    with open(os.environ["CTX_SEEN"], "a") as handle:
        handle.write(json.dumps(record) + "\n")
