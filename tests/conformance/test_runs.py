"""Run tracking on every store: workers' reports land in the run columns as core.rules.runs decides,
heartbeats touch running runs only, and silent or never-started runs are marked lost at the
exact bound, by the store's clock."""

from __future__ import annotations

from datetime import datetime, timedelta

from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome, RunState
from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.instants import UTC

from .conftest import Backend, Store, StoreClock
from .support import LONG_TTL, claim_next, create_due, run_together

A, B = "celery@a", "celery@b"
#: Long enough that a PostgreSQL test reads its clock again before the bound passes on a busy
#: machine (a few statements), short enough to wait for.
SILENT = timedelta(seconds=2)
UNSTARTED = timedelta(seconds=3)
MICROSECOND = timedelta(microseconds=1)


def s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def claimed(store: Store, name: str = "report") -> str:
    """The key of a new execution, claimed and not yet sent."""
    grant = store.acquire("beat", "replica", LONG_TTL)
    assert grant is not None
    schedule = create_due(store, name)
    (dispatch,) = store.claim([claim_next(schedule)], lease=grant).dispatches
    return dispatch.key


def submitted(store: Store, name: str = "report") -> str:
    """The key of a new execution the broker took."""
    key = claimed(store, name)
    assert store.mark_submitted([key]) == 1
    return key


def run_of(store: Store, key: str) -> Execution:
    return next(e for e in store.executions(limit=1000) if e.key == key)


def started(key: str, run: str = "r1", worker: str = A, age: float = 0.0) -> RunEvent:
    return RunEvent.started(key, run=run, worker=worker, age=s(age))


def finished(key: str, run: str | None = "r1", worker: str = A, age: float = 0.0,
             outcome: RunOutcome = RunOutcome.SUCCEEDED, runtime: float | None = 0.5,
             error: str | None = None, started_age: float | None = None) -> RunEvent:
    return RunEvent.finished(key, run=run, worker=worker, age=s(age), outcome=outcome,
                             runtime=None if runtime is None else s(runtime), error=error,
                             started_age=None if started_age is None else s(started_age))


def within(instant: datetime | None, low: datetime, high: datetime) -> bool:
    return instant is not None and low <= instant <= high


# -- reports -----------------------------------------------------------------------------------
def test_a_start_makes_the_run_running_on_its_worker_by_the_store_clock(store: Store) -> None:
    key = submitted(store)
    before = store.now()

    assert store.record_runs([started(key, age=2.5)]) == 0

    after = store.now()
    run = run_of(store, key)
    assert (run.run_state, run.run_id, run.worker, run.run_attempts) == \
        (RunState.RUNNING, "r1", A, 1)
    assert within(run.started_at, before - s(2.5), after - s(2.5))
    assert within(run.heartbeat_at, before, after)
    assert (run.finished_at, run.runtime, run.run_error) == (None, None, None)
    # Beat's columns are beat's alone.
    assert (run.state, run.attempts, run.last_error) == (ExecutionState.SUBMITTED, 1, None)


def test_an_end_records_the_outcome_its_instant_the_runtime_and_the_error(store: Store) -> None:
    key = submitted(store)
    error = "KeyError: 'a\"b\\\\c{d},e' – ü"  # what a text array must carry exactly
    before = store.now()

    store.record_runs([started(key, age=3),
                       finished(key, age=1, outcome=RunOutcome.FAILED, runtime=1.999999,
                                error=error)])

    after = store.now()
    run = run_of(store, key)
    assert (run.run_state, run.run_error, run.runtime, run.run_attempts) == \
        (RunState.FAILED, error, timedelta(seconds=1.999999), 1)
    assert within(run.finished_at, before - s(1), after - s(1))
    assert within(run.started_at, before - s(3), after - s(3))


def test_a_new_execution_has_no_run_yet(store: Store) -> None:
    run = run_of(store, claimed(store))

    assert (run.run_state, run.run_id, run.worker, run.run_attempts, run.started_at,
            run.finished_at, run.heartbeat_at, run.runtime, run.run_error) == \
        (None, None, None, 0, None, None, None, None, None)


