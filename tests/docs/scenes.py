"""Scenes hidden blocks set before an example: a leader that has been running for a while.

:func:`lead` runs the real engine with the app's settings and schedules on a SQLite store whose
clock steps forward, so "beat ran for a minute and a half" takes a fraction of a second. The
broker is replaced by a submitter that accepts everything: the pages show what goatbeat records,
not what a worker does. Clock and submitter are the package's own test doubles
(:mod:`goatbeat_celery.testing`).
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from goatbeat_celery import config as config_module
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.store import open_store
from goatbeat_celery.testing import ManualClock, RecordingSubmitter, build_engine

#: The lease holder the pages show: host, process id and a random suffix.
HOLDER = "web-1:4242:9f8e7d6c"
#: How late the leader wakes after each wait, as a real one does by a few milliseconds.
LATENCY = 0.012
#: The broker the pages' hidden blocks drive an engine with (docs/deploying.md).
AcceptingSubmitter = RecordingSubmitter


def lead(app: Any, *, seconds: float, start: datetime | None = None,
         holder: str = HOLDER, refuse: str | None = None) -> list[str]:
    """Lead for ``seconds`` of store time from ``start`` (default: now) on the app's SQLite
    store (0: one tick, which takes the lease and syncs the config); return the keys sent. With
    ``refuse``, the broker refuses every message with that error. The lease is left held (not
    released), as a running leader holds it."""
    loaded = config_module.load(app)
    clock = ManualClock(start or datetime.now(UTC))
    store = open_store(loaded.config.database_url, clock=clock)
    submitter = RecordingSubmitter(failing=refuse is not None, failure=refuse)
    engine = build_engine(store, clock=clock, submitter=submitter,
                          settings=loaded.config.settings, holder=holder,
                          triggers=loaded.triggers,
                          # With Celery's own cleanup entry, as the real scheduler adds it.
                          config_schedules=config_module.synced_schedules(app, loaded),
                          task_allowed=loaded.config.task_allowed)
    try:
        while True:
            wait = engine.tick()  # at least one: taking the lease syncs the config
            if clock.monotonic() >= seconds:
                break
            clock.advance(max(wait, 0.0) + LATENCY)
    finally:
        store.close()
    return [key for key, _ in submitter.sent]


def stand_by(app: Any, *, holder: str) -> None:
    """A replica standing by: one tick of a real engine on the app's SQLite store, by the real
    clock, finding the lease held; it heartbeats its member row and is left running (its row
    not released)."""
    loaded = config_module.load(app)
    # The scene's leader ran in this process and is gone: its file lock went with it. The
    # standby judges the lease on the clock, as it would a leader running elsewhere.
    store = open_store(loaded.config.database_url, session_locks=False)
    engine = build_engine(store, submitter=RecordingSubmitter(), settings=loaded.config.settings,
                          holder=holder, monotonic=time.monotonic)
    try:
        engine.tick()
        assert not engine.is_leader(), "the scene's leader should hold the lease"
    finally:
        store.close()
