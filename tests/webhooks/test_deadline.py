"""``goatbeat_webhook_timeout`` bounds a request as a whole, not each read: a receiver that
trickles its answer a byte at a time cannot hold a request past it.

The first test runs on a manual clock, which moves only when the receiver has sent a byte: no
sleeping, and the receiver's pace is as slow as the clock says. The second is the one short
real-time scenario: a real receiver trickling a byte every 0.25 s on loopback, beside a healthy
one, with a 1 s timeout.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from goatbeat_celery.beat.webhooks import (
    BATCH,
    DeliveryFailed,
    Webhook,
    WebhookDelivery,
    WebhookSettings,
    post,
)
from goatbeat_celery.core.types.outbox import OutboxEvent
from goatbeat_celery.store.memory import MemoryStore
from tests.support.waiting import wait_for

from .receiver import Receiver

SECRET = "whsec-deadline-0123456789"
#: An answer long enough that trickling it takes far longer than any timeout here.
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Padding: " + b"x" * 200 + b"\r\n\r\n"


@dataclass
class Trickler:
    """A receiver on loopback that reads each request, then sends its answer one byte each
    time :meth:`pace` lets it (or every ``every`` seconds), until the client hangs up."""

    every: float | None = None
    #: Bytes of the answer sent, over every connection.
    sent: int = 0
    #: How long each connection lasted, from accept to the client hanging up (seconds).
    lasted: list[float] = field(default_factory=list)
    _next: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    _stop: threading.Event = field(default_factory=threading.Event)
    _server: socket.socket | None = None

    def start(self) -> Trickler:
        server = socket.create_server(("127.0.0.1", 0))
        self._server = server
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.getsockname()[1]}/hook?token=s3cr3t-path"

    def pace(self) -> None:
        """Let one more byte go."""
        self._next.release()

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.close()

    def _accept(self) -> None:
        assert self._server is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        started = time.monotonic()
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                request += chunk
            try:
                for index in range(len(ANSWER)):
                    if self.every is None:
                        self._next.acquire()
                    elif self._stop.wait(self.every):
                        return
                    conn.sendall(ANSWER[index:index + 1])
                    self.sent += 1
                # The whole answer went out: the client should have hung up long before.
                conn.recv(1)
            except OSError:
                pass  # the client hung up
            finally:
                self.lasted.append(time.monotonic() - started)


@pytest.fixture
def trickler() -> Iterator[Trickler]:
    started = Trickler().start()
    yield started
    started.stop()


def test_a_trickled_answer_times_out_at_the_deadline_not_at_each_read(
        trickler: Trickler) -> None:
    # Each time the request reads the clock, the receiver may send one more byte, and the
    # clock says 0.8 s passed for each byte sent: every read waits far less than the timeout,
    # and the whole answer would take 0.8 s times its 250 bytes.
    def clock() -> float:
        trickler.pace()
        return 0.8 * trickler.sent

    with pytest.raises(DeliveryFailed) as failed:
        post(trickler.url, b"{}", {"Content-Type": "application/json"}, 1.0, clock=clock)

    assert failed.value.timed_out
    assert str(failed.value) == "timed out: no whole answer within 1s"
    # Past 1 s of the clock after two bytes (a few more may have been let go before the
    # request was read): nothing like the whole answer.
    assert trickler.sent < 10 < len(ANSWER)


def test_a_trickling_receiver_holds_neither_its_requests_past_the_timeout_nor_the_others(
        ) -> None:
    slow = Trickler(every=0.25).start()
    healthy = Receiver(secret=SECRET).start()
    store = MemoryStore()
    hooks = (Webhook(url=slow.url, secret=SECRET), Webhook(url=healthy.url, secret=SECRET))
    settings = WebhookSettings(hooks=hooks, timeout=timedelta(seconds=1),
                               retry_backoff=timedelta(seconds=5))
    delivery = WebhookDelivery(store, settings, holder="host:1:a").start()
    count = 6 * BATCH  # several batches: the trickler's lane holds none of them back
    try:
        store.enqueue_events([OutboxEvent(event_id=f"e-{n}", kind="alert.opened")
                              for n in range(count)])
        # The healthy receiver answers at once: every event within the trickler's first
        # request (1 s, until its lane stalls or fails) and a few polls, whatever the trickler
        # does after; 8 s of margin for a busy 2-core machine.
        wait_for(lambda: len(healthy.ids()) == count, timeout=8,
                 what="every event at the healthy receiver")
        wait_for(lambda: slow.lasted, timeout=5, what="the trickler's first request ended")
    finally:
        delivery.close()
        slow.stop()
        healthy.stop()
    assert healthy.ids() == {f"e-{n}": 1 for n in range(count)}
    # Its first request ended at the 1 s timeout (a byte every 0.25 s would have taken 62 s);
    # 1.5 s of margin for a busy machine.
    assert 1.0 <= slow.lasted[0] < 2.5, slow.lasted
    errors = [e.last_error for e in store.list_events() if e.last_error]
    assert any("timed out: no whole answer within 1s" in error for error in errors), errors
    assert not any("s3cr3t-path" in error for error in errors)
