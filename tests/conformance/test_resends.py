"""Resending runs never started, on every store: a run the broker took that no worker started is
put back to claimed (for the leader's resubmission) at the exact bound by the store's clock, in
a fenced write, within its deadline and its number of resends; anything a worker started, or
sent before the workers were known to track runs, is left alone."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from goatbeat_celery.core.rules.runs import MIN_RESEND_WAIT, RunEvent, RunState
from goatbeat_celery.core.types.errors import LeaseLost
from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.lease import LeaseGrant

from .conftest import Backend, Store, StoreClock
from .support import LONG_TTL, claim_next, create_due

UNSTARTED = timedelta(seconds=3)
MICROSECOND = timedelta(microseconds=1)
LONG_TRACKED = datetime(2000, 1, 1, tzinfo=UTC)


def grant_of(store: Store) -> LeaseGrant:
    grant = store.acquire("beat", "replica", LONG_TTL)
    assert grant is not None
    return grant


def submitted(store: Store, name: str = "report",
              deadline: timedelta | None = None, **fields: Any) -> str:
    """The key of a new execution the broker took (with a starting deadline if given), of a
    schedule with ``fields``."""
    claim = replace(claim_next(create_due(store, name, **fields)), expires_after=deadline)
    (dispatch,) = store.claim([claim], lease=grant_of(store)).dispatches
    assert store.mark_submitted([dispatch.key]) == 1
    return dispatch.key


def run_of(store: Store, key: str) -> Execution:
    return next(e for e in store.executions(limit=1000) if e.key == key)


def resend(store: Store, *, resends: int = 1, tracked_since: datetime | None = LONG_TRACKED,
           limit: int = 1000, unstarted_for: timedelta = UNSTARTED) -> list[Execution]:
    return store.resend_unstarted(lease=grant_of(store), unstarted_for=unstarted_for,
                                  tracked_since=tracked_since, resends=resends, limit=limit)


def sent_at(store: Store, key: str) -> datetime:
    at = run_of(store, key).submitted_at
    assert at is not None
    return at


def test_a_run_nobody_started_is_claimed_again_after_the_start_timeout_and_sent_again(
        store: Store, clock: StoreClock) -> None:
    key = submitted(store)

    clock.move_just_before(sent_at(store, key) + UNSTARTED)
    assert resend(store) == []
    clock.move_to(sent_at(store, key) + UNSTARTED + MICROSECOND)
    (resent,) = resend(store)

    assert (resent.key, resent.state, resent.attempts, resent.run_state) == \
        (key, ExecutionState.CLAIMED, 1, None)
    assert resent.last_error == "never started within 3s after send 1; sent again"
    assert run_of(store, key) == resent
    assert resend(store) == []  # claimed now: beat's to send, not resent twice
    # The leader's resubmission sends it under its key, one more send attempt.
    (pending,) = store.take_pending(lease=grant_of(store), limit=10)
    assert (pending.key, pending.execution.attempts) == (key, 2)


def test_the_number_of_resends_is_bounded_then_the_run_is_lost(
        store: Store, clock: StoreClock) -> None:
    key = submitted(store)
    clock.move_to(sent_at(store, key) + UNSTARTED + MICROSECOND)
    assert [e.key for e in resend(store)] == [key]
    store.take_pending(lease=grant_of(store), limit=10)
    assert store.mark_submitted([key]) == 1

    clock.move_to(sent_at(store, key) + UNSTARTED + MICROSECOND)
    assert resend(store) == []  # sent twice: its one resend is spent
    assert [e.key for e in resend(store, resends=2)] == [key]  # a larger bound allows one more
    store.take_pending(lease=grant_of(store), limit=10)
    assert store.mark_submitted([key]) == 1
    clock.move_to(sent_at(store, key) + UNSTARTED + MICROSECOND)
    assert resend(store, resends=2) == []
    (lost,) = store.mark_lost(silent_for=UNSTARTED, unstarted_for=UNSTARTED,
                              tracked_since=LONG_TRACKED)
    assert (lost.key, lost.run_state, lost.attempts) == (key, RunState.LOST, 3)


def send_again(store: Store, keys: list[str]) -> None:
    """What the leader's resubmission does with runs put back to claimed: send each again."""
    assert sorted(p.key for p in store.take_pending(lease=grant_of(store), limit=10)) == \
        sorted(keys)
    assert store.mark_submitted(keys) == len(keys)


def test_each_schedule_resends_its_own_number_of_times_else_the_settings(
        store: Store, clock: StoreClock) -> None:
    never = submitted(store, "never", run_resends=0)
    default = submitted(store, "default")
    twice = submitted(store, "twice", run_resends=2)
    keys = (never, default, twice)
    # A start timeout this short is the whole wait (PostgreSQL's clock is waited for, thrice).
    short = timedelta(milliseconds=500)

    def resent(resends: int) -> list[str]:
        clock.move_to(max(sent_at(store, key) for key in keys) + short + MICROSECOND)
        return [e.key for e in resend(store, resends=resends, unstarted_for=short)]

    assert resent(1) == [default, twice]
    send_again(store, [default, twice])
    # The setting at 0 stops only the schedules that give no number of their own.
    assert resent(0) == [twice]
    send_again(store, [twice])
    # A larger setting gives more to the schedule that follows it, none to the others.
    assert resent(10) == [default]
    assert [run_of(store, key).attempts for key in keys] == [1, 2, 3]
    assert run_of(store, never).state is ExecutionState.SUBMITTED


