"""Run policies on every store: a claim under an overlap policy inserts claimed, held or
skipped rows as core.rules.claims decides from the runs in flight it reads in its own transaction; a
fixed-delay claim is postponed; finished runs are listed once until settled; settling writes
the schedule compare-and-set on its version, pauses it, and releases a held claim; resume clears
a pause; the schedule's policy columns round-trip; held claims are never pruned."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from goatbeat_celery.core.rules.policies import OverlapPolicy, ScheduleMode
from goatbeat_celery.core.rules.runs import RunOutcome
from goatbeat_celery.core.types.errors import LeaseLost
from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.settlement import RunSettlement

from .conftest import Store, StoreClock
from .support import claim, create_due, interval_spec, lease, report

S = timedelta(seconds=1)
CLAIMED, HELD, SKIPPED = ExecutionState.CLAIMED, ExecutionState.HELD, ExecutionState.SKIPPED


def states(store: Store, name: str = "job") -> list[ExecutionState]:
    rows = sorted(store.executions(schedule_name=name, limit=100), key=lambda e: e.occurrence_at)
    return [e.state for e in rows]


def failed_run(store: Store) -> tuple[LeaseGrant, Execution, Schedule]:
    """A run of a schedule with a policy that failed, as finished_runs lists it: the lease,
    the run and its schedule as read with it."""
    grant = lease(store)
    schedule = create_due(store, "job")
    (dispatch,) = store.claim([claim(schedule, settle=True)], lease=grant).dispatches
    report(store, dispatch.key, RunOutcome.FAILED)
    (ended,) = store.finished_runs(10)
    assert ended.schedule is not None and ended.execution.key == dispatch.key
    return grant, ended.execution, ended.schedule


def test_the_policy_columns_round_trip(store: Store) -> None:
    spec = interval_spec("job", overlap=OverlapPolicy.BUFFER_ONE, mode=ScheduleMode.FIXED_DELAY,
                         failure_backoff=30 * S, failure_backoff_factor=1.5,
                         failure_backoff_max=600 * S, pause_after_failures=3)
    store.create_schedule(spec, next_occurrence_at=None, next_run_at=None)
    stored = store.get_schedule("job")
    assert stored.spec == spec
    assert (stored.consecutive_failures, stored.paused_reason, stored.total_skipped) == (
        0, None, 0)
    assert stored.damage == ()


def test_skip_inserts_a_skipped_row_with_its_reason_next_to_a_run_in_flight(
        store: Store) -> None:
    grant = lease(store)
    schedule = create_due(store, "job")
    policy = {"overlap": OverlapPolicy.SKIP}
    (first,) = store.claim([claim(schedule, **policy)], lease=grant).dispatches
    schedule = store.get_schedule("job")
    result = store.claim([claim(schedule, **policy)], lease=grant)
    assert result.dispatches == ()
    (skipped,) = result.skipped
    assert (skipped.state, skipped.last_error) == (SKIPPED, f"run {first.key} had not finished")
    stored = store.get_schedule("job")
    assert (stored.total_runs, stored.total_skipped) == (1, 1)
    assert states(store) == [CLAIMED, SKIPPED]


def test_a_run_that_ended_no_longer_blocks_a_skip_schedule(store: Store) -> None:
    grant = lease(store)
    schedule = create_due(store, "job")
    policy = {"overlap": OverlapPolicy.SKIP}
    (first,) = store.claim([claim(schedule, **policy)], lease=grant).dispatches
    store.mark_submitted([first.key])
    report(store, first.key)
    result = store.claim([claim(store.get_schedule("job"), **policy)], lease=grant)
    assert len(result.dispatches) == 1


def test_buffer_one_holds_one_and_skips_the_rest_in_one_claim(store: Store) -> None:
    grant = lease(store)
    schedule = create_due(store, "job")
    result = store.claim([claim(schedule, steps=3, overlap=OverlapPolicy.BUFFER_ONE,
                                settle=True)], lease=grant)
    assert [d.execution.state for d in result.dispatches] == [CLAIMED]
    assert states(store) == [CLAIMED, HELD, SKIPPED]
    held = [e for e in store.executions(schedule_name="job") if e.state is HELD][0]
    assert (held.attempts, held.settled) == (0, False)


def test_a_fixed_delay_claim_with_a_run_in_flight_is_postponed(store: Store) -> None:
    grant = lease(store)
    schedule = create_due(store, "job")
    policy = {"delay": 60 * S, "settle": True}
    store.claim([claim(schedule, **policy)], lease=grant)
    schedule = store.get_schedule("job")
    now = store.now()
    result = store.claim([claim(schedule, **policy)], lease=grant)
    assert result.dispatches == () and result.advanced == 1
    stored = store.get_schedule("job")
    assert stored.next_run_at is not None
    assert now + 60 * S <= stored.next_run_at <= store.now() + 60 * S
    assert states(store) == [CLAIMED]


def test_finished_runs_lists_ended_unsettled_runs_once_they_end(store: Store) -> None:
    grant = lease(store)
    schedule = create_due(store, "job")
    (run,) = store.claim([claim(schedule, settle=True)], lease=grant).dispatches
    store.mark_submitted([run.key])
    assert store.finished_runs(10) == []
    report(store, run.key, None)
    assert store.finished_runs(10) == []  # running
    report(store, run.key, RunOutcome.FAILED)
    (ended,) = store.finished_runs(10)
    assert ended.execution.key == run.key and ended.schedule is not None
    assert ended.schedule.name == "job"


def test_runs_of_schedules_without_policies_are_listed_once_they_end(store: Store) -> None:
    """Nothing waits on them, but their end is still reported once: listed until settled."""
    grant = lease(store)
    schedule = create_due(store, "job")
    (run,) = store.claim([claim(schedule)], lease=grant).dispatches
    store.mark_submitted([run.key])
    assert [e.settled for e in store.executions(schedule_name="job")] == [None]
    report(store, run.key, None)
    assert store.finished_runs(10) == []  # running: not over
    report(store, run.key)
    (ended,) = store.finished_runs(10)
    assert ended.execution.key == run.key and ended.execution.settled is False
    store.settle_runs([RunSettlement(key=run.key, schedule_name="job", version=None)],
                      lease=grant)
    assert store.finished_runs(10) == []


def test_settling_writes_the_schedule_and_lists_the_run_no_more(store: Store) -> None:
    grant, run, ended = failed_run(store)
    later = store.now() + timedelta(hours=1)
    written = store.settle_runs([RunSettlement(
        key=run.key, schedule_name="job", version=ended.row_version,
        consecutive_failures=1, next_occurrence_at=later, next_run_at=later)], lease=grant)
    assert written.settled == (run.key,)
    stored = store.get_schedule("job")
    assert (stored.consecutive_failures, stored.next_run_at, stored.row_version) == (
        1, later, ended.row_version + 1)
    assert store.finished_runs(10) == []


def test_a_settlement_on_a_stale_version_leaves_the_run_for_later(store: Store) -> None:
    grant, run, ended = failed_run(store)
    store.replace_schedule(replace(ended.spec, args=(2,)), next_occurrence_at=None,
                           next_run_at=None)
    written = store.settle_runs([RunSettlement(
        key=run.key, schedule_name="job", version=ended.row_version,
        consecutive_failures=1)], lease=grant)
    assert written.settled == ()
    assert store.get_schedule("job").consecutive_failures == 0
    assert [r.execution.key for r in store.finished_runs(10)] == [run.key]


def test_a_settlement_may_pause_the_schedule_with_its_reason(store: Store) -> None:
    grant, run, ended = failed_run(store)
    written = store.settle_runs([RunSettlement(
        key=run.key, schedule_name="job", version=ended.row_version,
        consecutive_failures=3, next_occurrence_at=ended.next_occurrence_at,
        next_run_at=ended.next_run_at, paused_reason="paused after 3")], lease=grant)
    assert written.paused == (("job", "paused after 3"),)
    stored = store.get_schedule("job")
    assert (stored.spec.enabled, stored.paused_reason) == (False, "paused after 3")


def test_resume_clears_the_pause_and_the_failures(store: Store) -> None:
    grant, run, ended = failed_run(store)
    store.settle_runs([RunSettlement(key=run.key, schedule_name="job",
                                     version=ended.row_version, consecutive_failures=3,
                                     paused_reason="paused after 3")], lease=grant)
    paused = store.get_schedule("job")
    resumed = store.replace_schedule(replace(paused.spec, enabled=True),
                                     next_occurrence_at=None, next_run_at=None)
    assert (resumed.paused_reason, resumed.consecutive_failures) == (None, 0)


def test_settling_releases_the_held_claim_once_the_run_before_it_ended(store: Store) -> None:
    grant = lease(store)
    schedule = create_due(store, "job")
    store.claim([claim(schedule, steps=2, overlap=OverlapPolicy.BUFFER_ONE, settle=True)],
                lease=grant)
    first = sorted(store.executions(schedule_name="job"), key=lambda e: e.occurrence_at)[0]
    store.mark_submitted([first.key])
    report(store, first.key)
    written = store.settle_runs([RunSettlement(key=first.key, schedule_name="job",
                                               version=None)], lease=grant)
    assert written.settled == (first.key,)
    assert len(written.released) == 1
    assert states(store) == [ExecutionState.SUBMITTED, CLAIMED]
    (pending,) = store.take_pending(lease=grant, limit=10)
    assert pending.key == written.released[0]


def test_settling_is_fenced(store: Store, clock: StoreClock) -> None:
    grant = lease(store)
    stale = replace(grant, token=grant.token + 1)
    with pytest.raises(LeaseLost):
        store.settle_runs([], lease=stale)


def test_held_claims_are_never_pruned(store: Store) -> None:
    grant = lease(store)
    schedule = create_due(store, "job")
    store.claim([claim(schedule, steps=2, overlap=OverlapPolicy.BUFFER_ONE)], lease=grant)
    store.prune(before=store.now() + timedelta(days=1), limit=100)
    assert states(store) == [CLAIMED, HELD]
