"""goatbeat_occurrence_hook: every submission attempt, as an OccurrenceRecord."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta

import pytest

from goatbeat_celery.beat.observability import CeleryObserver, MultiObserver
from goatbeat_celery.core.loop.observer import OccurrenceRecord
from goatbeat_celery.core.types.claims import Dispatch
from goatbeat_celery.core.types.execution import Execution, ExecutionState, idempotency_key
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.spec import MisfirePolicy

from .support import BROKER_DOWN, START, ManualClock, RecordingObserver, Replicas, create_due

SENDER = object()


def test_the_hook_gets_due_claimed_and_submitted_instants_and_the_lateness(
        replicas: Replicas, clock: ManualClock) -> None:
    records: list[OccurrenceRecord] = []
    clock.advance(2.5)
    replicas.broker.latency = 0.5
    create_due(replicas.store, "report", START, offset=timedelta(seconds=1))
    engine = replicas.engine(CeleryObserver(sender=SENDER, hook=records.append))

    engine.tick()

    # Due one second after the grid point (the offset), claimed at 12:00:02.5, accepted half
    # a second later.
    [record] = records
    assert record.key == idempotency_key("report", START)
    assert record.schedule_name == "report"
    assert record.occurrence_at == START
    assert record.due_at == START + timedelta(seconds=1)
    assert record.claimed_at == START + timedelta(seconds=2.5)
    assert record.submitted_at == START + timedelta(seconds=3)
    assert record.lateness == timedelta(seconds=2)
    assert (record.missed, record.token, record.attempt, record.error) == (0, 1, 1, None)


def test_the_hook_sees_the_missed_count_on_the_occurrence_that_runs(
        replicas: Replicas, clock: ManualClock) -> None:
    records: list[OccurrenceRecord] = []
    clock.advance(5 * 60 + 1)
    create_due(replicas.store, "report", START, misfire_policy=MisfirePolicy.LATEST,
               misfire_grace=timedelta(seconds=30))
    engine = replicas.engine(CeleryObserver(sender=SENDER, hook=records.append))

    engine.tick()

    [record] = records
    assert record.occurrence_at == START + timedelta(minutes=5)
    assert record.missed == 5
    assert record.lateness == timedelta(seconds=1)


def test_the_hook_gets_the_failed_attempt_then_the_retry_as_attempt_two(
        replicas: Replicas, clock: ManualClock) -> None:
    records: list[OccurrenceRecord] = []
    create_due(replicas.store, "report", START)
    engine = replicas.engine(CeleryObserver(sender=SENDER, hook=records.append))
    replicas.broker.down = True
    engine.tick()
    replicas.broker.down = False
    clock.advance(1)  # the retry backoff

    engine.tick()

    failed, retried = records
    assert (failed.attempt, failed.error, failed.submitted_at, failed.lateness) == (
        1, BROKER_DOWN, None, None)
    assert (retried.attempt, retried.error) == (2, None)
    assert retried.key == failed.key
    # Lateness counts from the due instant, across the failed attempt.
    assert retried.lateness == timedelta(seconds=1)


def test_a_raising_hook_is_logged_and_does_not_break_the_tick(
        replicas: Replicas, caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []

    def broken(record: OccurrenceRecord) -> None:
        calls.append(record.key)
        raise ValueError("hook bug")

    for name in ("first", "second"):
        create_due(replicas.store, name, START)
    engine = replicas.engine(CeleryObserver(sender=SENDER, hook=broken))

    with caplog.at_level(logging.ERROR, logger="goatbeat_celery.beat.observability"):
        engine.tick()

    assert len(calls) == 2, "one failure must not stop the hook for the next record"
    assert {e.state for e in replicas.store.executions()} == {ExecutionState.SUBMITTED}
    failures = [r for r in caplog.records if getattr(r, "action", None) == "hook_failed"]
    assert len(failures) == 2
    assert all(r.exc_info is not None for r in failures)


class Exploding:
    """An observer whose every method raises."""

    def lease_acquired(self, grant: LeaseGrant) -> None:
        raise RuntimeError("observer bug")

    def lease_lost(self, name: str, holder: str, reason: str) -> None:
        raise RuntimeError("observer bug")

    def claimed(self, dispatches: Sequence[Dispatch]) -> None:
        raise RuntimeError("observer bug")

    def missed(self, schedule_name: str, count: int) -> None:
        raise RuntimeError("observer bug")

    def submitted(self, records: Sequence[OccurrenceRecord]) -> None:
        raise RuntimeError("observer bug")

    def set_aside(self, schedule_name: str, reason: str) -> None:
        raise RuntimeError("observer bug")

    def skipped(self, executions: Sequence[Execution]) -> None:
        raise RuntimeError("observer bug")

    def paused(self, schedule_name: str, reason: str) -> None:
        raise RuntimeError("observer bug")


def test_an_observer_that_raises_does_not_stop_the_others_or_the_tick(
        replicas: Replicas, caplog: pytest.LogCaptureFixture) -> None:
    create_due(replicas.store, "report", START)
    recording = RecordingObserver()
    engine = replicas.engine(MultiObserver([Exploding(), recording]))

    with caplog.at_level(logging.ERROR, logger="goatbeat_celery.beat.observability"):
        engine.tick()
        engine.close()

    assert [name for name, _ in recording.events] == [
        "lease_acquired", "claimed", "submitted", "lease_lost"]
    assert replicas.broker.sent == [(idempotency_key("report", START), 1)]
    assert sum(getattr(r, "action", None) == "observer_failed" for r in caplog.records) == 4
