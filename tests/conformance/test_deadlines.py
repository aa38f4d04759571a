"""Starting deadlines: each claimed execution records when it expires, and an expired one is
marked so (never sent), in every store."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from goatbeat_celery.core.types.execution import ExecutionState
from goatbeat_celery.core.types.spec import ScheduleSpec

from .conftest import Store
from .support import LONG_TTL, claim_next, create_due, interval_spec


def test_a_claim_records_when_each_execution_expires(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    schedule = create_due(store, "report")
    claim = replace(claim_next(schedule), expires_after=timedelta(seconds=90))

    [dispatch] = store.claim([claim], lease=grant).dispatches

    expected = dispatch.execution.due_at + timedelta(seconds=90)
    assert dispatch.execution.expires_at == expected
    [stored] = store.executions(schedule_name="report")
    assert stored.expires_at == expected
    [pending] = store.take_pending(lease=grant, limit=10)
    assert pending.execution.expires_at == expected


def test_only_executions_still_claimed_are_marked_expired(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    sent, stale = create_due(store, "sent"), create_due(store, "stale")
    dispatches = store.claim([claim_next(sent), claim_next(stale)], lease=grant).dispatches
    keys = {d.execution.schedule_name: d.key for d in dispatches}
    store.mark_submitted([keys["sent"]])

    changed = store.mark_expired(list(keys.values()))

    assert changed == 1
    states = {e.schedule_name: e.state for e in store.executions()}
    assert states == {"sent": ExecutionState.SUBMITTED, "stale": ExecutionState.EXPIRED}
    assert store.take_pending(lease=grant, limit=10) == []


def test_a_schedules_own_starting_deadline_is_stored_and_read_back(store: Store) -> None:
    spec: ScheduleSpec = interval_spec("report", starting_deadline=timedelta(minutes=5))
    now = store.now()
    store.create_schedule(spec, next_occurrence_at=now, next_run_at=now)

    assert store.get_schedule("report").spec.starting_deadline == timedelta(minutes=5)
    assert store.get_schedule("report").spec.spec_hash() == spec.spec_hash()
