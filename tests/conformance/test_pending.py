"""Pending executions: claimed but not yet accepted by the broker, resubmitted under their key."""

from __future__ import annotations

import pytest

from goatbeat_celery.core.types.errors import LeaseLost, ScheduleNotFound
from goatbeat_celery.core.types.execution import ExecutionState

from .conftest import Backend, Store, StoreClock
from .support import LONG_TTL, claim_next, create_due


def test_an_unsubmitted_claim_is_resubmitted_by_the_next_leader_under_its_key(
    backend: Backend,
) -> None:
    store = backend.store
    first = store.acquire("beat", "a", LONG_TTL)
    assert first is not None
    result = store.claim([claim_next(create_due(store, "report"))], lease=first)
    (claimed,) = result.dispatches
    backend.let_expire(first)  # the first leader died before submitting
    second = store.acquire("beat", "b", LONG_TTL)
    assert second is not None

    (pending,) = store.take_pending(lease=second, limit=10)

    assert pending.key == claimed.key
    assert (pending.execution.attempts, pending.execution.token) == (2, second.token)
    assert pending.execution.state is ExecutionState.CLAIMED
    assert pending.task == claimed.task
    (stored,) = store.executions(schedule_name="report")
    assert (stored.key, stored.attempts, stored.token) == (claimed.key, 2, second.token)


def test_take_pending_under_a_stale_grant_is_refused(backend: Backend) -> None:
    store = backend.store
    old = store.acquire("beat", "a", LONG_TTL)
    assert old is not None
    store.claim([claim_next(create_due(store, "report"))], lease=old)
    old = backend.let_expire(old)
    assert store.acquire("beat", "b", LONG_TTL) is not None

    with pytest.raises(LeaseLost):
        store.take_pending(lease=old, limit=10)

    (stored,) = store.executions()
    assert (stored.attempts, stored.token) == (1, old.token)


def test_mark_submitted_removes_an_execution_from_pending(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    (dispatch,) = store.claim([claim_next(create_due(store, "report"))],
                              lease=grant).dispatches
    before = store.now()

    assert store.mark_submitted([dispatch.key]) == 1

    assert store.take_pending(lease=grant, limit=10) == []
    (stored,) = store.executions()
    assert stored.state is ExecutionState.SUBMITTED
    assert stored.submitted_at is not None and before <= stored.submitted_at <= store.now()
    assert store.mark_submitted([dispatch.key, "report:unknown"]) == 0


def test_a_failed_submission_stays_pending_with_its_error(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    (dispatch,) = store.claim([claim_next(create_due(store, "report"))],
                              lease=grant).dispatches

    store.record_failures({dispatch.key: "broker unreachable"})

    (stored,) = store.executions()
    assert (stored.state, stored.last_error) == (ExecutionState.CLAIMED, "broker unreachable")
    (pending,) = store.take_pending(lease=grant, limit=10)
    assert pending.key == dispatch.key


def test_a_manual_run_shows_up_in_take_pending(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    create_due(store, "report")

    requested = store.request_run("report")

    assert requested.manual and requested.state is ExecutionState.CLAIMED
    (pending,) = store.take_pending(lease=grant, limit=10)
    assert pending.key == requested.key
    assert pending.execution.manual
    assert pending.execution.token == grant.token
    assert pending.execution.attempts == requested.attempts + 1
    assert pending.task == "proj.tasks.tick"


def test_a_manual_run_of_an_unknown_schedule_is_refused(store: Store) -> None:
    with pytest.raises(ScheduleNotFound):
        store.request_run("missing")

    assert store.executions() == []


def test_pending_executions_come_oldest_first_up_to_the_limit(store: Store,
                                                             clock: StoreClock) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    keys = []
    for name in ("c-first", "b-second", "a-third"):  # names sort against claim order
        (dispatch,) = store.claim([claim_next(create_due(store, name))], lease=grant).dispatches
        keys.append(dispatch.key)
        clock.advance(0.01)

    taken = store.take_pending(lease=grant, limit=2)

    assert [d.key for d in taken] == keys[:2]


def test_pending_executions_of_a_deleted_schedule_are_abandoned(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    store.claim([claim_next(create_due(store, "gone"))], lease=grant)
    store.delete_schedule("gone")

    assert store.take_pending(lease=grant, limit=10) == []

    (stored,) = store.executions(schedule_name="gone")
    assert stored.state is ExecutionState.ABANDONED


def claim_three(store: Store) -> list[str]:
    """The keys of three claims, oldest occurrence first, of schedules named out of that
    order."""
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    keys = []
    for name, steps_back in (("b-old", 3), ("a-mid", 2), ("c-new", 1)):
        (dispatch,) = store.claim([claim_next(create_due(store, name, steps_back=steps_back))],
                                  lease=grant).dispatches
        keys.append(dispatch.key)
    return keys


def test_history_lists_the_newest_occurrence_first(store: Store) -> None:
    keys = claim_three(store)

    assert [e.key for e in store.executions(limit=2)] == [keys[2], keys[1]]
    assert [e.key for e in store.executions(schedule_name="b-old")] == [keys[0]]


def test_history_of_some_states_lists_only_theirs_for_every_schedule(store: Store) -> None:
    keys = claim_three(store)
    assert store.mark_submitted([keys[1]]) == 1
    claimed = [ExecutionState.CLAIMED, ExecutionState.HELD]

    assert [e.key for e in store.executions(states=claimed)] == [keys[2], keys[0]]
    assert [e.key for e in store.executions(states=claimed, limit=1)] == [keys[2]]
    assert [e.key for e in store.executions(states=[ExecutionState.SUBMITTED])] == [keys[1]]
    assert store.executions(schedule_name="a-mid", states=claimed) == []


def test_a_dispatch_carries_its_schedules_trigger_and_run_count(backend: Backend) -> None:
    """What beat hands code that hooks it (the entry's schedule and total_run_count), read with
    the claim and with a resubmission."""
    store = backend.store
    first = store.acquire("beat", "a", LONG_TTL)
    assert first is not None
    schedule = create_due(store, "report")
    (claimed,) = store.claim([claim_next(schedule)], lease=first).dispatches
    assert claimed.trigger == schedule.spec.trigger.to_json() == {"kind": "interval",
                                                                   "every": 60.0}
    assert claimed.total_runs == 0, "the runs counted before this claim"
    backend.let_expire(first)
    second = store.acquire("beat", "b", LONG_TTL)
    assert second is not None

    (pending,) = store.take_pending(lease=second, limit=10)

    assert pending.trigger == claimed.trigger
    assert pending.total_runs == 1, "the runs counted since, this one included"
