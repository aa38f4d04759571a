"""Each webhook delivers on a lane of its own: a receiver that does not answer holds up only its
own events, a full lane turns events away (to be tried again) rather than holding them, and a
request that ran out of time is not followed by one more per waiting event.

Synchronisation is by events the tests' own senders wait on, never by sleeping; the store's
clock is a manual one, so retries are due only when a test moves it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from goatbeat_celery.beat.webhook_lanes import DEPTH, Failed, Lane
from goatbeat_celery.beat.webhooks import (
    BATCH,
    DeliveryFailed,
    Webhook,
    WebhookDelivery,
    WebhookSettings,
)
from goatbeat_celery.core.types.outbox import OutboxEntry, OutboxEvent, OutboxRetry
from goatbeat_celery.store.memory import MemoryStore
from goatbeat_celery.testing import ManualClock
from tests.support.waiting import wait_for

SECRET = "whsec-lanes-0123456789"
FAST = Webhook(url="http://fast.example/hook", secret=SECRET)
SLOW = Webhook(url="http://slow.example/hook?token=s3cr3t-path", secret=SECRET)
FIRST, MOST = timedelta(seconds=1), timedelta(seconds=4)
#: How long a test waits for what its threads do at once (a busy 2-core machine's margin).
PATIENCE = 10


def entry(n: int) -> OutboxEntry:
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    return OutboxEntry(event_id=f"e-{n}", kind="alert.opened", payload={}, created_at=now,
                       attempts=0, next_attempt_at=now, delivered_at=None, delivered_to=(),
                       last_error=None, claimed_by=None, claimed_until=None)


class Answers:
    """What a lane answered, in order, with a way to wait for a count of them."""

    def __init__(self) -> None:
        self.got: list[tuple[str, str | None]] = []
        self._changed = threading.Condition()

    def __call__(self, entry: OutboxEntry, key: str, error: str | None) -> None:
        with self._changed:
            self.got.append((entry.event_id, error))
            self._changed.notify_all()

    def wait(self, count: int) -> list[tuple[str, str | None]]:
        with self._changed:
            assert self._changed.wait_for(lambda: len(self.got) >= count, PATIENCE), self.got
            return list(self.got)


class Gate:
    """An attempt that blocks until let through, then answers with ``outcome``."""

    def __init__(self, outcome: Failed | None) -> None:
        self.outcome = outcome
        self.calls: list[str] = []
        self.entered = threading.Event()
        self.through = threading.Event()

    def __call__(self, entry: OutboxEntry) -> Failed | None:
        self.calls.append(entry.event_id)
        self.entered.set()
        assert self.through.wait(PATIENCE)
        return self.outcome


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def lane_with(gate: Gate, answers: Answers, stop: threading.Event) -> Lane:
    return Lane("hook-x", "test-lane", gate, answers, stop)


def test_after_a_request_that_timed_out_the_waiting_events_are_not_tried(
        stop: threading.Event) -> None:
    gate, answers = Gate(Failed("timed out: no whole answer within 1s", timed_out=True)), Answers()
    lane = lane_with(gate, answers, stop)
    lane.hand(entry(0))
    assert gate.entered.wait(PATIENCE)
    for n in range(1, 5):
        lane.hand(entry(n))
    gate.through.set()

    got = answers.wait(5)
    assert got[0] == ("e-0", "timed out: no whole answer within 1s")
    assert got[1:] == [(f"e-{n}", "not tried: the request before it timed out")
                       for n in range(1, 5)]
    assert gate.calls == ["e-0"]  # one timeout for the round, not one per event
    lane.hand(entry(5))  # handed after the round: tried
    assert answers.wait(6)[5] == ("e-5", "timed out: no whole answer within 1s")
    assert gate.calls == ["e-0", "e-5"]
    lane.close(PATIENCE)


def test_a_refusal_does_not_stop_the_events_waiting_behind_it(stop: threading.Event) -> None:
    gate, answers = Gate(Failed("HTTP 503: down")), Answers()
    lane = lane_with(gate, answers, stop)
    lane.hand(entry(0))
    assert gate.entered.wait(PATIENCE)
    lane.hand(entry(1))
    gate.through.set()
    assert answers.wait(2) == [("e-0", "HTTP 503: down"), ("e-1", "HTTP 503: down")]
    assert gate.calls == ["e-0", "e-1"]  # a quick answer costs nothing: each is tried
    lane.close(PATIENCE)


def test_a_full_lane_answers_at_once_and_takes_events_again_once_it_has_room(
        stop: threading.Event) -> None:
    gate, answers = Gate(None), Answers()
    lane = lane_with(gate, answers, stop)
    for n in range(DEPTH):
        lane.hand(entry(n))
    assert gate.entered.wait(PATIENCE) and lane.room() == 0
    lane.hand(entry(DEPTH))  # the one under way counts: the lane is full

    assert answers.wait(1) == [(f"e-{DEPTH}", f"not tried: {DEPTH} events are waiting for "
                                "this receiver already")]
    gate.through.set()
    got = answers.wait(DEPTH + 1)
    assert got[1:] == [(f"e-{n}", None) for n in range(DEPTH)]
    wait_for(lambda: lane.room() == DEPTH, timeout=PATIENCE, what="the lane emptied")
    lane.close(PATIENCE)


def test_a_lane_whose_last_request_failed_holds_no_one_back_until_one_succeeds(
        stop: threading.Event) -> None:
    gate, answers = Gate(Failed("timed out: no whole answer within 1s", timed_out=True)), \
        Answers()
    gate.through.set()
    lane = lane_with(gate, answers, stop)
    assert lane.holds_back()  # a lane never tried is presumed well
    lane.hand(entry(0))
    answers.wait(1)
    assert not lane.holds_back()
    gate.outcome = None
    lane.hand(entry(1))
    answers.wait(2)
    assert lane.holds_back()
    lane.close(PATIENCE)


def test_an_unexpected_error_in_an_attempt_is_an_answer_not_a_lost_event(
        stop: threading.Event, caplog: pytest.LogCaptureFixture) -> None:
    def broken(entry: OutboxEntry) -> Failed | None:
        raise RuntimeError("a bug")

    answers = Answers()
    lane = Lane("hook-x", "test-lane", broken, answers, stop)
    lane.hand(entry(0))
    lane.hand(entry(1))
    assert answers.wait(2) == [("e-0", "unexpected error (in beat's log)"),
                               ("e-1", "unexpected error (in beat's log)")]
    assert "a bug" in caplog.text
    lane.close(PATIENCE)


# -- the delivery as a whole ---------------------------------------------------------------
class Receivers:
    """A sender for two webhooks: the fast one takes every event at once, the slow one holds
    every request until :attr:`release` is set."""

    def __init__(self) -> None:
        self.got: dict[str, Counter[str]] = {FAST.url: Counter(), SLOW.url: Counter()}
        self.release = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, url: str, body: bytes, headers: Mapping[str, str],
                 timeout: float) -> None:
        if url == SLOW.url and not self.release.wait(PATIENCE * 3):
            raise DeliveryFailed("timed out", timed_out=True)
        with self._lock:
            self.got[url][headers["Goatbeat-Event-Id"]] += 1

    def of(self, hook: Webhook) -> Counter[str]:
        with self._lock:
            return Counter(self.got[hook.url])


def events(count: int) -> list[OutboxEvent]:
    return [OutboxEvent(event_id=f"e-{n}", kind="alert.opened", payload={"n": n})
            for n in range(count)]


def test_a_receiver_that_does_not_answer_delays_only_its_own_events() -> None:
    clock = ManualClock()
    store = MemoryStore(clock)
    receivers = Receivers()
    settings = WebhookSettings(hooks=(FAST, SLOW), retry_backoff=FIRST, retry_backoff_max=MOST)
    delivery = WebhookDelivery(store, settings, holder="host:1:a", send=receivers).start()
    count = 3 * BATCH
    everyone = {f"e-{n}": 1 for n in range(count)}
    try:
        store.enqueue_events(events(count))
        # The slow receiver holds its first request: the fast one gets every event meanwhile.
        wait_for(lambda: receivers.of(FAST) == everyone, timeout=PATIENCE,
                 what="every event at the fast receiver")
        assert receivers.of(SLOW) == {}

        # What the slow lane had no room for is recorded for the fast one and tried again
        # later; the slow lane's own events stay claimed, waiting for it.
        def turned_away() -> list[OutboxEntry]:
            return [e for e in store.list_events() if e.attempts == 1]

        away = wait_for(lambda: len(turned_away()) == count - DEPTH and turned_away(),
                        timeout=PATIENCE, what="the events the slow lane turned away")
        for event in away:
            assert event.delivered_to == (FAST.key,) and not event.delivered
            assert event.last_error == (f"http://slow.example/…: not tried: {DEPTH} events "
                                        "are waiting for this receiver already")
            assert event.next_attempt_at == clock.current + FIRST

        receivers.release.set()
        wait_for(lambda: sum(e.delivered for e in store.list_events()) == DEPTH,
                 timeout=PATIENCE, what="the slow lane's events delivered")
        clock.advance(FIRST)  # the others' retry is due
        wait_for(lambda: all(e.delivered for e in store.list_events()), timeout=PATIENCE,
                 what="every event delivered")
    finally:
        delivery.close()
    assert receivers.of(FAST) == everyone  # never sent again while the slow one was retried
    assert receivers.of(SLOW) == everyone


def test_the_claim_covers_a_full_lane_of_requests_all_timing_out() -> None:
    settings = WebhookSettings(hooks=(FAST, SLOW), timeout=timedelta(seconds=5))
    delivery = WebhookDelivery(MemoryStore(), settings, holder="host:1:a")
    # An event waits behind at most DEPTH - 1 others in its lane, whatever the webhook count.
    assert delivery.claim == timedelta(seconds=5) * DEPTH + timedelta(seconds=30)


def sender_recording(into: list[str]) -> Callable[..., None]:
    def send(url: str, body: bytes, headers: Any, timeout: float) -> None:
        into.append(headers["Goatbeat-Event-Id"])
    return send


def test_an_event_every_webhook_took_already_is_marked_delivered_without_a_request() -> None:
    store = MemoryStore(ManualClock())
    store.enqueue_events(events(1))
    # Taken, and left with every webhook having taken it (as after a crash between the two).
    store.take_events(holder="host:1:a", limit=1, hold_for=timedelta(seconds=5))
    store.retry_events([OutboxRetry(event_id="e-0", delay=timedelta(0), error="x",
                                    delivered_to=(FAST.key,))], holder="host:1:a")
    sent: list[str] = []
    delivery = WebhookDelivery(store, WebhookSettings(hooks=(FAST,)), holder="host:1:a",
                               send=sender_recording(sent))
    assert delivery.deliver_due() == 1
    assert sent == [] and store.list_events()[0].delivered
    delivery.close()
