"""Runs claimed and submitted on a store, as a leader would, for the commands to show."""

from __future__ import annotations

from datetime import timedelta

from goatbeat_celery.core.types.claims import PlannedClaim
from goatbeat_celery.store import Store

TTL = timedelta(seconds=30)


def claim_and_submit(store: Store, name: str, steps_back: int, missed: int = 0) -> str:
    """Claim a past occurrence of ``name`` as a leader would, then submit it."""
    grant = store.acquire("default", "replica-a", TTL)
    assert grant is not None
    schedule = store.get_schedule(name)
    assert schedule.next_occurrence_at is not None
    occurrence = schedule.next_occurrence_at - timedelta(seconds=60) * steps_back
    claim = PlannedClaim(schedule_name=name, version=schedule.row_version,
                         occurrences=((occurrence, occurrence),), missed=missed,
                         next_occurrence_at=schedule.next_occurrence_at,
                         next_run_at=schedule.next_run_at)
    (dispatch,) = store.claim([claim], lease=grant).dispatches
    assert store.mark_submitted([dispatch.key]) == 1
    return dispatch.key
