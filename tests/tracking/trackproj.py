"""The system tests' Celery app (tests/system/sysproj.py) with run tracking turned on, and a
task whose duration and outcome the scenario chooses.

``trackproj.work(label, seconds=0, fail=False)`` notes its process id under its task id (in the
hash ``<record key>:pids``), sleeps ``seconds``, appends what it saw to the scenario's Redis
list (task id, schedule, when it started by the wall clock, how long its body took by its own
monotonic clock) and then raises ValueError("boom") when ``fail``. A delivery the worker
suppresses as a duplicate is appended to ``<record key>:suppressed``.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from sysproj import RECORD_KEY, _redis, app, append_record

from goatbeat_celery import signals, track_runs

__all__ = ["app"]

track_runs(app)


@signals.run_duplicate_suppressed.connect
def _suppressed(sender: Any = None, key: str = "", reason: str = "", **_: Any) -> None:
    """Each delivery the worker acknowledged and did not run, in ``<record key>:suppressed``."""
    _redis.rpush(f"{RECORD_KEY}:suppressed", json.dumps({"id": key, "reason": reason,
                                                         "at": time.time()}))


@app.task(bind=True, name="trackproj.work")
def work(self: Any, label: str = "", seconds: float = 0.0, fail: bool = False) -> str:
    began_wall, began = time.time(), time.monotonic()
    request = self.request
    # Which process runs it, while it runs: a scenario may kill that pool process.
    _redis.hset(f"{RECORD_KEY}:pids", request.id, os.getpid())
    time.sleep(seconds)
    append_record(request, label, began_wall, body_seconds=time.monotonic() - began,
                  pid=os.getpid())
    if fail:
        raise ValueError("boom")
    return label
