"""The leader judges alerts after dispatch, a page of schedules per look, writes each change
once in its fenced transaction and reports it (log line, observer); a failover neither
repeats nor loses an alert. Memory store, manual clock."""

from __future__ import annotations

import dataclasses
import logging
from datetime import timedelta

import pytest

from goatbeat_celery import Schedules
from goatbeat_celery.core.loop.alerts import rules_of
from goatbeat_celery.core.loop.engine import Engine
from goatbeat_celery.core.rules.alerts import AlertRule, AlertState
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from goatbeat_celery.testing import ManualClock, MemoryStore, RecordingObserver, build_engine

EVERY_MINUTE = TriggerSpec(kind="interval", params={"every": 60})
SETTINGS = Settings(track_runs=True, run_resends=0, alert_failures=2, alert_interval=1,
                    heartbeat_interval=10, run_lost_after=60, max_interval=5)
SPEC = ScheduleSpec(name="minutely", task="t.minutely", trigger=EVERY_MINUTE)


def leader(store: MemoryStore, clock: ManualClock, holder: str = "leader",
           settings: Settings = SETTINGS, observer: RecordingObserver | None = None,
           specs: tuple[ScheduleSpec, ...] = (SPEC,)) -> Engine:
    return build_engine(store, clock=clock, settings=settings, holder=holder, runs=store,
                        alerts=store, observer=observer, config_schedules=specs)


def next_run(engine: Engine, store: MemoryStore, clock: ManualClock) -> str:
    """Move to the schedule's next occurrence and tick: the key of the run it sent."""
    schedule = store.get_schedule("minutely")
    assert schedule.next_run_at is not None
    clock.move_to(schedule.next_run_at)
    engine.tick()
    return store.executions(schedule_name="minutely", limit=1)[0].key


def ends(store: MemoryStore, key: str, outcome: RunOutcome) -> None:
    store.record_runs([RunEvent.finished(
        key, run=f"r-{key}", worker="celery@w", age=timedelta(0), outcome=outcome,
        runtime=timedelta(seconds=1), error="ValueError: boom" if outcome is RunOutcome.FAILED
        else None, started_age=timedelta(seconds=1))])


def test_failed_is_raised_after_the_count_counted_for_each_failure_and_resolved_on_success(
        store: MemoryStore, clock: ManualClock, caplog: pytest.LogCaptureFixture) -> None:
    observer = RecordingObserver()
    engine = leader(store, clock, observer=observer)
    engine.tick()
    with caplog.at_level(logging.INFO, logger="goatbeat_celery"):
        ends(store, next_run(engine, store, clock), RunOutcome.FAILED)
        ends(store, next_run(engine, store, clock), RunOutcome.FAILED)
        assert store.list_alerts() == []  # judged at the next look
        third = next_run(engine, store, clock)
        (alert,) = store.list_alerts(open_only=True)
        assert (alert.rule, alert.count) == (AlertRule.FAILED, 1)
        assert alert.reason.startswith("2 runs failed in a row")

        ends(store, third, RunOutcome.FAILED)
        fourth = next_run(engine, store, clock)
        assert store.list_alerts()[0].count == 2
        ends(store, fourth, RunOutcome.SUCCEEDED)
        next_run(engine, store, clock)

    (alert,) = store.list_alerts()
    assert (alert.state, alert.count, alert.resolved_at) == (
        AlertState.RESOLVED, 2, clock.current)
    assert observer.of("alerts_changed") == [
        [("open", "minutely", "failed")], [("repeat", "minutely", "failed")],
        [("resolve", "minutely", "failed")]]
    assert [r.action for r in caplog.records if getattr(r, "rule", None) == "failed"] == [
        "alert_opened", "alert_repeated", "alert_resolved"]
    assert [r.levelno for r in caplog.records if getattr(r, "rule", None) == "failed"] == [
        logging.WARNING, logging.WARNING, logging.INFO]


