"""goatbeat_celery.signals, sent by a CeleryObserver driven by a real Engine."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from goatbeat_celery import signals
from goatbeat_celery.beat.observability import CeleryObserver
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome
from goatbeat_celery.core.types.execution import ExecutionState, idempotency_key
from goatbeat_celery.core.types.spec import MisfirePolicy

from .support import BROKER_DOWN, START, ManualClock, Replicas, create_due

ALL = tuple(getattr(signals, name) for name in signals.__all__)


@dataclass(frozen=True)
class Sent:
    name: str
    sender: object
    kwargs: dict[str, Any]


@pytest.fixture
def sent() -> Iterator[list[Sent]]:
    """Every goatbeat signal sent during the test, in order."""
    seen: list[Sent] = []

    def receiver(signal: Any, sender: object, **kwargs: Any) -> None:
        seen.append(Sent(signal.name.removeprefix("goatbeat_"), sender, kwargs))

    for signal in ALL:
        signal.connect(receiver, weak=False)
    yield seen
    for signal in ALL:
        signal.disconnect(receiver)


def named(sent: list[Sent], name: str) -> list[Sent]:
    return [s for s in sent if s.name == name]


SENDER = object()


def test_taking_the_lease_sends_lease_acquired_with_the_new_token(
        replicas: Replicas, sent: list[Sent]) -> None:
    engine = replicas.engine(CeleryObserver(sender=SENDER))

    engine.tick()

    [acquired] = named(sent, "lease_acquired")
    assert acquired.sender is SENDER
    assert acquired.kwargs == {"lease": "default", "holder": "a", "token": 1,
                               "expires_at": START + timedelta(seconds=30)}


def test_a_takeover_sends_lease_lost_to_the_old_leader_and_lease_acquired_to_the_new(
        replicas: Replicas, clock: ManualClock, sent: list[Sent]) -> None:
    old_sender, new_sender = object(), object()
    old = replicas.engine(CeleryObserver(sender=old_sender), holder="a")
    new = replicas.engine(CeleryObserver(sender=new_sender), holder="b")
    old.tick()
    clock.advance(31)  # the old leader froze past its ttl

    new.tick()
    old.tick()

    assert [(s.name, s.sender) for s in sent] == [
        ("lease_acquired", old_sender), ("lease_acquired", new_sender), ("lease_lost", old_sender)]
    assert sent[1].kwargs["token"] == 2
    assert sent[2].kwargs == {"lease": "default", "holder": "a",
                              "reason": "taken by another replica"}


def test_closing_sends_lease_lost_with_reason_released(
        replicas: Replicas, sent: list[Sent]) -> None:
    engine = replicas.engine(CeleryObserver(sender=SENDER))
    engine.tick()

    engine.close()

    [lost] = named(sent, "lease_lost")
    assert lost.kwargs == {"lease": "default", "holder": "a", "reason": "released"}


def test_a_due_occurrence_is_claimed_then_submitted_under_its_key(
        replicas: Replicas, clock: ManualClock, sent: list[Sent]) -> None:
    clock.advance(2)
    create_due(replicas.store, "report", START)
    engine = replicas.engine(CeleryObserver(sender=SENDER))

    engine.tick()

    key = idempotency_key("report", START)
    assert [s.name for s in sent] == ["lease_acquired", "occurrence_claimed",
                                      "occurrence_submitted"]
    claimed, submitted = sent[1], sent[2]
    assert claimed.kwargs == {
        "key": key, "schedule_name": "report", "task": "proj.tasks.report",
        "occurrence_at": START, "due_at": START, "claimed_at": START + timedelta(seconds=2),
        "token": 1, "missed": 0,
    }
    assert submitted.kwargs["key"] == key
    assert submitted.kwargs["schedule_name"] == "report"
    record = submitted.kwargs["record"]
    assert (record.key, record.attempt, record.error) == (key, 1, None)


def test_missed_grid_points_send_occurrence_missed_with_the_count(
        replicas: Replicas, clock: ManualClock, sent: list[Sent]) -> None:
    # Six points are due (12:00 … 12:05), five past a 30 s grace: "latest" runs one.
    clock.advance(5 * 60 + 1)
    create_due(replicas.store, "report", START, misfire_policy=MisfirePolicy.LATEST,
               misfire_grace=timedelta(seconds=30))
    engine = replicas.engine(CeleryObserver(sender=SENDER))

    engine.tick()

    [missed] = named(sent, "occurrence_missed")
    assert missed.kwargs == {"schedule_name": "report", "count": 5}
    [claimed] = named(sent, "occurrence_claimed")
    assert claimed.kwargs["occurrence_at"] == START + timedelta(minutes=5)
    assert claimed.kwargs["missed"] == 5


def test_a_broker_refusal_sends_submit_failed_and_the_retry_sends_submitted(
        replicas: Replicas, clock: ManualClock, sent: list[Sent]) -> None:
    create_due(replicas.store, "report", START)
    engine = replicas.engine(CeleryObserver(sender=SENDER))
    replicas.broker.down = True

    engine.tick()
    replicas.broker.down = False
    clock.advance(1)  # the retry backoff
    engine.tick()

    key = idempotency_key("report", START)
    [failed] = named(sent, "occurrence_submit_failed")
    assert failed.kwargs["key"] == key
    assert failed.kwargs["error"] == BROKER_DOWN
    assert failed.kwargs["record"].attempt == 1
    assert failed.kwargs["record"].submitted_at is None
    [submitted] = named(sent, "occurrence_submitted")
    assert submitted.kwargs["key"] == key
    assert submitted.kwargs["record"].attempt == 2
    # A resubmission is not a new claim.
    assert len(named(sent, "occurrence_claimed")) == 1


def test_receivers_connected_to_one_sender_hear_only_that_scheduler(
        replicas: Replicas, clock: ManualClock) -> None:
    mine, other = object(), object()
    heard: list[object] = []

    def receiver(sender: object, **kwargs: Any) -> None:
        heard.append(sender)

    signals.lease_acquired.connect(receiver, sender=mine, weak=False)
    try:
        first = replicas.engine(CeleryObserver(sender=other), holder="a")
        first.tick()
        first.close()
        replicas.engine(CeleryObserver(sender=mine), holder="b").tick()
    finally:
        signals.lease_acquired.disconnect(receiver, sender=mine)
    assert heard == [mine]


def test_a_raising_receiver_is_logged_and_does_not_break_the_tick(
        replicas: Replicas, sent: list[Sent], caplog: pytest.LogCaptureFixture) -> None:
    create_due(replicas.store, "report", START)
    engine = replicas.engine(CeleryObserver(sender=SENDER))

    def explode(**kwargs: Any) -> None:
        raise RuntimeError("receiver bug")

    for signal in ALL:
        signal.connect(explode, weak=False)
    try:
        with caplog.at_level(logging.ERROR):
            engine.tick()
    finally:
        for signal in ALL:
            signal.disconnect(explode)

    [execution] = replicas.store.executions(schedule_name="report")
    assert execution.state is ExecutionState.SUBMITTED
    assert [s.name for s in sent] == ["lease_acquired", "occurrence_claimed",
                                      "occurrence_submitted"]
    assert sum("receiver bug" in r.getMessage() for r in caplog.records) == 3


def test_a_schedule_set_aside_sends_schedule_set_aside_with_the_reason(
        replicas: Replicas, clock: ManualClock, sent: list[Sent]) -> None:
    create_due(replicas.store, "rogue", START, options={"queue": 5})
    engine = replicas.engine(CeleryObserver(sender=SENDER))

    engine.tick()

    [aside] = named(sent, "schedule_set_aside")
    assert aside.kwargs["schedule_name"] == "rogue"
    assert "options.queue" in aside.kwargs["reason"]


def test_a_run_that_ended_sends_run_ended_once_with_its_outcome_and_calls_the_hook(
        replicas: Replicas, clock: ManualClock, sent: list[Sent]) -> None:
    records: list[Any] = []
    engine = replicas.engine(CeleryObserver(sender=SENDER, hook=records.append))
    create_due(replicas.store, "report", START)
    engine.tick()
    key = idempotency_key("report", START)
    replicas.store.record_runs([
        RunEvent.started(key, run="r", worker="celery@w1", age=timedelta(seconds=2)),
        RunEvent.finished(key, run="r", worker="celery@w1", age=timedelta(0),
                          outcome=RunOutcome.FAILED, error="KeyError: 'x'",
                          runtime=timedelta(seconds=2))])
    clock.advance(1)
    engine.tick()
    clock.advance(1)
    engine.tick()

    [ended] = named(sent, "run_ended")
    assert ended.sender is SENDER
    assert (ended.kwargs["key"], ended.kwargs["schedule_name"], ended.kwargs["outcome"]) == (
        key, "report", "failed")
    record = ended.kwargs["record"]
    assert (record.outcome, record.worker, record.run_error) == (
        "failed", "celery@w1", "KeyError: 'x'")
    assert record.runtime == timedelta(seconds=2)
    assert [r.outcome for r in records] == [None, "failed"]  # the submission, then the end
