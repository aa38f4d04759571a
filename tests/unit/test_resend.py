"""Resending runs never started (core.rules.runs.resend_due, resend_wait; the leader's
Engine._resend_unstarted): which runs are sent again, how long each waits, how many times,
and that the leader sends each resend once under its key, a failover included."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from goatbeat_celery.core.loop.engine import Engine
from goatbeat_celery.core.rules.runs import (
    MIN_RESEND_WAIT,
    RunEvent,
    RunOutcome,
    RunRecord,
    RunState,
    duplicate_reason,
    resend_due,
    resend_wait,
    schedule_period,
)
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from goatbeat_celery.testing import (
    ManualClock,
    MemoryStore,
    RecordingObserver,
    RecordingSubmitter,
    build_engine,
)

SENT = datetime(2026, 1, 1, 12, tzinfo=UTC)
TRACKED = SENT - timedelta(hours=1)
TIMEOUT = timedelta(seconds=60)
NOT_STARTED = RunRecord()


def due(record: RunRecord = NOT_STARTED, *, after: timedelta = TIMEOUT + timedelta(seconds=1),
        attempts: int = 1, expires_at: datetime | None = None, resends: int = 1,
        schedule_resends: int | None = None, tracked_since: datetime | None = TRACKED,
        dispatched_at: datetime | None = SENT) -> bool:
    return resend_due(record, dispatched_at=dispatched_at, expires_at=expires_at,
                      attempts=attempts, now=SENT + after, unstarted_for=TIMEOUT,
                      tracked_since=tracked_since, resends=resends,
                      schedule_resends=schedule_resends)


# -- the rule -------------------------------------------------------------------------------
def test_a_run_sent_once_and_never_started_is_resent_strictly_after_the_start_timeout() -> None:
    assert not due(after=TIMEOUT)
    assert due(after=TIMEOUT + timedelta(microseconds=1))


@pytest.mark.parametrize("state", list(RunState))
def test_a_run_a_worker_reported_on_is_never_resent(state: RunState) -> None:
    assert not due(RunRecord(run_state=state), after=timedelta(days=1))


def test_only_runs_sent_to_workers_known_to_track_runs_are_resent() -> None:
    assert not due(tracked_since=None)
    assert not due(tracked_since=SENT + timedelta(microseconds=1))
    assert due(tracked_since=SENT)
    assert not due(dispatched_at=None)  # not sent: beat's own resubmission covers it


@pytest.mark.parametrize(("attempts", "resends", "expected"), [
    (1, 0, False), (1, 1, True), (2, 1, False), (2, 2, True), (3, 2, False),
])
def test_a_run_is_sent_at_most_one_plus_resends_times(attempts: int, resends: int,
                                                      expected: bool) -> None:
    assert due(attempts=attempts, resends=resends) is expected


@pytest.mark.parametrize(("schedule_resends", "setting", "attempts", "expected"), [
    # Unset: the setting decides.
    (None, 1, 1, True), (None, 1, 2, False), (None, 0, 1, False), (None, 2, 2, True),
    # 0: never, whatever the setting.
    (0, 1, 1, False), (0, 10, 1, False),
    # 2: twice, whatever the setting, 0 included.
    (2, 1, 2, True), (2, 0, 1, True), (2, 0, 2, True), (2, 10, 3, False),
])
def test_a_schedules_own_resends_win_over_the_setting(schedule_resends: int | None,
                                                      setting: int, attempts: int,
                                                      expected: bool) -> None:
    assert due(attempts=attempts, resends=setting,
               schedule_resends=schedule_resends) is expected


def test_a_schedules_resends_are_a_count_from_0_to_10() -> None:
    for fine in (None, 0, 10):
        assert replace(HOURLY, run_resends=fine).problems() == []
    for wrong in (-1, 11, 1.5, True, "1"):
        (problem,) = replace(HOURLY, run_resends=wrong).problems()  # type: ignore[arg-type]
        assert (problem.field, problem.message) == (
            "run_resends", f"must be an integer from 0 to 10, got {wrong!r}")


def test_a_run_past_its_starting_deadline_is_not_resent() -> None:
    after = timedelta(seconds=30)
    assert not due(after=after, expires_at=SENT + after)
    assert due(after=after, expires_at=SENT + after + timedelta(seconds=1))


def test_the_wait_is_the_start_timeout_or_half_the_time_left_before_the_deadline() -> None:
    timeout = timedelta(minutes=10)
    assert resend_wait(start_timeout=timeout, dispatched_at=SENT, expires_at=None) == timeout
    # 40 s left: resent after 20 s, so the resend has 20 s too.
    assert resend_wait(start_timeout=timeout, dispatched_at=SENT,
                       expires_at=SENT + timedelta(seconds=40)) == timedelta(seconds=20)
    # A long deadline never makes the wait longer than the start timeout...
    assert resend_wait(start_timeout=timeout, dispatched_at=SENT,
                       expires_at=SENT + timedelta(days=1)) == timeout
    # ...and a short one never shorter than the least wait, unless the timeout is.
    assert resend_wait(start_timeout=timeout, dispatched_at=SENT,
                       expires_at=SENT + timedelta(seconds=2)) == MIN_RESEND_WAIT
    assert resend_wait(start_timeout=timedelta(seconds=2), dispatched_at=SENT,
                       expires_at=SENT + timedelta(seconds=4)) == timedelta(seconds=2)


@pytest.mark.parametrize(("period", "expected"), [
    (timedelta(minutes=1), timedelta(minutes=1)),  # an every-minute schedule: a minute
    (timedelta(seconds=2), MIN_RESEND_WAIT),  # never sooner than the least wait
    (timedelta(hours=1), timedelta(minutes=10)),  # never later than the start timeout
    (None, timedelta(minutes=10)),
])
def test_the_wait_is_at_most_the_schedules_period(period: timedelta | None,
                                                  expected: timedelta) -> None:
    assert resend_wait(start_timeout=timedelta(minutes=10), dispatched_at=SENT,
                       expires_at=None, period=period) == expected


def test_the_period_is_the_time_to_the_schedules_next_occurrence() -> None:
    assert schedule_period(SENT, SENT + timedelta(seconds=30)) == timedelta(seconds=30)
    assert schedule_period(SENT, SENT) is None
    assert schedule_period(SENT, None) is None


def test_the_setting_is_a_count_from_0_to_10() -> None:
    assert Settings().run_resends == 1
    assert Settings(run_resends=0).run_resends == 0
    for wrong in (-1, 11, 1.5, True, "1"):
        with pytest.raises(ConfigurationError, match="run_resends"):
            Settings(run_resends=wrong)  # type: ignore[arg-type]


# -- the leader -----------------------------------------------------------------------------
SETTINGS = Settings(heartbeat_interval=10, run_lost_after=60, run_start_timeout=60,
                    max_interval=5, track_runs=True, run_resends=1)
HOURLY = ScheduleSpec(name="hourly", task="t.hourly",
                      trigger=TriggerSpec(kind="interval", params={"every": 3600}))


def leader(store: MemoryStore, clock: ManualClock, holder: str = "leader",
           observer: RecordingObserver | None = None,
           submitter: RecordingSubmitter | None = None) -> Engine:
    return build_engine(store, monotonic=clock.monotonic_for(holder), settings=SETTINGS,
                        holder=holder, runs=store, config_schedules=[HOURLY],
                        observer=observer, submitter=submitter)


def run_until(engine: Engine, clock: ManualClock, done: Callable[[], bool],
              limit: timedelta) -> None:
    """Tick as the loop does (every max_interval at most) until ``done()`` or ``limit``."""
    spent = timedelta(0)
    while not done():
        assert spent <= limit, "not done in time"
        clock.advance(SETTINGS.max_interval)
        spent += SETTINGS.max_interval
        engine.tick()


def test_the_leader_sends_a_run_nobody_started_again_once_then_marks_it_lost(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    store = MemoryStore(clock)
    observer = RecordingObserver()
    submitter = RecordingSubmitter()
    engine = leader(store, clock, observer=observer, submitter=submitter)
    engine.tick()
    key = store.request_run("hourly").key
    engine.tick()
    assert submitter.keys == [key]
    look = SETTINGS.run_start_timeout + SETTINGS.heartbeat_interval + SETTINGS.max_interval

    run_until(engine, clock, lambda: len(submitter.keys) == 2, look)

    assert submitter.keys == [key, key]  # under its own key
    (execution,) = store.executions()
    assert (execution.state.value, execution.attempts, execution.run_state) == \
        ("submitted", 2, None)
    assert observer.of("runs_resent") == [(key,)]
    (record,) = [r for r in caplog.records if getattr(r, "action", None) == "run_resent"]
    assert key in record.getMessage()

    run_until(engine, clock, lambda: store.executions()[0].run_state is not None, look)

    (execution,) = store.executions()
    assert (execution.run_state, execution.run_error) == \
        (RunState.LOST, "never started within 60s")
    assert submitter.keys == [key, key]  # resent once only


def test_with_the_setting_at_0_the_leader_resends_the_runs_of_a_schedule_that_asks() -> None:
    clock = ManualClock()
    store = MemoryStore(clock)
    submitter = RecordingSubmitter()
    engine = build_engine(store, monotonic=clock.monotonic_for("leader"),
                          settings=replace(SETTINGS, run_resends=0), holder="leader",
                          runs=store, config_schedules=[replace(HOURLY, run_resends=1)],
                          submitter=submitter)
    engine.tick()
    key = store.request_run("hourly").key
    engine.tick()
    look = SETTINGS.run_start_timeout + SETTINGS.heartbeat_interval + SETTINGS.max_interval

    run_until(engine, clock, lambda: store.executions()[0].run_state is not None, 2 * look)

    assert submitter.keys == [key, key]
    assert store.executions()[0].run_state is RunState.LOST


def test_a_run_started_before_its_start_timeout_is_not_resent() -> None:
    clock = ManualClock()
    store = MemoryStore(clock)
    submitter = RecordingSubmitter()
    engine = leader(store, clock, submitter=submitter)
    engine.tick()
    key = store.request_run("hourly").key
    engine.tick()
    clock.advance(SETTINGS.run_start_timeout / 2)
    store.record_runs([RunEvent.started(key, run="r1", worker="w", age=timedelta(0))])
    store.record_runs([RunEvent.finished(key, run="r1", worker="w", age=timedelta(0),
                                         outcome=RunOutcome.SUCCEEDED)])
    for _ in range(40):
        clock.advance(SETTINGS.max_interval)
        engine.tick()

    assert submitter.keys == [key]


def test_a_resend_put_back_by_a_leader_that_dies_is_sent_once_by_the_next() -> None:
    clock = ManualClock()
    store = MemoryStore(clock)
    submitter = RecordingSubmitter()
    first = leader(store, clock, "a", submitter=submitter)
    first.tick()
    key = store.request_run("hourly").key
    first.tick()
    # The first leader puts the run back to claimed, in its fenced write, and dies before
    # its next tick would send it.
    run_until(first, clock, lambda: store.executions()[0].state.value == "claimed",
              SETTINGS.run_start_timeout + SETTINGS.heartbeat_interval + SETTINGS.max_interval)

    second_submitter = RecordingSubmitter()
    second = leader(store, clock, "b", submitter=second_submitter)
    run_until(second, clock, lambda: bool(second_submitter.keys),
              SETTINGS.lease_ttl + SETTINGS.lease_renew_interval + SETTINGS.max_interval * 2)
    for _ in range(5):
        clock.advance(SETTINGS.max_interval)
        second.tick()

    assert submitter.keys == [key]
    assert second_submitter.keys == [key]
    (execution,) = store.executions()
    assert (execution.state.value, execution.attempts) == ("submitted", 2)


# -- duplicates on the worker ---------------------------------------------------------------
NOW = SENT + timedelta(seconds=30)
LIVE = timedelta(seconds=60)


def duplicate(record: RunRecord | None, *, redelivered: bool = False) -> str | None:
    return duplicate_reason(record, now=NOW, live_for=LIVE, redelivered=redelivered)


@pytest.mark.parametrize("state", [RunState.SUCCEEDED, RunState.FAILED, RunState.REVOKED,
                                   RunState.REJECTED])
def test_a_delivery_of_a_run_that_ended_is_a_duplicate(state: RunState) -> None:
    record = RunRecord(run_state=state, finished_at=SENT)
    assert duplicate(record) == f"the run already {state.value}"
    assert duplicate(record, redelivered=True) == f"the run already {state.value}"


def test_a_redelivery_after_the_pool_process_died_runs() -> None:
    record = RunRecord(run_state=RunState.FAILED, run_error="WorkerLostError: died")
    assert duplicate(record, redelivered=True) is None
    assert duplicate(record) == "the run already failed"  # a resend of it does not


def test_a_copy_sent_again_while_the_run_beats_is_a_duplicate_until_its_heartbeat_is_old(
        ) -> None:
    beating = RunRecord(run_state=RunState.RUNNING, worker="celery@a",
                        heartbeat_at=NOW - LIVE + timedelta(microseconds=1))
    assert duplicate(beating) == "the run is running on celery@a"
    assert duplicate(replace(beating, heartbeat_at=NOW - LIVE)) is None
    # The broker redelivers only once the consumer that held it went away: it runs.
    assert duplicate(beating, redelivered=True) is None


@pytest.mark.parametrize("record", [None, RunRecord(), RunRecord(run_state=RunState.RETRYING),
                                    RunRecord(run_state=RunState.LOST),
                                    RunRecord(run_state=RunState.UNKNOWN)])
def test_a_run_not_started_retrying_lost_or_unknown_runs(record: RunRecord | None) -> None:
    assert duplicate(record) is None
    assert duplicate(record, redelivered=True) is None
