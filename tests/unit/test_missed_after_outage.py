"""An outage across a schedule's occurrence: by default its most recent missed occurrence runs
once on restart, however late (Celery's beat does the same); with a grace opted into, what is
given up is recorded at once and the ``missed`` alert raised then, not at the next run.
Memory store, manual clock."""

from __future__ import annotations

from datetime import timedelta

from goatbeat_celery.core.loop.engine import Engine
from goatbeat_celery.core.rules.alerts import AlertRule
from goatbeat_celery.core.types.execution import ExecutionState, idempotency_key
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import MisfirePolicy, ScheduleSpec, TriggerSpec
from goatbeat_celery.testing import ManualClock, MemoryStore, build_engine

EVERY_2M = TriggerSpec(kind="interval", params={"every": 120})
SPARSE = ScheduleSpec(name="sparse", task="t.sparse", trigger=EVERY_2M)
SETTINGS = Settings(alert_interval=1, max_interval=5)


def leader(store: MemoryStore, clock: ManualClock, spec: ScheduleSpec = SPARSE,
           settings: Settings = SETTINGS, holder: str = "first") -> Engine:
    return build_engine(store, clock=clock, settings=settings, holder=holder, alerts=store,
                        config_schedules=(spec,))


def down_across_an_occurrence(store: MemoryStore, clock: ManualClock,
                              spec: ScheduleSpec = SPARSE,
                              settings: Settings = SETTINGS) -> tuple[Engine, str]:
    """Beat stops 8 s before an occurrence and is back 80 s after it: the restarted leader,
    having ticked once, and the key of the occurrence it missed."""
    first = leader(store, clock, spec, settings)
    first.tick()
    due = store.get_schedule(spec.name).next_run_at
    assert due is not None
    clock.move_to(due - timedelta(seconds=8))
    first.tick()
    first.close()
    clock.move_to(due + timedelta(seconds=80))
    again = leader(store, clock, spec, settings, holder="second")
    again.tick()
    return again, idempotency_key(spec.name, due)


def test_by_default_the_occurrence_missed_during_an_outage_runs_on_restart(
        store: MemoryStore, clock: ManualClock) -> None:
    engine, key = down_across_an_occurrence(store, clock)

    (run,) = store.executions(schedule_name="sparse")
    assert (run.key, run.state, run.missed) == (key, ExecutionState.SUBMITTED, 0)
    assert [sent for sent, _ in engine.submitter.sent] == [key]  # type: ignore[attr-defined]
    assert store.list_alerts() == []


def test_a_week_and_more_down_still_runs_the_most_recent_occurrence_once(
        store: MemoryStore, clock: ManualClock) -> None:
    first = leader(store, clock)
    first.tick()
    first.close()
    clock.advance(timedelta(days=9, seconds=30))
    leader(store, clock, holder="second").tick()

    (run,) = store.executions(schedule_name="sparse")
    assert run.state is ExecutionState.SUBMITTED
    assert run.occurrence_at == clock.current - timedelta(seconds=30)
    assert run.missed == 9 * 24 * 30 - 1  # every 2 minutes for 9 days, less the one that ran


def test_with_a_grace_the_given_up_occurrence_is_recorded_and_alerted_at_once(
        store: MemoryStore, clock: ManualClock) -> None:
    spec = ScheduleSpec(name="sparse", task="t.sparse", trigger=EVERY_2M,
                        misfire_grace=timedelta(seconds=60))
    engine, key = down_across_an_occurrence(store, clock, spec)

    (row,) = store.executions(schedule_name="sparse")
    assert (row.key, row.state, row.missed, row.given_up) == (
        key, ExecutionState.SKIPPED, 1, True)
    assert row.last_error is not None and "grace 60s" in row.last_error
    assert engine.submitter.sent == []  # type: ignore[attr-defined]
    assert store.get_schedule("sparse").total_missed == 1

    clock.advance(2)  # the next alert look, long before the next occurrence
    engine.tick()
    (alert,) = store.list_alerts(open_only=True)
    assert (alert.rule, alert.key) == (AlertRule.MISSED, key)
    assert "was not sent" in alert.reason and "grace 60s" in alert.reason

    # The next occurrence runs on time and resolves it.
    due = store.get_schedule("sparse").next_run_at
    assert due is not None
    clock.move_to(due)
    engine.tick()
    clock.advance(2)
    engine.tick()
    assert store.list_alerts(open_only=True) == []


def test_a_grace_set_for_every_schedule_gives_up_the_same_way(
        store: MemoryStore, clock: ManualClock) -> None:
    settings = Settings(alert_interval=1, max_interval=5, misfire_grace=60)
    engine, key = down_across_an_occurrence(store, clock, settings=settings)

    (row,) = store.executions(schedule_name="sparse")
    assert (row.key, row.given_up) == (key, True)


def test_the_skip_policy_records_what_it_gives_up_after_a_backlog(
        store: MemoryStore, clock: ManualClock) -> None:
    spec = ScheduleSpec(name="sparse", task="t.sparse", trigger=EVERY_2M,
                        misfire_policy=MisfirePolicy.SKIP)
    first = leader(store, clock, spec)
    first.tick()
    first.close()
    clock.advance(timedelta(minutes=7))
    engine = leader(store, clock, spec, holder="second")
    engine.tick()

    (row,) = store.executions(schedule_name="sparse")
    assert (row.state, row.missed, row.given_up) == (ExecutionState.SKIPPED, 3, True)
    assert row.occurrence_at == clock.start + timedelta(minutes=6)
    assert row.last_error is not None and "policy skip" in row.last_error
    clock.advance(2)
    engine.tick()
    (alert,) = store.list_alerts(open_only=True)
    assert "3 occurrences in a row did not run" in alert.reason
