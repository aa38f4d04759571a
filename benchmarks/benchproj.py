"""The Celery app every benchmarked ``celery beat`` process runs, whichever scheduler it uses.

Configured entirely from the environment by ``compare.py`` (the scheduler's own part from its
adapter in ``schedulers/``):

* ``BENCH_BROKER_URL``, ``BENCH_QUEUE`` — the broker (Redis, a database number of its own, or
  RabbitMQ) and the queue every message goes to; no worker consumes it.
* ``BENCH_TRANSPORT_OPTIONS`` — JSON of ``broker_transport_options``, the same for every
  scheduler: on RabbitMQ, publisher confirms (``confirm_publish``), which goatbeat's beat sets
  there on its own.
* ``BENCH_REDBEAT_REDIS_URL`` — RedBeat's store, the run's Redis database whichever the broker.
* ``BENCH_KIND`` — ``goatbeat``, ``default`` (Celery's PersistentScheduler), ``django``
  (django-celery-beat) or ``redbeat``.
* ``BENCH_GOATBEAT_URL`` — for ``goatbeat``, its database; ``BENCH_DJANGO_DB`` and
  ``BENCH_PG_*`` — for ``django``, read by ``bench_django_settings``.
* ``BENCH_DEFAULT_SCHEDULE`` — for ``default`` only, a JSON file describing the entries:
  Celery's default scheduler reads its schedules from ``beat_schedule``, so they are built here.
* ``BENCH_SETTINGS`` — JSON of extra Celery settings (lease ttl, lock timeout, loop interval).
* ``BENCH_PUBLISH_LOG`` — when set, every published message's schedule name and the wall-clock
  instant it was handed to the broker are appended to this file (for lateness).
"""

from __future__ import annotations

import atexit
import json
import math
import os
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from celery import Celery
from celery.signals import after_task_publish

KIND = os.environ.get("BENCH_KIND", "goatbeat")
QUEUE = os.environ["BENCH_QUEUE"]

if KIND == "django":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench_django_settings")
    import django

    django.setup()

app = Celery("benchproj", broker=os.environ["BENCH_BROKER_URL"])
app.conf.update(
    timezone="UTC",
    enable_utc=True,
    task_default_queue=QUEUE,
    broker_connection_retry_on_startup=True,
    broker_transport_options=json.loads(os.environ.get("BENCH_TRANSPORT_OPTIONS", "{}")),
    # No result backend: beat only publishes.
    result_backend=None,
    goatbeat_database_url=os.environ.get("BENCH_GOATBEAT_URL", ""),
    redbeat_redis_url=os.environ.get("BENCH_REDBEAT_REDIS_URL", os.environ["BENCH_BROKER_URL"]),
    redbeat_key_prefix=os.environ.get("BENCH_REDBEAT_PREFIX", "redbeat:"),
    **json.loads(os.environ.get("BENCH_SETTINGS", "{}")),
)


@app.task(name="bench.noop")
def noop(name: str = "") -> None:
    """Never run: no worker consumes the benchmark queue."""


def _default_schedule(path: str) -> dict[str, Any]:
    with open(path) as handle:
        plan = json.load(handle)
    every = timedelta(seconds=plan["every"])
    base = plan["first_due"]
    count, spread = plan["count"], plan["spread"]
    entries: dict[str, Any] = {}
    for index in range(count):
        due = base + (math.floor(spread * index / count) if spread else 0)
        entries[f"{plan['prefix']}{index:07d}"] = {
            "task": "bench.noop",
            "schedule": every,
            "args": [f"{plan['prefix']}{index:07d}"],
            # Celery's ScheduleEntry takes last_run_at: one interval before the wanted due time.
            "last_run_at": datetime.fromtimestamp(due, timezone.utc) - every,
        }
    return entries


if KIND == "default" and os.environ.get("BENCH_DEFAULT_SCHEDULE"):
    app.conf.beat_schedule = _default_schedule(os.environ["BENCH_DEFAULT_SCHEDULE"])


class _PublishLog:
    """Records (schedule name, instant handed to the broker); flushed by a thread."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.pending: list[str] = []
        self.lock = threading.Lock()
        #: Whether a name is held until its batch is flushed (set by _stamp_at_flush).
        self.held: Any = lambda name: False
        thread = threading.Thread(target=self._loop, daemon=True)
        thread.start()
        atexit.register(self.flush)

    def add(self, name: str) -> None:
        line = f"{name} {time.time():.6f}\n"
        with self.lock:
            self.pending.append(line)

    def flush(self) -> None:
        with self.lock:
            lines, self.pending = self.pending, []
        if lines:
            with open(self.path, "a") as handle:
                handle.writelines(lines)

    def _loop(self) -> None:
        while True:
            time.sleep(0.2)
            self.flush()


def _stamp_at_flush(log: _PublishLog) -> None:
    """A message published inside a kombu publish batch (goatbeat's submitter on Redis) reaches
    the broker when the batch is flushed, not when ``after_task_publish`` fires: hold its name
    until the flush that wrote it returns, and stamp it then. A transport without batches
    (RabbitMQ's) never goes through ``PublishBatch``: each message is stamped at
    ``after_task_publish``, which fires once the publish returned (with confirms, once RabbitMQ
    acknowledged it)."""
    try:
        from kombu.transport.redis import PublishBatch
    except ImportError:  # kombu before 5.7: every publish is written at once
        return
    local = threading.local()
    publish, flush = PublishBatch.publish, PublishBatch.flush

    def batched_publish(self: Any, message: Any, **kwargs: Any) -> Any:
        result = publish(self, message, **kwargs)
        local.batched = True  # read by the after_task_publish receiver that follows
        return result

    def stamped_flush(self: Any) -> None:
        held, local.held = getattr(local, "held", ()), []
        flush(self)  # a failed flush wrote nothing to stamp: goatbeat sends it again
        for name in held:
            log.add(name)

    def held(name: str) -> bool:
        if not getattr(local, "batched", False):
            return False
        local.batched = False
        local.held = [*getattr(local, "held", ()), name]
        return True

    PublishBatch.publish, PublishBatch.flush = batched_publish, stamped_flush
    log.held = held


if os.environ.get("BENCH_PUBLISH_LOG"):
    _log = _PublishLog(os.environ["BENCH_PUBLISH_LOG"])
    _stamp_at_flush(_log)

    @after_task_publish.connect(weak=False)
    def _published(sender: Any = None, body: Any = None, **kwargs: Any) -> None:
        args = body[0] if isinstance(body, (tuple, list)) and body else ()
        name = str(args[0]) if args else "?"
        if not _log.held(name):
            _log.add(name)
