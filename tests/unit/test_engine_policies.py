"""The run policies in the engine loop, on the memory store with a manual clock: overlap (skip,
buffer_one), fixed delay, failure backoff and pause, with workers' reports written to the store
as run tracking writes them, and lost runs ending every wait."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.rules.policies import OverlapPolicy, ScheduleMode
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome, RunState
from goatbeat_celery.core.types.execution import ExecutionState, idempotency_key
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

EVERY_MINUTE = TriggerSpec(kind="interval", params={"every": 60})
S = timedelta(seconds=1)


class World:
    def __init__(self, **settings: Any) -> None:
        self.clock = ManualClock()
        self.store = MemoryStore(self.clock)
        self.submitter = RecordingSubmitter()
        self.observer = RecordingObserver()
        self.engine = build_engine(self.store, clock=self.clock, submitter=self.submitter,
                                   settings=Settings(max_interval=60, **settings), holder="a",
                                   observer=self.observer)

    @property
    def t0(self) -> datetime:
        return self.clock.start

    def minute(self, n: float) -> datetime:
        return self.t0 + timedelta(minutes=n)

    def create(self, **changes: Any) -> None:
        spec = ScheduleSpec(name="job", task="app.job", trigger=EVERY_MINUTE, **changes)
        first = self.minute(1)
        self.store.create_schedule(spec, next_occurrence_at=first, next_run_at=first)

    def at(self, instant: datetime) -> None:
        """Move to ``instant`` and tick."""
        self.clock.advance((instant - self.clock()).total_seconds())
        self.engine.tick()

    def key(self, minute: float) -> str:
        return idempotency_key("job", self.minute(minute))

    def state(self, minute: float) -> ExecutionState | None:
        found = [e for e in self.store.executions(schedule_name="job", limit=1000)
                 if e.key == self.key(minute)]
        return found[0].state if found else None

    def start(self, key: str, run: str = "r1") -> None:
        self.store.record_runs([RunEvent.started(key, run=run, worker="w1", age=timedelta(0))])

    def finish(self, key: str, outcome: RunOutcome = RunOutcome.SUCCEEDED, run: str = "r1",
               error: str | None = None) -> None:
        self.store.record_runs([RunEvent.finished(key, run=run, worker="w1", age=timedelta(0),
                                                  outcome=outcome, error=error)])

    def run(self, key: str, outcome: RunOutcome = RunOutcome.SUCCEEDED,
            error: str | None = None) -> None:
        self.start(key, run=f"run-of-{key}")
        self.finish(key, outcome, run=f"run-of-{key}", error=error)

    @property
    def sent(self) -> list[str]:
        return [key for key, _ in self.submitter.sent]


# -- overlap ---------------------------------------------------------------------------------
def test_skip_records_an_occurrence_whose_previous_run_has_not_finished(
        caplog: pytest.LogCaptureFixture) -> None:
    world = World()
    world.create(overlap=OverlapPolicy.SKIP)
    world.at(world.minute(1))
    world.start(world.key(1))
    with caplog.at_level(logging.INFO):
        world.at(world.minute(2))
    assert world.sent == [world.key(1)]
    assert world.state(2) is ExecutionState.SKIPPED
    skipped = [e for e in world.store.executions(limit=10) if e.key == world.key(2)][0]
    assert skipped.last_error == f"run {world.key(1)} had not finished"
    assert world.store.get_schedule("job").total_skipped == 1
    assert world.observer.of("skipped") == [((world.key(2), skipped.last_error),)]
    assert "occurrence_skipped" in [getattr(r, "action", None) for r in caplog.records]


def test_skip_claims_again_once_the_previous_run_finished() -> None:
    world = World()
    world.create(overlap=OverlapPolicy.SKIP)
    world.at(world.minute(1))
    world.run(world.key(1))
    world.at(world.minute(2))
    assert world.sent == [world.key(1), world.key(2)]


def test_the_global_overlap_policy_applies_to_schedules_that_give_none() -> None:
    world = World(overlap_policy="skip")
    world.create()
    world.at(world.minute(1))
    world.at(world.minute(2))
    assert world.state(2) is ExecutionState.SKIPPED


def test_buffer_one_holds_exactly_one_and_sends_it_when_the_previous_run_ends() -> None:
    world = World()
    world.create(overlap=OverlapPolicy.BUFFER_ONE)
    world.at(world.minute(1))
    world.start(world.key(1))
    world.at(world.minute(2))
    world.at(world.minute(3))
    assert [world.state(n) for n in (1, 2, 3)] == [
        ExecutionState.SUBMITTED, ExecutionState.HELD, ExecutionState.SKIPPED]
    assert world.sent == [world.key(1)]
    world.finish(world.key(1))
    world.at(world.minute(3.5))
    assert world.sent == [world.key(1), world.key(2)]
    assert world.state(2) is ExecutionState.SUBMITTED


def test_a_run_of_unknown_outcome_ends_the_wait_of_a_skip_schedule() -> None:
    world = World()
    world.create(overlap=OverlapPolicy.SKIP)
    world.at(world.minute(1))
    world.at(world.minute(2))
    assert world.state(2) is ExecutionState.SKIPPED
    # No worker tracks runs: the run's outcome is given up as unknown once the start timeout
    # (10 min) has passed.
    world.clock.advance(11 * 60)
    lost = world.store.mark_lost(silent_for=60 * S, unstarted_for=600 * S)
    assert [e.key for e in lost] == [world.key(1)]
    world.at(world.minute(14))
    assert world.state(14) is ExecutionState.SUBMITTED


# -- fixed delay -----------------------------------------------------------------------------
def test_fixed_delay_counts_the_next_run_from_the_previous_end() -> None:
    world = World()
    world.create(mode=ScheduleMode.FIXED_DELAY)
    world.at(world.minute(1))
    world.clock.advance(90)  # the run takes 90 s
    world.run(world.key(1))
    world.at(world.minute(2.6))  # a tick after the end: the end is applied
    schedule = world.store.get_schedule("job")
    assert schedule.next_run_at == world.minute(2.5) + timedelta(minutes=1)
    world.at(world.minute(3.5))
    assert world.sent == [world.key(1), idempotency_key("job", world.minute(3.5))]


def test_fixed_delay_never_overlaps_a_run_that_has_not_finished() -> None:
    world = World()
    world.create(mode=ScheduleMode.FIXED_DELAY)
    world.at(world.minute(1))
    world.start(world.key(1))
    world.at(world.minute(2))
    world.at(world.minute(3))
    assert world.sent == [world.key(1)]
    assert world.store.get_schedule("job").total_skipped == 0  # postponed, not skipped


# -- backoff and pause -----------------------------------------------------------------------
def test_a_failure_backs_the_next_run_off_and_a_success_resets_it(
        caplog: pytest.LogCaptureFixture) -> None:
    world = World()
    world.create(failure_backoff=90 * S)
    world.at(world.minute(1))
    world.run(world.key(1), RunOutcome.FAILED, error="ValueError: x")
    with caplog.at_level(logging.INFO):
        world.at(world.minute(1.1))
    schedule = world.store.get_schedule("job")
    # 90 s from the end, 00:01:00, is 00:02:30: the next grid point is 00:03; 00:02 is held
    # back.
    assert schedule.next_run_at == world.minute(3)
    assert schedule.consecutive_failures == 1
    assert "run_backoff" in [getattr(r, "action", None) for r in caplog.records]
    world.at(world.minute(3))
    world.run(world.key(3), RunOutcome.FAILED)
    world.at(world.minute(3.1))
    # The second failure in a row: 180 s from 00:03:00 is exactly the grid point 00:06.
    assert world.store.get_schedule("job").next_run_at == world.minute(6)
    world.at(world.minute(6))
    world.run(world.key(6))
    world.at(world.minute(6.1))
    schedule = world.store.get_schedule("job")
    assert (schedule.consecutive_failures, schedule.next_run_at) == (0, world.minute(7))
    assert world.sent == [world.key(1), world.key(3), world.key(6)]


def test_failures_in_a_row_pause_the_schedule_until_resumed() -> None:
    world = World()
    world.create(pause_after_failures=2)
    for minute in (1, 2):
        world.at(world.minute(minute))
        world.run(world.key(minute), RunOutcome.FAILED, error="ValueError: x")
    world.at(world.minute(2.5))
    schedule = world.store.get_schedule("job")
    assert not schedule.spec.enabled
    reason = "paused after 2 failed runs in a row; last error: ValueError: x"
    assert schedule.paused_reason == reason
    assert world.observer.of("paused") == [("job", reason)]
    world.at(world.minute(4))
    assert world.sent == [world.key(1), world.key(2)]
    resumed = Schedules(world.store).resume("job")
    assert (resumed.paused_reason, resumed.consecutive_failures) == (None, 0)


@pytest.mark.parametrize(("tracked_since", "verdict"), [
    (datetime(2000, 1, 1, tzinfo=UTC), RunState.LOST), (None, RunState.UNKNOWN)],
    ids=["lost", "unknown"])
def test_lost_runs_and_runs_of_unknown_outcome_never_pause_a_schedule(
        tracked_since: datetime | None, verdict: RunState) -> None:
    world = World()
    world.create(pause_after_failures=1)
    world.at(world.minute(1))
    world.clock.advance(11 * 60)
    world.store.mark_lost(silent_for=60 * S, unstarted_for=600 * S,
                          tracked_since=tracked_since)
    world.at(world.minute(12.5))
    schedule = world.store.get_schedule("job")
    assert schedule.spec.enabled and schedule.consecutive_failures == 0
    ended = [e for e in world.store.executions(limit=100) if e.key == world.key(1)][0]
    assert (ended.run_state, ended.settled) == (verdict, True)


# -- reporting how runs end ------------------------------------------------------------------
def test_every_run_end_is_reported_once_and_counted_in_its_schedules_failures() -> None:
    world = World()
    world.create()  # no policy waits on its runs
    world.at(world.minute(1))
    world.run(world.key(1), RunOutcome.FAILED, error="ValueError: boom")
    world.at(world.minute(2))
    world.run(world.key(2))
    world.at(world.minute(3))
    world.at(world.minute(3) + 5 * S)

    assert world.observer.of("runs_ended") == [
        [(world.key(1), RunState.FAILED)], [(world.key(2), RunState.SUCCEEDED)]]
    job = world.store.get_schedule("job")
    assert job.consecutive_failures == 0 and job.spec.enabled


def test_failures_in_a_row_are_counted_for_a_schedule_without_policies() -> None:
    world = World()
    world.create()
    for minute in (1, 2):
        world.at(world.minute(minute))
        world.run(world.key(minute), RunOutcome.FAILED)
    world.at(world.minute(3))
    job = world.store.get_schedule("job")
    assert job.consecutive_failures == 2
    assert job.next_run_at == world.minute(4)  # no policy: the grid is kept


def test_a_new_leader_does_not_report_again_what_the_last_one_reported() -> None:
    world = World()
    world.create()
    world.at(world.minute(1))
    world.run(world.key(1))
    world.at(world.minute(1) + 5 * S)
    assert len(world.observer.of("runs_ended")) == 1
    world.engine.close()

    successor = RecordingObserver()
    world.engine = build_engine(world.store, clock=world.clock, submitter=world.submitter,
                                settings=Settings(max_interval=60), holder="b",
                                observer=successor)
    world.at(world.minute(1) + 10 * S)
    assert successor.of("runs_ended") == []
