"""Scenes hidden blocks set before an example: a leader that has been running for a while.

:func:`lead` runs the real engine with the app's settings and schedules on a SQLite store whose
clock steps forward, so "beat ran for a minute and a half" takes a fraction of a second. The
broker is replaced by a submitter that accepts everything: the pages show what goatbeat records,
not what a worker does.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from goatbeat_celery import config as config_module
from goatbeat_celery.core.engine import Engine
from goatbeat_celery.core.model import UTC, Dispatch, SubmitResult
from goatbeat_celery.store import open_store

#: The lease holder the pages show: host, process id and a random suffix.
HOLDER = "web-1:4242:9f8e7d6c"
#: How late the leader wakes after each wait, as a real one does by a few milliseconds.
LATENCY = 0.012


class SteppingClock:
    """A store clock and a monotonic clock that move only when told to."""

    def __init__(self, start: datetime) -> None:
        self.now = start
        self.elapsed = 0.0

    def __call__(self) -> datetime:
        return self.now

    def monotonic(self) -> float:
        return self.elapsed

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        self.elapsed += seconds


class AcceptingSubmitter:
    """A broker that accepts every message, keeping the keys it was sent; or, given an error,
    a broker that refuses every message with it."""

    def __init__(self, refuse: str | None = None) -> None:
        self.keys: list[str] = []
        self.refuse = refuse

    def submit(self, dispatches: Sequence[Dispatch], *, token: int,
               timeout: float) -> SubmitResult:
        keys = [dispatch.key for dispatch in dispatches]
        if self.refuse is not None:
            return SubmitResult(accepted=[], failed=dict.fromkeys(keys, self.refuse))
        self.keys.extend(keys)
        return SubmitResult(accepted=keys)


def lead(app: Any, *, seconds: float, start: datetime | None = None,
         holder: str = HOLDER, refuse: str | None = None) -> list[str]:
    """Lead for ``seconds`` of store time from ``start`` (default: now) on the app's SQLite
    store (0: one tick, which takes the lease and syncs the config); return the keys sent. With
    ``refuse``, the broker refuses every message with that error. The lease is left held (not
    released), as a running leader holds it."""
    from goatbeat_celery.scheduler import Scheduler

    loaded = config_module.load(app)
    # Celery's own cleanup entry, added the way the real scheduler adds it.
    defaults = Scheduler(app, lazy=True)._default_entries(loaded.schedules)
    clock = SteppingClock(start or datetime.now(UTC))
    store = open_store(loaded.config.database_url, clock=clock)
    submitter = AcceptingSubmitter(refuse)
    engine = Engine(store=store, lease=store, submitter=submitter,
                    settings=loaded.config.engine, holder=holder, triggers=loaded.triggers,
                    config_schedules=(*loaded.schedules, *defaults),
                    task_allowed=loaded.config.task_allowed,
                    monotonic=clock.monotonic)
    try:
        while True:
            wait = engine.tick()  # at least one: taking the lease syncs the config
            if clock.elapsed >= seconds:
                break
            clock.advance(max(wait, 0.0) + LATENCY)
    finally:
        store.close()
    return submitter.keys
