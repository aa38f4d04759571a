"""A backfill the leader drained, with runs that ended each their own way, arranged on a store
as a leader and its workers would leave it."""

from __future__ import annotations

from datetime import datetime, timedelta

from goatbeat_celery.core.protocols import ScheduleStore
from goatbeat_celery.core.rules.backfill import (
    Backfill,
    BackfillMode,
    BackfillRequest,
    BackfillRun,
    BackfillStep,
)
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome
from goatbeat_celery.core.types.execution import idempotency_key

M = timedelta(minutes=1)
WORKER = "celery@worker-1"


def ran(store: ScheduleStore, key: str, outcome: RunOutcome, error: str | None = None) -> None:
    """A worker started ``key``'s run and saw it end in ``outcome``."""
    store.record_runs([RunEvent.started(key, run="r1", worker=WORKER, age=timedelta(0))])
    store.record_runs([RunEvent.finished(key, run="r1", worker=WORKER, age=timedelta(0),
                                         outcome=outcome, error=error,
                                         runtime=timedelta(seconds=0.2))])


def drained_backfill(store: ScheduleStore, name: str,
                     outcomes: list[RunOutcome | None]) -> tuple[Backfill, list[datetime]]:
    """A backfill of ``name`` (an every-minute schedule) over the last ``len(outcomes)``
    minutes, drained by a leader: each occurrence's run ended in its outcome (None: sent,
    not started yet)."""
    end = store.now().replace(second=0, microsecond=0) - M
    points = [end - (len(outcomes) - 1 - k) * M for k in range(len(outcomes))]
    backfill = store.create_backfill(BackfillRequest(
        schedule_name=name, start=points[0], end=end, mode=BackfillMode.ALL,
        total=len(points)))
    grant = store.acquire("default", "replica-a", timedelta(seconds=30))
    assert grant is not None
    keys = [idempotency_key(name, p) for p in points]
    store.claim_backfill(BackfillStep(
        backfill_id=backfill.id, schedule_name=name, examined_before=0,
        examined=len(points), cursor=end, done=True,
        runs=tuple(BackfillRun(occurrence_at=p, key=k, reason="all")
                   for p, k in zip(points, keys, strict=True))), lease=grant)
    store.release(grant)
    store.mark_submitted(keys)
    for key, outcome in zip(keys, outcomes, strict=True):
        if outcome is not None:
            ran(store, key, outcome, "RuntimeError: db down" if outcome is RunOutcome.FAILED
                else None)
    return store.get_backfill(backfill.id), points
