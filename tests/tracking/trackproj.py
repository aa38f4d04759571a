"""The system tests' Celery app (tests/system/sysproj.py) with run tracking turned on, and a
task whose duration and outcome the scenario chooses.

``trackproj.work(label, seconds=0, fail=False)`` notes its process id under its task id (in the
hash ``<record key>:pids``), sleeps ``seconds``, appends what it saw to the scenario's Redis
list (task id, schedule, when it started by the wall clock, how long its body took by its own
monotonic clock) and then raises ValueError("boom") when ``fail``. A delivery the worker
suppresses as a duplicate is appended to ``<record key>:suppressed``.

``trackproj.flaky(label)`` fails (ValueError("flaky")) while the Redis key
``<record key>:failing:<label>`` exists, and succeeds once it is deleted. In beat, each alert
signal (``alert_opened``, ``alert_repeated``, ``alert_resolved``) is appended to
``<record key>:alerts``.
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


def _alert_signal(action: str) -> Any:
    def receiver(sender: Any = None, alert: Any = None, **_: Any) -> None:
        _redis.rpush(f"{RECORD_KEY}:alerts", json.dumps(
            {"action": action, "id": alert.id, "schedule": alert.schedule_name,
             "rule": alert.rule.value, "count": alert.count, "pid": os.getpid()}))
    return receiver


# Kept referenced here: Celery's signals hold their receivers weakly.
_ALERT_RECEIVERS = {action: _alert_signal(action) for action in ("opened", "repeated",
                                                                   "resolved")}
for _action, _receiver in _ALERT_RECEIVERS.items():
    getattr(signals, f"alert_{_action}").connect(_receiver)


@app.task(name="trackproj.flaky")
def flaky(label: str) -> str:
    if _redis.exists(f"{RECORD_KEY}:failing:{label}"):
        raise ValueError("flaky")
    return label


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