def test_no_resend_when_resends_are_off_or_tracking_is_not_known(
        store: Store, clock: StoreClock) -> None:
    key = submitted(store)
    clock.move_to(sent_at(store, key) + UNSTARTED + MICROSECOND)

    assert resend(store, resends=0) == []
    assert resend(store, tracked_since=None) == []
    # Sent before the leader knew the workers track runs: a missing start says nothing.
    assert resend(store, tracked_since=sent_at(store, key) + MICROSECOND) == []
    assert run_of(store, key).state is ExecutionState.SUBMITTED


def test_a_run_a_worker_started_is_never_resent(store: Store, clock: StoreClock) -> None:
    running = submitted(store, "running")
    ended = submitted(store, "ended")
    store.record_runs([RunEvent.started(running, run="r1", worker="w", age=timedelta(0))])
    store.record_runs([RunEvent.started(ended, run="r2", worker="w", age=timedelta(0))])
    store.record_runs([RunEvent.retried(ended, run="r2", worker="w", age=timedelta(0),
                                        runtime=timedelta(seconds=1), error="again")])
    clock.move_to(max(sent_at(store, running), sent_at(store, ended)) + UNSTARTED + MICROSECOND)

    assert resend(store) == []


def test_a_run_with_a_deadline_waits_half_its_time_left_and_none_past_it(
        store: Store, clock: StoreClock) -> None:
    # Deadlines measured from the grid point, which may lie up to a minute back: 24 s from
    # now for one (half of it over the least wait, by 2 s), 6 s for the other.
    schedule = create_due(store, "deadline")
    assert schedule.next_occurrence_at is not None
    behind = store.now() - schedule.next_occurrence_at
    deadline = 2 * MIN_RESEND_WAIT + timedelta(seconds=4)
    claim = replace(claim_next(schedule), expires_after=behind + deadline)
    (dispatch,) = store.claim([claim], lease=grant_of(store)).dispatches
    key = dispatch.key
    store.mark_submitted([key])
    gone = submitted(store, "gone", deadline=behind + timedelta(seconds=6))
    expires_at = run_of(store, key).expires_at
    assert expires_at is not None
    # About 12 s: neither the 10 minutes' start timeout, the least wait nor the
    # schedule's minute.
    half = (expires_at - sent_at(store, key)) / 2
    assert half > MIN_RESEND_WAIT, f"sent {deadline - 2 * half} after the claim: machine too slow"

    clock.move_just_before(sent_at(store, key) + half)
    assert resend(store, unstarted_for=timedelta(minutes=10)) == []
    clock.move_to(sent_at(store, key) + half + MICROSECOND)
    # By then the other run's deadline has passed: a worker would drop it, so it is not sent.
    assert [e.key for e in resend(store, unstarted_for=timedelta(minutes=10))] == [key]
    assert run_of(store, gone).state is ExecutionState.SUBMITTED


def test_resends_go_longest_unsent_first_up_to_the_limit(store: Store,
                                                         clock: StoreClock) -> None:
    first = submitted(store, "first")
    clock.advance(0.01)
    second = submitted(store, "second")
    clock.move_to(sent_at(store, second) + UNSTARTED + MICROSECOND)

    assert [e.key for e in resend(store, limit=1)] == [first]
    assert [e.key for e in resend(store, limit=1)] == [second]


def test_a_resend_under_a_stale_grant_is_refused(backend: Backend) -> None:
    store, clock = backend.store, backend.clock
    old = store.acquire("beat", "a", LONG_TTL)
    assert old is not None
    (dispatch,) = store.claim([claim_next(create_due(store, "report"))], lease=old).dispatches
    store.mark_submitted([dispatch.key])
    old = backend.let_expire(old)
    clock.move_to(sent_at(store, dispatch.key) + UNSTARTED + MICROSECOND)
    assert store.acquire("beat", "b", LONG_TTL) is not None

    with pytest.raises(LeaseLost):
        store.resend_unstarted(lease=old, unstarted_for=UNSTARTED, tracked_since=LONG_TRACKED,
                               resends=1)

    assert run_of(store, dispatch.key).state is ExecutionState.SUBMITTED


def test_a_run_waits_no_longer_than_its_schedules_period(store: Store,
                                                          clock: StoreClock) -> None:
    # A period two seconds over the least wait: its run is resent a period after its send,
    # neither after the 10 minutes' start timeout nor at the least wait (on PostgreSQL the
    # test waits the period out on the real clock).
    period = MIN_RESEND_WAIT + timedelta(seconds=2)
    every = period.total_seconds()
    schedule = create_due(store, "frequent", every=every)
    (dispatch,) = store.claim([claim_next(schedule, every=every)],
                              lease=grant_of(store)).dispatches
    store.mark_submitted([dispatch.key])

    clock.move_just_before(sent_at(store, dispatch.key) + period)
    assert resend(store, unstarted_for=timedelta(minutes=10)) == []
    clock.move_to(sent_at(store, dispatch.key) + period + MICROSECOND)
    assert [e.key for e in resend(store, unstarted_for=timedelta(minutes=10))] == \
        [dispatch.key]


def test_read_runs_gives_the_store_now_and_the_run_columns_of_the_keys_that_exist(
        store: Store) -> None:
    key = submitted(store)
    store.record_runs([RunEvent.started(key, run="r1", worker="w", age=timedelta(0))])
    before = store.now()

    now, found = store.read_runs([key, "no-such:key", key])

    assert now >= before
    assert list(found) == [key]
    assert (found[key].run_state, found[key].run_id, found[key].worker) == \
        (RunState.RUNNING, "r1", "w")
    later, none = store.read_runs(["no-such:key"])
    assert none == {} and later >= now