def test_reports_naming_no_execution_are_ignored_and_counted(store: Store) -> None:
    key = submitted(store)

    unknown = store.record_runs([started("gone:2026-01-01T00:00:00+00:00"), started(key),
                                 finished("gone:2026-01-01T00:00:00+00:00"),
                                 finished("never:2026-01-01T00:00:00+00:00")])

    assert unknown == 3
    assert run_of(store, key).run_state is RunState.RUNNING


def test_a_replayed_batch_counts_no_attempt_twice(store: Store) -> None:
    key = submitted(store)
    batch = [started(key, age=2), finished(key, age=1)]

    store.record_runs(batch)
    once = run_of(store, key)
    store.record_runs(batch)

    again = run_of(store, key)
    assert (again.run_state, again.run_attempts, again.run_id) == (RunState.SUCCEEDED, 1, "r1")
    assert (once.run_state, once.run_attempts) == (RunState.SUCCEEDED, 1)


def test_a_redelivered_message_is_another_attempt_of_the_same_key(store: Store) -> None:
    key = submitted(store)
    store.record_runs([started(key, "r1", A, age=5)])

    store.record_runs([started(key, "r2", B, age=1), finished(key, "r2", B, runtime=1)])

    run = run_of(store, key)
    assert (run.run_state, run.run_id, run.worker, run.run_attempts) == \
        (RunState.SUCCEEDED, "r2", B, 2)


def test_the_late_report_of_an_attempt_a_later_one_replaced_changes_nothing(
        store: Store) -> None:
    key = submitted(store)
    store.record_runs([started(key, "r1", A, age=10), started(key, "r2", B, age=2)])
    shown = run_of(store, key)

    store.record_runs([finished(key, "r1", A, age=9, started_age=10,
                                outcome=RunOutcome.FAILED)])

    assert run_of(store, key) == shown
    assert (shown.run_state, shown.run_id, shown.run_attempts) == (RunState.RUNNING, "r2", 2)


def test_an_end_whose_start_was_never_written_records_both(store: Store) -> None:
    key = submitted(store)
    before = store.now()

    store.record_runs([finished(key, age=1, runtime=3, started_age=4)])

    run = run_of(store, key)
    assert (run.run_state, run.run_id, run.run_attempts, run.runtime) == \
        (RunState.SUCCEEDED, "r1", 1, s(3))
    assert run.started_at is not None and run.started_at >= before - s(4)


def test_the_main_process_revoking_a_run_never_started_ends_it(store: Store) -> None:
    key = submitted(store)

    store.record_runs([finished(key, None, outcome=RunOutcome.REVOKED, runtime=None,
                                error="expired before it started")])

    run = run_of(store, key)
    assert (run.run_state, run.run_error, run.run_attempts, run.started_at) == \
        (RunState.REVOKED, "expired before it started", 0, None)


def test_a_worker_may_report_a_start_before_beat_marks_the_run_submitted(store: Store) -> None:
    key = claimed(store)
    store.record_runs([started(key)])

    assert store.mark_submitted([key]) == 1

    run = run_of(store, key)
    assert (run.state, run.run_state, run.run_attempts) == \
        (ExecutionState.SUBMITTED, RunState.RUNNING, 1)


def test_concurrent_reports_of_one_key_lose_no_attempt(backend: Backend) -> None:
    # Two workers' writers report at once; each decision is compare-and-set on what it read.
    store = backend.store
    peer = backend.open_peer()
    keys = [submitted(store, f"race{index}") for index in range(8)]

    run_together(lambda: [peer.record_runs([started(k, "ra", A, age=5)]) for k in keys],
                 lambda: [store.record_runs([started(k, "rb", B, age=1)]) for k in keys])

    for key in keys:
        run = run_of(store, key)
        # Whichever came first, both attempts count and the later start is the one shown.
        assert (run.run_attempts, run.run_id, run.worker) == (2, "rb", B), run


