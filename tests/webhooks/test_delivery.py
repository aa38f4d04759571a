"""Webhook delivery from the outbox to real receivers: down, refusing, back again, signed."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from goatbeat_celery.beat.webhooks import (
    BATCH,
    POLL_INTERVAL,
    DeliveryFailed,
    Webhook,
    WebhookDelivery,
    WebhookFormat,
    WebhookSettings,
    sign,
)
from goatbeat_celery.core.types.outbox import OutboxEvent
from goatbeat_celery.store import Store, open_store
from goatbeat_celery.store.memory import MemoryStore
from goatbeat_celery.testing import ManualClock
from tests.support.waiting import wait_for

from .receiver import Receiver

SECRET = "whsec-test-0123456789"
#: Short backoff: the retries of a down period of a second or two, not minutes.
FIRST, MOST = timedelta(seconds=0.2), timedelta(seconds=0.8)
TIMEOUT = timedelta(seconds=2)


def events(count: int, prefix: str = "alert") -> list[OutboxEvent]:
    return [OutboxEvent(event_id=f"{prefix}-{n}", kind="alert.opened",
                        payload={"schedule": f"report-{n}", "summary": f"report-{n} failed"})
            for n in range(count)]


def settings(*hooks: Webhook) -> WebhookSettings:
    return WebhookSettings(hooks=hooks, timeout=TIMEOUT, retry_backoff=FIRST,
                           retry_backoff_max=MOST)


def refusing_port() -> int:
    """A port a receiver was bound to, then closed: connections to it are refused (the
    receiver is down), and a receiver started on it later is back."""
    down = Receiver(secret=SECRET).start()
    port = down.port
    down.stop()
    return port


def all_delivered(store: Store, receiver: Receiver, count: int, timeout: float) -> None:
    """Wait until ``receiver`` has all ``count`` events and ``store`` marks them delivered,
    then a little longer: nothing more is sent once they are delivered."""
    wait_for(lambda: len(receiver.ids()) == count, timeout=timeout,
             what="every event at the receiver")
    wait_for(lambda: all(e.delivered for e in store.list_events()), timeout=10,
             what="every event marked delivered")
    time.sleep(2 * POLL_INTERVAL)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    store = open_store(f"sqlite:///{tmp_path / 'goatbeat.db'}")
    yield store
    store.close()


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    started: list[Receiver] = []
    yield started
    for receiver in started:
        receiver.stop()


def test_a_receiver_down_for_a_while_gets_every_event_afterwards_exactly_once(
        pg_store: Store, receivers: list[Receiver]) -> None:
    # Bind a port, then close it: the receiver is down (connections refused) at that address.
    port = refusing_port()
    hook = Webhook(url=f"http://127.0.0.1:{port}/hooks?token=s3cr3t-path", secret=SECRET)
    delivery = WebhookDelivery(pg_store, settings(hook), holder="host:1:a").start()
    try:
        count = BATCH + 5  # more than one batch
        pg_store.enqueue_events(events(count))
        # Down for long enough that every event fails a few times: at least three attempts at
        # the backoff's maximum.
        down_for = 3 * MOST.total_seconds() + POLL_INTERVAL
        wait_for(lambda: all(e.attempts >= 2 for e in pg_store.list_events()),
                 timeout=down_for + 10, what="every event to fail twice")
        time.sleep(down_for / 2)  # and stay down a little longer: more failed attempts
        assert not any(e.delivered for e in pg_store.list_events())

        up = Receiver(secret=SECRET, port=port).start()
        receivers.append(up)
        # Back: within the longest backoff, a poll and a request of each batch, on a busy
        # 2-core machine (a margin of 10 s).
        all_delivered(pg_store, up, count, timeout=MOST.total_seconds() + 10)
    finally:
        delivery.close()

    assert up.ids() == {f"alert-{n}": 1 for n in range(count)}
    assert up.all_verified()
    (first,) = [body for event_id, body, _ in up.accepted if event_id == "alert-0"]
    assert first["id"] == "alert-0" and first["kind"] == "alert.opened"
    assert first["data"] == {"schedule": "report-0", "summary": "report-0 failed"}
    assert first["attempt"] >= 3
    failed_before = [e for e in pg_store.list_events() if e.attempts >= 3]
    assert len(failed_before) == count


def test_a_receiver_down_for_30_seconds_gets_every_event_once_with_the_default_backoff() -> None:
    # The outage of the alerting docs' promise, at the settings a deployment gets by default
    # (first retry after 1 s, doubling, at most 5 minutes apart), on a clock the test moves:
    # the backoff is the store's arithmetic on its own clock, which the memory store shares.
    # (A real receiver coming back after real retries: the tests above.)
    clock = ManualClock()
    store = MemoryStore(clock)
    attempts: dict[str, list[float]] = {}
    down = True

    def send(url: str, body: bytes, headers: Any, timeout: float) -> None:
        seconds = (clock.current - clock.start).total_seconds()
        attempts.setdefault(headers["Goatbeat-Event-Id"], []).append(seconds)
        if down:
            raise DeliveryFailed("connection refused")

    hook = Webhook(url="http://hooks.example/goatbeat", secret=SECRET)
    delivery = WebhookDelivery(store, WebhookSettings(hooks=(hook,)), holder="host:1:a",
                               send=send)

    def every_second_until(seconds: int) -> None:
        """What the delivery thread does, polling every second, until ``seconds``."""
        while (clock.current - clock.start).total_seconds() < seconds:
            while delivery.deliver_due():
                pass
            clock.advance(1)

    count = BATCH + 3
    store.enqueue_events(events(count, prefix="outage"))
    try:
        every_second_until(30)
        assert not any(e.delivered for e in store.list_events())
        # Attempts at 0, 1, 3, 7 and 15 s; the next is due at 31 s.
        assert attempts == {f"outage-{n}": [0, 1, 3, 7, 15] for n in range(count)}
        down = False
        every_second_until(5 * 60)
    finally:
        delivery.close()

    assert all(e.delivered for e in store.list_events())
    # Each delivered at its first retry after the receiver came back, and never sent again.
    assert attempts == {f"outage-{n}": [0, 1, 3, 7, 15, 31] for n in range(count)}


def test_a_receiver_answering_503_is_retried_with_backoff_then_delivered_once(
        sqlite_store: Store, receivers: list[Receiver]) -> None:
    receiver = Receiver(secret=SECRET, mode="unavailable").start()
    receivers.append(receiver)
    hook = Webhook(url=receiver.url, secret=SECRET)
    delivery = WebhookDelivery(sqlite_store, settings(hook), holder="host:1:a").start()
    try:
        sqlite_store.enqueue_events(events(3))
        wait_for(lambda: receiver.refused >= 6, timeout=20, what="two refusals each")
        (entry, *_) = sqlite_store.list_events()
        assert entry.last_error is not None and "HTTP 503: down for maintenance" in \
            entry.last_error
        assert "s3cr3t-path" not in entry.last_error  # the URL's secret part is never kept
        receiver.mode = "ok"
        wait_for(lambda: len(receiver.ids()) == 3, timeout=MOST.total_seconds() + 10,
                 what="every event at the receiver")
        wait_for(lambda: all(e.delivered for e in sqlite_store.list_events()), timeout=10,
                 what="every event marked delivered")
        time.sleep(2 * POLL_INTERVAL)
    finally:
        delivery.close()
    assert receiver.ids() == {"alert-0": 1, "alert-1": 1, "alert-2": 1}
    assert receiver.all_verified()


def test_a_webhook_that_took_an_event_is_not_sent_it_again_while_another_is_retried(
        sqlite_store: Store, receivers: list[Receiver]) -> None:
    good = Receiver(secret=SECRET).start()
    bad = Receiver(secret="its-own-secret", mode="unavailable").start()
    receivers.extend([good, bad])
    hooks = (Webhook(url=good.url, secret=SECRET),
             Webhook(url=bad.url, secret="its-own-secret", format=WebhookFormat.SLACK))
    delivery = WebhookDelivery(sqlite_store, settings(*hooks), holder="host:1:a").start()
    try:
        sqlite_store.enqueue_events(events(2))
        wait_for(lambda: bad.refused >= 6, timeout=20, what="the failing hook retried")
        assert good.ids() == {"alert-0": 1, "alert-1": 1}
        assert all(e.delivered_to == (hooks[0].key,) for e in sqlite_store.list_events())
        bad.mode = "ok"
        wait_for(lambda: all(e.delivered for e in sqlite_store.list_events()), timeout=10,
                 what="every event marked delivered")
    finally:
        delivery.close()
    assert good.ids() == {"alert-0": 1, "alert-1": 1}
    assert bad.ids() == {"alert-0": 1, "alert-1": 1}
    assert bad.all_verified()  # signed with the hook's own secret
    # Slack's shape: one line of text, the payload's summary in it.
    assert sorted(body["text"] for _, body, _ in bad.accepted) == [
        "goatbeat alert.opened: report-0 failed", "goatbeat alert.opened: report-1 failed"]


def test_a_hanging_receiver_costs_the_timeout_and_the_event_is_retried(
        sqlite_store: Store, receivers: list[Receiver]) -> None:
    receiver = Receiver(secret=SECRET, mode="hang").start()
    receivers.append(receiver)
    hook = Webhook(url=receiver.url, secret=SECRET)
    short = WebhookSettings(hooks=(hook,), timeout=timedelta(seconds=0.5), retry_backoff=FIRST,
                            retry_backoff_max=MOST)
    delivery = WebhookDelivery(sqlite_store, short, holder="host:1:a")
    sqlite_store.enqueue_events(events(1))
    started = time.monotonic()
    assert delivery.deliver_due() == 1
    took = time.monotonic() - started
    delivery.close()  # its lane's thread
    # The request's timeout, and a margin of 2 s for a busy machine.
    assert 0.5 <= took < 0.5 + 2
    (entry,) = sqlite_store.list_events()
    assert (entry.delivered, entry.attempts, entry.claimed_by) == (False, 1, None)
    assert entry.last_error is not None and "timed out" in entry.last_error
    assert "s3cr3t-path" not in entry.last_error


def test_the_envelope_and_headers_a_generic_receiver_gets(sqlite_store: Store) -> None:
    sent: list[tuple[str, bytes, dict[str, str]]] = []

    def send(url: str, body: bytes, headers: Any, timeout: float) -> None:
        sent.append((url, body, dict(headers)))

    hook = Webhook(url="https://hooks.example/goatbeat", secret=SECRET)
    delivery = WebhookDelivery(sqlite_store, settings(hook), holder="host:1:a", send=send,
                               clock=lambda: 1_900_000_000.0)
    sqlite_store.enqueue_events(events(1))
    delivery.deliver_due()
    delivery.close()

    ((url, body, headers),) = sent
    assert url == "https://hooks.example/goatbeat"
    assert headers["Goatbeat-Event-Id"] == "alert-0"
    assert headers["Goatbeat-Event-Kind"] == "alert.opened"
    assert headers["Goatbeat-Timestamp"] == "1900000000"
    assert headers["Content-Type"] == "application/json"
    assert headers["Goatbeat-Signature"].startswith("v1=")
    document = json.loads(body)
    assert list(document) == ["id", "kind", "created_at", "attempt", "data"]
    assert document["created_at"].endswith("Z") and document["attempt"] == 1
    # The id a receiver deduplicates on is the body's, under the signature; the header repeats
    # it. Another id in the body would not verify.
    assert document["id"] == headers["Goatbeat-Event-Id"]
    assert headers["Goatbeat-Signature"] == sign(SECRET, "1900000000", body)
    forged = body.replace(b'"id":"alert-0"', b'"id":"alert-9"')
    assert forged != body and sign(SECRET, "1900000000", forged) != headers["Goatbeat-Signature"]


def test_each_attempt_is_counted_by_outcome_in_the_metrics(
        sqlite_store: Store, receivers: list[Receiver]) -> None:
    from goatbeat_celery.beat.metrics import GoatbeatMetrics

    metrics = GoatbeatMetrics(lease_ttl=timedelta(seconds=30))
    receiver = Receiver(secret=SECRET, mode="unavailable").start()
    receivers.append(receiver)
    delivery = WebhookDelivery(sqlite_store, settings(Webhook(url=receiver.url, secret=SECRET)),
                               holder="host:1:a", report=metrics.webhook_attempted)
    sqlite_store.enqueue_events(events(2))
    assert delivery.deliver_due() == 2
    receiver.mode = "ok"
    # Nothing is due until each event's first backoff has passed; then it is delivered.

    def delivered() -> bool:
        delivery.deliver_due()
        return all(e.delivered for e in sqlite_store.list_events())

    wait_for(delivered, timeout=FIRST.total_seconds() + 10, what="the retries delivered")
    delivery.close()

    def count(outcome: str) -> float | None:
        return metrics.registry.get_sample_value("goatbeat_webhook_deliveries_total",
                                                 {"outcome": outcome})

    assert (count("failed"), count("delivered")) == (2, 2)
    assert receiver.ids() == {"alert-0": 1, "alert-1": 1}
