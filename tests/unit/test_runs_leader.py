"""The leader's part in run tracking: it marks lost the runs whose worker went silent and those
never started while the workers track runs, gives the others' outcome up as unknown, looking
once per heartbeat interval, on the memory store and a manual clock."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from goatbeat_celery.core.loop.engine import Engine
from goatbeat_celery.core.rules.runs import RunEvent, RunRecord, RunState
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from goatbeat_celery.testing import ManualClock, MemoryStore, build_engine

EVERY_HOUR = TriggerSpec(kind="interval", params={"every": 3600})
# No resend here: these judge the lost verdicts (tests/unit/test_resend.py the resends).
SETTINGS = Settings(heartbeat_interval=10, run_lost_after=60, run_start_timeout=600,
                    max_interval=5, track_runs=True, run_resends=0)
UNTRACKED = replace(SETTINGS, track_runs=False)


class CountingLog:
    """The memory store's run log, counting the leader's looks for lost runs."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.looks: list[tuple[timedelta, timedelta]] = []

    def record_runs(self, events: Sequence[RunEvent]) -> int:
        return self.store.record_runs(events)

    def heartbeat(self, keys: Collection[str]) -> int:
        return self.store.heartbeat(keys)

    def read_runs(self, keys: Collection[str]) -> tuple[datetime, dict[str, RunRecord]]:
        return self.store.read_runs(keys)

    def mark_lost(self, *, silent_for: timedelta, unstarted_for: timedelta,
                  tracked_since: datetime | None = None,
                  limit: int = 1000) -> list[Execution]:
        self.looks.append((silent_for, unstarted_for))
        return self.store.mark_lost(silent_for=silent_for, unstarted_for=unstarted_for,
                                    tracked_since=tracked_since, limit=limit)

    def resend_unstarted(self, *, lease: LeaseGrant, unstarted_for: timedelta,
                         tracked_since: datetime | None, resends: int,
                         limit: int = 1000) -> list[Execution]:
        return self.store.resend_unstarted(lease=lease, unstarted_for=unstarted_for,
                                           tracked_since=tracked_since, resends=resends,
                                           limit=limit)


@pytest.fixture
def log(store: MemoryStore) -> CountingLog:
    return CountingLog(store)


@pytest.fixture
def engine(store: MemoryStore, clock: ManualClock, log: CountingLog) -> Engine:
    return build_engine(store, clock=clock, settings=SETTINGS, holder="leader", runs=log,
                        config_schedules=[ScheduleSpec(name="hourly", task="t.hourly",
                                                       trigger=EVERY_HOUR)])


def sent_key(engine: Engine, store: MemoryStore) -> str:
    """The key of a run the leader sent: an extra run of the hourly schedule, asked for once
    the leader had written its config."""
    engine.tick()
    key = store.request_run("hourly").key
    engine.tick()
    (execution,) = store.executions()
    assert execution.key == key and execution.submitted_at is not None
    return key


def test_the_leader_marks_a_silent_run_lost_within_lost_after_plus_its_look_interval(
        engine: Engine, store: MemoryStore, clock: ManualClock) -> None:
    key = sent_key(engine, store)
    store.record_runs([RunEvent.started(key, run="r1", worker="celery@a",
                                        age=timedelta(0))])
    silent_since = clock.current

    # Ticking as the loop does (every max_interval at most), the run is lost once its
    # heartbeat is older than run_lost_after, at the leader's next look.
    while store.executions()[0].run_state is RunState.RUNNING:
        clock.advance(SETTINGS.max_interval)
        engine.tick()
        assert clock.current - silent_since <= \
            SETTINGS.run_lost_after + SETTINGS.heartbeat_interval + SETTINGS.max_interval

    lost = store.executions()[0]
    assert (lost.run_state, lost.run_error) == (RunState.LOST, "worker silent for 60s")
    assert clock.current - silent_since > SETTINGS.run_lost_after


def test_a_run_nobody_starts_is_lost_after_the_start_timeout(
        engine: Engine, store: MemoryStore, clock: ManualClock) -> None:
    sent_key(engine, store)

    clock.advance(SETTINGS.run_start_timeout + SETTINGS.heartbeat_interval
                  + SETTINGS.max_interval)
    engine.tick()

    run = store.executions()[0]
    assert (run.run_state, run.run_error) == (RunState.LOST, "never started within 600s")


def past_the_start_timeout(settings: Settings) -> timedelta:
    """Past the start timeout and the leader's next look at it (one heartbeat interval, with
    a tick every max_interval at most)."""
    return settings.run_start_timeout + settings.heartbeat_interval + settings.max_interval


def test_without_tracking_a_run_nobody_reports_on_ends_unknown_and_nothing_warns(
        store: MemoryStore, clock: ManualClock, log: CountingLog,
        caplog: pytest.LogCaptureFixture) -> None:
    engine = build_engine(store, clock=clock, settings=UNTRACKED, holder="leader", runs=log,
                          config_schedules=[ScheduleSpec(name="hourly", task="t.hourly",
                                                         trigger=EVERY_HOUR)])
    sent_key(engine, store)

    with caplog.at_level(logging.DEBUG, logger="goatbeat_celery"):
        clock.advance(past_the_start_timeout(UNTRACKED))
        engine.tick()

    run = store.executions()[0]
    assert (run.run_state, run.run_error) == (
        RunState.UNKNOWN, "workers do not track runs (goatbeat_track_runs is off)")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert [getattr(r, "action", None) for r in caplog.records
            if "unknown" in r.getMessage()] == ["run_unknown"]


def test_a_run_sent_before_the_leader_knew_the_workers_track_runs_is_never_judged_lost(
        store: MemoryStore, clock: ManualClock, log: CountingLog) -> None:
    # Tracking turned on later: the run the old leader sent, with workers that did not track
    # runs, has no report to miss; the one the new leader sends has.
    untracked = build_engine(store, clock=clock, settings=UNTRACKED, holder="old", runs=log,
                             config_schedules=[ScheduleSpec(name="hourly", task="t.hourly",
                                                            trigger=EVERY_HOUR)])
    before = sent_key(untracked, store)
    untracked.close()
    clock.advance(1)
    tracking = build_engine(store, clock=clock, settings=SETTINGS, holder="new", runs=log)
    tracking.tick()
    after = store.request_run("hourly").key
    tracking.tick()

    clock.advance(past_the_start_timeout(SETTINGS))
    tracking.tick()

    runs = {e.key: (e.run_state, e.run_error) for e in store.executions()}
    assert runs == {before: (RunState.UNKNOWN,
                             "sent before the workers were known to track runs"),
                    after: (RunState.LOST, "never started within 600s")}


def test_the_leader_looks_once_per_heartbeat_interval_with_the_settings(
        engine: Engine, store: MemoryStore, clock: ManualClock, log: CountingLog) -> None:
    sent_key(engine, store)
    assert log.looks == [(timedelta(seconds=60), timedelta(seconds=600))]

    for _ in range(9):  # a tick a second: none looks again before 10 s
        clock.advance(1)
        engine.tick()
    assert len(log.looks) == 1
    clock.advance(1)
    engine.tick()

    assert len(log.looks) == 2


def test_a_standby_does_not_judge_runs(store: MemoryStore, clock: ManualClock,
                                       engine: Engine, log: CountingLog) -> None:
    engine.tick()
    standby = build_engine(store, clock=clock, settings=SETTINGS, holder="standby", runs=log)
    looks = len(log.looks)

    standby.tick()

    assert not standby.is_leader() and len(log.looks) == looks