# -- heartbeats ------------------------------------------------------------------------------
def test_a_heartbeat_touches_only_the_running_runs_among_the_keys_given(
        store: Store, clock: StoreClock) -> None:
    beating, other, done, waiting = (submitted(store, name) for name in
                                     ("beating", "other", "done", "waiting"))
    store.record_runs([started(beating), started(other), started(done), finished(done)])
    earlier = {key: run_of(store, key) for key in (other, done, waiting)}
    clock.advance(0.5)
    before = store.now()

    assert store.heartbeat([beating, done, waiting, "gone:x", beating]) == 1

    assert within(run_of(store, beating).heartbeat_at, before, store.now())
    assert {key: run_of(store, key) for key in earlier} == earlier


def test_a_heartbeat_of_no_key_writes_nothing(store: Store) -> None:
    assert store.heartbeat([]) == 0


# -- lost runs -------------------------------------------------------------------------------
#: The workers track runs since long before any row of these tests was written.
LONG_TRACKED = datetime(2000, 1, 1, tzinfo=UTC)


def mark_lost(store: Store, limit: int = 1000, *,
              tracked_since: datetime | None = LONG_TRACKED) -> list[Execution]:
    return store.mark_lost(silent_for=SILENT, unstarted_for=UNSTARTED,
                           tracked_since=tracked_since, limit=limit)


def test_a_running_run_is_lost_once_its_heartbeat_is_older_than_silent_for(
        store: Store, clock: StoreClock) -> None:
    key = submitted(store)
    store.record_runs([started(key, age=1)])
    beat = run_of(store, key).heartbeat_at
    assert beat is not None

    clock.move_just_before(beat + SILENT)
    assert mark_lost(store) == []
    clock.move_to(beat + SILENT + MICROSECOND)
    (lost,) = mark_lost(store)

    assert (lost.key, lost.run_state, lost.run_error) == \
        (key, RunState.LOST, "worker silent for 2s")
    assert lost.finished_at is not None and lost.finished_at > beat + SILENT
    assert run_of(store, key) == lost
    assert mark_lost(store) == []  # marked once


def test_a_run_with_fresh_heartbeats_is_never_lost(store: Store, clock: StoreClock) -> None:
    key = submitted(store)
    store.record_runs([started(key)])
    for _ in range(3):
        clock.advance(SILENT.total_seconds() * 0.6)
        assert store.heartbeat([key]) == 1
        assert mark_lost(store) == []

    assert run_of(store, key).run_state is RunState.RUNNING


def test_a_run_the_broker_took_but_nobody_started_is_lost_after_the_start_timeout(
        store: Store, clock: StoreClock) -> None:
    key = submitted(store)
    pending = claimed(store, "not-sent")  # beat's business: never judged here
    sent_at = run_of(store, key).submitted_at
    assert sent_at is not None

    clock.move_just_before(sent_at + UNSTARTED)
    assert mark_lost(store) == []
    clock.move_to(sent_at + UNSTARTED + MICROSECOND)
    (lost,) = mark_lost(store)

    assert (lost.key, lost.run_state, lost.run_error, lost.state) == \
        (key, RunState.LOST, "never started within 3s", ExecutionState.SUBMITTED)
    assert run_of(store, pending).run_state is None


def test_without_tracking_a_run_nobody_started_ends_unknown_after_the_start_timeout(
        store: Store, clock: StoreClock) -> None:
    key = submitted(store)
    sent_at = run_of(store, key).submitted_at
    assert sent_at is not None

    clock.move_just_before(sent_at + UNSTARTED)
    assert mark_lost(store, tracked_since=None) == []
    clock.move_to(sent_at + UNSTARTED + MICROSECOND)
    (ended,) = mark_lost(store, tracked_since=None)

    assert (ended.key, ended.run_state, ended.run_error, ended.state, ended.settled) == (
        key, RunState.UNKNOWN, "workers do not track runs (goatbeat_track_runs is off)",
        ExecutionState.SUBMITTED, False)
    assert run_of(store, key) == ended
    assert mark_lost(store, tracked_since=None) == []  # ended once
    assert mark_lost(store) == []  # and never lost once tracking is on