def test_a_failover_neither_repeats_nor_loses_an_open_alert(
        store: MemoryStore, clock: ManualClock) -> None:
    first = leader(store, clock, holder="a")
    first.tick()
    for _ in range(3):
        ends(store, next_run(first, store, clock), RunOutcome.FAILED)
    next_run(first, store, clock)
    (raised,) = store.list_alerts()
    first.close()

    second = leader(store, clock, holder="b")
    clock.advance(1)
    second.tick()
    clock.advance(SETTINGS.alert_interval)
    second.tick()

    assert second.is_leader()
    assert store.list_alerts() == [raised]  # the same row, counted as before
    ends(store, store.executions(limit=1)[0].key, RunOutcome.SUCCEEDED)
    next_run(second, store, clock)
    assert [a.state for a in store.list_alerts()] == [AlertState.RESOLVED]


def test_a_standby_never_judges_alerts(store: MemoryStore, clock: ManualClock) -> None:
    engine = leader(store, clock)
    engine.tick()
    for _ in range(2):
        ends(store, next_run(engine, store, clock), RunOutcome.FAILED)
    observer = RecordingObserver()
    standby = leader(store, clock, holder="standby", observer=observer)
    standby.tick()
    assert not standby.is_leader() and observer.of("alerts_changed") == []


def test_without_tracking_overrun_and_silent_are_never_raised(
        store: MemoryStore, clock: ManualClock) -> None:
    untracked = Settings(track_runs=False, alert_interval=1, max_runtime=5, alert_silent=60,
                         max_interval=5)
    engine = leader(store, clock, settings=untracked)
    engine.tick()
    key = next_run(engine, store, clock)
    store.record_runs([RunEvent.started(key, run="r", worker="celery@w", age=timedelta(0))])
    for _ in range(5):
        next_run(engine, store, clock)
    # The run a worker reported and then went silent is lost (evidence, tracking or not); it
    # ran past max_runtime and nothing succeeded for minutes, but neither is judged.
    assert {a.rule for a in store.list_alerts()} == {AlertRule.LOST}


def test_overrun_is_raised_while_a_run_runs_too_long_and_resolved_when_it_ends(
        store: MemoryStore, clock: ManualClock) -> None:
    settings = Settings(track_runs=True, run_resends=0, alert_interval=1, max_runtime=20,
                        heartbeat_interval=10, run_lost_after=600, max_interval=5)
    engine = leader(store, clock, settings=settings)
    engine.tick()
    key = next_run(engine, store, clock)
    store.record_runs([RunEvent.started(key, run="r", worker="celery@w", age=timedelta(0))])
    for _ in range(5):  # past max_runtime (20 s), a look a tick
        clock.advance(5)
        store.heartbeat([key])
        engine.tick()
    (alert,) = store.list_alerts(open_only=True)
    assert (alert.rule, alert.key) == (AlertRule.OVERRUN, key)

    store.record_runs([RunEvent.finished(key, run="r", worker="celery@w", age=timedelta(0),
                                         outcome=RunOutcome.SUCCEEDED)])
    clock.advance(5)
    engine.tick()
    assert [(a.rule, a.state) for a in store.list_alerts()] == [
        (AlertRule.OVERRUN, AlertState.RESOLVED)]


def test_one_look_reads_one_page_and_the_next_pages_follow_soon(
        store: MemoryStore, clock: ManualClock) -> None:
    # A silent window over every schedule: each is read, runs or not.
    settings = Settings(track_runs=True, alert_interval=10, alert_batch=2, max_interval=5,
                        alert_silent=3600)
    specs = tuple(ScheduleSpec(name=f"s{i}", task="t", trigger=EVERY_MINUTE) for i in range(5))
    pages: list[tuple[str | None, int]] = []
    evidence = store.alert_evidence

    def counted(*, after: str | None, limit: int, depth: int,  # type: ignore[no-untyped-def]
                scope=None):
        page = evidence(after=after, limit=limit, depth=depth, scope=scope)
        pages.append((after, len(page.schedules)))
        return page

    store.alert_evidence = counted  # type: ignore[method-assign]
    engine = leader(store, clock, settings=settings, specs=specs)
    engine.tick()
    for _ in range(3):
        clock.advance(0.5)
        engine.tick()
    assert pages == [(None, 2), ("s1", 2), ("s3", 1), (None, 2)][:len(pages)]
    assert len(pages) == 3  # after the last page, the next look waits alert_interval


