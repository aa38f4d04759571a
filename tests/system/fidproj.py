"""The Celery app of the fidelity tests: ONE configuration that Celery's own beat
(``-S celery.beat:PersistentScheduler``) and goatbeat (``-S goatbeat_celery.Scheduler``) both run.

Each process keeps its broker keys apart from every other process's with kombu's Redis
``global_keyprefix`` (``FID_PREFIX``): the two schedulers send the same messages to the same queue
names and the test reads what each left under its own prefix. Nothing else differs between the
two runs. The scenario (``FID_SCENARIO``) picks the schedule set:

* ``fidelity`` — routing through ``task_routes`` (to a queue with its own exchange and routing
  key, and by a glob for a task this process does not know), queue, priority, expires and
  headers in an entry's options, a task class overriding ``apply_async``, args and kwargs of
  every JSON type, interval (number, ``timedelta``, ``add_periodic_task``) and crontab entries;
* ``lock`` — a task class whose ``apply_async`` takes a lock (Redis SET NX on the task's name)
  that the task releases when it runs; every call is counted per task id;
* ``deadline`` — two 1 s schedules of a recording task, one with a starting deadline of
  ``FID_DEADLINE`` seconds; the worker records each run and each message it revoked.

``FID_GOATBEAT`` (JSON, optional) adds goatbeat settings (names without the prefix).

Test-side records (override and lock calls, runs) go to the Redis at ``FID_RECORD_URL`` under
the process's prefix, so the test deletes everything by that prefix afterwards.
"""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from typing import Any

import redis
from celery import Celery, Task, signals
from celery.schedules import crontab
from kombu import Exchange, Queue

PREFIX = os.environ["FID_PREFIX"]
SCENARIO = os.environ.get("FID_SCENARIO", "fidelity")

#: Test-side keys (not the broker's), under the process's prefix.
OVERRIDE_CALLS = f"{PREFIX}override-calls"
LOCK_CALLS = f"{PREFIX}lock-calls"
LOCK_REFUSED = f"{PREFIX}lock-refused"
LOCK_RAN = f"{PREFIX}lock-ran"
LOCK_KEY = f"{PREFIX}lock:"
RECORDS = f"{PREFIX}records"
REVOKED = f"{PREFIX}revoked"

#: The header the overriding task class adds in its own apply_async.
OVERRIDE_HEADER = "x-fid-override"

app = Celery("fidproj", broker=os.environ["FID_BROKER_URL"])
app.conf.update(
    timezone="UTC",
    enable_utc=True,
    task_default_queue="fid.default",
    task_queues=[
        Queue("fid.default"),
        # A queue bound to an exchange of its own under a routing key of its own.
        Queue("fid.routed", Exchange("fid.direct", type="direct"), routing_key="fid.routed.rk"),
        Queue("fid.options"),
        Queue("fid.foreign"),
    ],
    task_routes={
        # Through the named exchange and routing key (a route naming the queue only would be
        # sent through the default exchange under the queue's name).
        "fidproj.routed": {"queue": "fid.routed", "exchange": "fid.direct",
                           "routing_key": "fid.routed.rk"},
        # A glob, matching a task no process here registers; the route also sets a priority.
        "fid.elsewhere.*": {"queue": "fid.foreign", "priority": 7},
    },
    broker_transport_options={"global_keyprefix": PREFIX},
    broker_connection_retry_on_startup=True,
    # Otherwise Celery's beat adds its own celery.backend_cleanup entry (04:00 daily), which
    # goatbeat does not have: a message only one side would send.
    result_expires=None,
    worker_hijack_root_logger=False,
    goatbeat_database_url=os.environ.get("FID_DATABASE_URL", "sqlite:///unused.sqlite3"),
    goatbeat_lease_ttl=3,
    goatbeat_lease_renew_interval=1,
    goatbeat_max_interval=1,
    **{f"goatbeat_{key}": value
       for key, value in json.loads(os.environ.get("FID_GOATBEAT") or "{}").items()},
)

_records = redis.Redis.from_url(os.environ["FID_RECORD_URL"])

#: Arguments of every JSON type (and nesting, unicode, a large integer, a negative float).
ARGS = [1, -2.5, "two", "ünïcode ✓", True, False, None, [1, "a", [None]],
        {"second": [1, 2], "first": None}, 2**53]
#: Keys deliberately not in sorted (or JSONB) order: their order is part of the message.
KWARGS = {"zeta": "last-first", "a": 1, "mid": [1.5, None, {"x": True}], "bb": {"y": "z", "a": 0},
          "empty_list": [], "empty_dict": {}, "f": 0.1, "neg": -7, "t": True, "none": None}


@app.task(name="fidproj.routed")
def routed(*args: Any, **kwargs: Any) -> None:
    pass


