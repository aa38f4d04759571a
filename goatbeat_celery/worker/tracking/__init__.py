"""Run tracking on the workers: what happened to each run goatbeat sent.

One line in the app module every worker imports::

    import goatbeat_celery

    goatbeat_celery.track_runs(app)

Each worker process then records, for every task goatbeat submitted (recognised by its
headers, keyed by its task id = the idempotency key), when it started and on which worker,
each retry, and how it ended (succeeded, failed with a short error, revoked, rejected) with its
runtime, in the run columns of ``goatbeat_execution``. Tasks goatbeat did not send are left
alone.

The task's thread only notes the event in a bounded in-memory buffer (microseconds, no lock
held across any I/O); one daemon writer thread per process writes the buffer in batches. A
database outage never fails or slows a task: the writer keeps the events and retries with a
capped backoff; past :data:`MAX_EVENTS` it drops the oldest, counted and logged
(``action=run_events_dropped``). The writer also sends one heartbeat per
``heartbeat_interval`` for the runs of its process, so that a run whose worker dies (SIGKILL,
a lost host) is marked ``lost`` by the leader instead of staying ``running`` forever (see
:mod:`goatbeat_celery.core.rules.runs` for the rules and ``docs/run-tracking.md`` for the bounds).

The package holds the two halves: :mod:`~goatbeat_celery.worker.tracking.writer` (the buffer and its
writer thread, which know nothing of Celery) and :mod:`~goatbeat_celery.worker.tracking.signals`
(the Celery signal handlers that note the events).
"""

from __future__ import annotations

from goatbeat_celery.worker.tracking.signals import RunTracker, track_runs, tracks_runs
from goatbeat_celery.worker.tracking.writer import (
    BATCH_SIZE,
    FLUSH_INTERVAL,
    MAX_EVENTS,
    RunWriter,
    WriterStats,
)

__all__ = ["BATCH_SIZE", "FLUSH_INTERVAL", "MAX_EVENTS", "RunTracker", "RunWriter",
           "WriterStats", "track_runs", "tracks_runs"]