def test_the_open_alert_of_a_deleted_schedule_is_resolved(store: MemoryStore,
                                                          clock: ManualClock) -> None:
    engine = leader(store, clock, specs=())
    Schedules(store).create("gone", "t.gone", every=60)
    engine.tick()
    for _ in range(3):
        clock.advance(60)
        engine.tick()
        (run,) = store.executions(schedule_name="gone", limit=1)
        ends(store, run.key, RunOutcome.FAILED)
    clock.advance(60)
    engine.tick()
    assert [a.state for a in store.list_alerts()] == [AlertState.OPEN]

    store.delete_schedule("gone")
    clock.advance(SETTINGS.alert_interval)
    engine.tick()

    assert [a.state for a in store.list_alerts()] == [AlertState.RESOLVED]


def test_missed_and_lost_take_the_schedules_count_or_the_settings() -> None:
    settings = Settings(alert_missed=2, alert_lost=False)
    assert (rules_of(SPEC, settings).missed, rules_of(SPEC, settings).lost) == (2, None)
    own = dataclasses.replace(SPEC, alert_missed=0, alert_lost=3)
    assert (rules_of(own, settings).missed, rules_of(own, settings).lost) == (None, 3)
    assert not rules_of(own, settings).on(AlertRule.MISSED)


def test_a_schedules_missed_and_lost_counts_are_0_to_20_each_problem_named() -> None:
    spec = dataclasses.replace(SPEC, alert_missed=-1, alert_lost=21)
    assert [p.split(": ", 1)[1] for p in map(str, spec.problems())] == [
        "alert_missed: must be an integer from 0 to 20, got -1",
        "alert_lost: must be an integer from 0 to 20, got 21"]
    assert dataclasses.replace(SPEC, alert_missed=0, alert_lost=20).problems() == []


def test_a_look_reads_only_what_can_have_changed_and_a_run_ended_since_it_was_in_flight(
        store: MemoryStore, clock: ManualClock) -> None:
    """Schedules that never ran are not read; a run in flight at one cycle is read again at
    the next although it ended, and was settled, before it: its failure opens the alert."""
    hourly = TriggerSpec(kind="interval", params={"every": 3600})
    idle = tuple(ScheduleSpec(name=f"idle{i}", task="t", trigger=hourly) for i in range(20))
    settings = dataclasses.replace(SETTINGS, alert_failures=1)
    read: list[list[str]] = []
    evidence = store.alert_evidence

    def counted(*, after: str | None, limit: int, depth: int,  # type: ignore[no-untyped-def]
                scope=None):
        page = evidence(after=after, limit=limit, depth=depth, scope=scope)
        read.append([schedule.name for schedule, _ in page.schedules])
        return page

    store.alert_evidence = counted  # type: ignore[method-assign]
    engine = leader(store, clock, settings=settings, specs=(SPEC, *idle))
    engine.tick()
    key = next_run(engine, store, clock)  # sent; judged in flight by the look after it
    assert read[-1] == ["minutely"]
    clock.advance(2)
    engine.tick()
    assert read[-1] == ["minutely"]  # still in flight: watched
    ends(store, key, RunOutcome.FAILED)
    clock.advance(2)
    engine.tick()  # settles the end, then looks
    (alert,) = store.list_alerts(open_only=True)
    assert (alert.rule, alert.key) == (AlertRule.FAILED, key)
    clock.advance(2)
    engine.tick()
    assert read[-1] == ["minutely"]  # its open alert keeps it in scope
    assert not any(name.startswith("idle") for page in read for name in page)