def test_a_run_sent_before_tracking_was_known_to_be_on_ends_unknown_never_lost(
        store: Store, clock: StoreClock) -> None:
    before = submitted(store, "before")
    clock.advance(0.5)
    since = store.now()
    after = submitted(store, "after")
    clock.advance((UNSTARTED + s(0.5)).total_seconds())

    ended = {e.key: (e.run_state, e.run_error) for e in mark_lost(store, tracked_since=since)}

    assert ended == {before: (RunState.UNKNOWN,
                              "sent before the workers were known to track runs"),
                     after: (RunState.LOST, "never started within 3s")}


def test_a_report_replaces_an_unknown_outcome(store: Store, clock: StoreClock) -> None:
    started_late, revoked = submitted(store, "late"), submitted(store, "revoked")
    clock.advance((UNSTARTED + s(0.5)).total_seconds())
    assert len(mark_lost(store, tracked_since=None)) == 2

    store.record_runs([started(started_late, "r1", B),
                       finished(revoked, run=None, outcome=RunOutcome.REVOKED, runtime=None)])

    run = run_of(store, started_late)
    assert (run.run_state, run.run_error, run.finished_at, run.run_attempts) == \
        (RunState.RUNNING, None, None, 1)
    assert run_of(store, revoked).run_state is RunState.REVOKED


def test_a_retry_that_never_starts_is_lost_after_the_start_timeout(
        store: Store, clock: StoreClock) -> None:
    key = submitted(store)
    store.record_runs([started(key, age=1),
                       RunEvent.retried(key, run="r1", worker=A, age=s(0), runtime=s(1),
                                        error="Retry in 60s")])
    asked = run_of(store, key).heartbeat_at
    assert asked is not None and run_of(store, key).run_state is RunState.RETRYING

    clock.move_just_before(asked + UNSTARTED)
    assert mark_lost(store) == []
    clock.move_to(asked + UNSTARTED + MICROSECOND)
    (lost,) = mark_lost(store)

    assert (lost.run_state, lost.run_error) == (RunState.LOST,
                                                "retry never started within 3s")


def test_ended_runs_are_never_lost(store: Store, clock: StoreClock) -> None:
    keys = [submitted(store, f"ended{index}") for index in range(4)]
    store.record_runs([event for index, key in enumerate(keys) for event in (
        started(key), finished(key, outcome=list(RunOutcome)[index]))])

    clock.advance((UNSTARTED + SILENT).total_seconds())

    assert mark_lost(store) == []


def test_the_runs_heard_of_longest_ago_are_marked_first_within_the_limit(
        store: Store, clock: StoreClock) -> None:
    first, second, third = (submitted(store, name) for name in ("first", "second", "third"))
    for key in (first, second, third):
        store.record_runs([started(key)])
        clock.advance(0.2)
    assert store.heartbeat([third]) == 1
    last = run_of(store, third).heartbeat_at
    assert last is not None
    clock.move_to(last + SILENT + MICROSECOND)

    assert [e.key for e in mark_lost(store, limit=2)] == [first, second]
    assert [e.key for e in mark_lost(store, limit=2)] == [third]


def test_a_lost_run_takes_the_outcome_its_worker_reports_later(
        store: Store, clock: StoreClock) -> None:
    key = submitted(store)
    store.record_runs([started(key, age=1)])
    clock.advance((SILENT + s(0.5)).total_seconds())
    assert [e.key for e in mark_lost(store)] == [key]

    store.record_runs([finished(key, runtime=4)])

    run = run_of(store, key)
    assert (run.run_state, run.run_error, run.runtime, run.run_attempts) == \
        (RunState.SUCCEEDED, None, s(4), 1)


def test_a_lost_run_started_again_is_running_as_a_new_attempt(
        store: Store, clock: StoreClock) -> None:
    key = submitted(store)
    clock.advance((UNSTARTED + s(0.5)).total_seconds())
    assert [e.key for e in mark_lost(store)] == [key]

    store.record_runs([started(key, "late", B)])

    run = run_of(store, key)
    assert (run.run_state, run.run_error, run.finished_at, run.run_attempts, run.worker) == \
        (RunState.RUNNING, None, None, 1, B)