@app.task(name="fidproj.optioned")
def optioned(*args: Any, **kwargs: Any) -> None:
    pass


@app.task(name="fidproj.cron")
def cron(*args: Any, **kwargs: Any) -> None:
    pass


@app.task(name="fidproj.added")
def added(*args: Any, **kwargs: Any) -> None:
    pass


class OverridingTask(Task):
    """Adds a header in its own apply_async and counts its calls (as project code does to tag
    or meter what it sends)."""

    def apply_async(self, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        _records.incr(OVERRIDE_CALLS)
        headers = dict(options.pop("headers", None) or {})
        headers[OVERRIDE_HEADER] = "added-by-apply_async"
        return super().apply_async(args, kwargs, headers=headers, **options)


@app.task(base=OverridingTask, name="fidproj.overriding")
def overriding(*args: Any, **kwargs: Any) -> None:
    pass


class LockingTask(Task):
    """Takes a lock on the task's name before sending (celery-once style); refuses to send while
    it is held. Every call is counted under the task id it was given."""

    def apply_async(self, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        task_id = options.get("task_id") or "<none>"
        _records.hincrby(LOCK_CALLS, task_id, 1)
        # The expiry only guards against a lock never released (a killed worker).
        if not _records.set(LOCK_KEY + self.name, task_id, nx=True, ex=30):
            _records.rpush(LOCK_REFUSED, task_id)
            return None
        return super().apply_async(args, kwargs, **options)


@app.task(base=LockingTask, bind=True, name="fidproj.locked")
def locked(self: Any) -> None:
    _records.rpush(LOCK_RAN, self.request.id)
    _records.delete(LOCK_KEY + self.name)


@app.task(bind=True, name="fidproj.record")
def record(self: Any, label: str) -> None:
    request = self.request
    _records.rpush(RECORDS, json.dumps({
        "id": request.id, "label": label, "expires": request.expires,
        "occurrence": getattr(request, "goatbeat_occurrence", None), "at": time.time()},
        default=str))


@signals.task_revoked.connect
def _revoked(request: Any = None, expired: bool = False, **_: Any) -> None:
    """The worker dropped a message (an expired one, here) instead of running it."""
    _records.rpush(REVOKED, json.dumps({"id": request.id, "expired": bool(expired),
                                        "at": time.time()}))


if SCENARIO == "fidelity":
    app.conf.beat_schedule = {
        # Interval as a number; routed by task_routes to a queue with its own exchange.
        "routed": {"task": "fidproj.routed", "schedule": 2.0, "args": ARGS, "kwargs": KWARGS},
        # Interval as a timedelta; queue, priority, expires and headers from the entry.
        "optioned": {
            "task": "fidproj.optioned", "schedule": timedelta(seconds=2),
            "args": ["opt", 2], "kwargs": {"k": "v"},
            "options": {"queue": "fid.options", "priority": 5, "expires": 45,
                        "headers": {"x-fid-entry": "entry-header", "x-fid-number": 3}},
        },
        # A task class overriding apply_async.
        "overriding": {"task": "fidproj.overriding", "schedule": 2,
                       "args": [], "kwargs": {"only": "kwargs", "n": 0}},
        # A name no process here registers: Celery's send_task, routed by a glob.
        "foreign": {"task": "fid.elsewhere.unknown", "schedule": 2, "args": ["x", 1.25],
                    "options": {"expires": 30.5}},
        # Crontab, every minute.
        "cron": {"task": "fidproj.cron", "schedule": crontab(minute="*"),
                 "args": [{"nested": {"deep": [1, 2, 3]}}], "kwargs": {"when": "minute"}},
    }
    # The other way of declaring an entry: a signature, its options and the call's.
    app.add_periodic_task(2.0, added.s(7, "seven").set(priority=2), name="added",
                          headers={"x-fid-added": True})
elif SCENARIO == "lock":
    app.conf.beat_schedule = {
        "locked": {"task": "fidproj.locked", "schedule": 1.0},
    }
elif SCENARIO == "deadline":
    app.conf.beat_schedule = {
        # Policy all: every point of a backlog is claimed (goatbeat's default, latest, would
        # coalesce a late backlog into one run).
        "dl": {"task": "fidproj.record", "schedule": 1.0, "args": ["dl"],
               "goatbeat": {"misfire_policy": "all",
                            "starting_deadline": float(os.environ["FID_DEADLINE"])}},
        "nodl": {"task": "fidproj.record", "schedule": 1.0, "args": ["nodl"],
                 "goatbeat": {"misfire_policy": "all"}},
    }
else:
    raise RuntimeError(f"unknown FID_SCENARIO {SCENARIO!r}")
