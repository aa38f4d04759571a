"""The tracked system-test app (tests/tracking/trackproj.py: sysproj with run tracking) and one
more task for the run-policy scenarios.

``policyproj.flaky(label, failures)`` counts its calls per label in Redis, appends what it saw to
the scenario's Redis list, and raises ValueError for its first ``failures`` calls. A worker
adds its node name to the set ``<record key>:ready`` once it consumes, so that a scenario can
wait for it before beat starts sending.
"""

from __future__ import annotations

import json
import time
from typing import Any

from celery import signals
from sysproj import RECORD_KEY, _redis
from trackproj import app

__all__ = ["app"]


@signals.worker_ready.connect
def _ready(sender: Any = None, **_: Any) -> None:
    _redis.sadd(f"{RECORD_KEY}:ready", sender.hostname)


@app.task(bind=True, name="policyproj.flaky")
def flaky(self: Any, label: str, failures: int) -> int:
    call = int(_redis.incr(f"{RECORD_KEY}:calls:{label}"))
    _redis.rpush(RECORD_KEY, json.dumps({"id": self.request.id, "label": label, "call": call,
                                         "received_at": time.time()}))
    if call <= failures:
        raise ValueError(f"failure {call}")
    return call
