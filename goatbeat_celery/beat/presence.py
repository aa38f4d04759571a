"""Whether somebody consumes a queue: what a rotated schedule's handover asks before it gives an
owner's occurrence to the next queue (:func:`goatbeat_celery.core.rules.rotation.place`).

A thread of its own asks the broker every ``ttl`` seconds about every queue asked about so
far, from the first time one is; sending only reads its last answer, so a message never waits
for the broker's word (the very first ask waits for the first answer, at most ``timeout`` plus
a second). An answer is at most ``ttl`` plus the time an ask takes old:

* AMQP (RabbitMQ): a passive ``queue.declare`` per queue, whose reply counts the queue's
  consumers: one round trip each; a queue the broker does not hold has nobody.
* Redis and the other virtual transports know nothing of consumers: the workers are asked
  through Celery's remote control (``active_queues``), which collects replies for ``timeout``
  seconds. A worker that does not answer within it (a ``solo`` pool busy with a task, a worker
  started with ``--without-control``) counts as absent.

An answer older than twice ``ttl`` plus ``timeout`` (the broker hangs), or no answer (it
cannot be asked), is unknown: no occurrence moves.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

logger = logging.getLogger(__name__)

#: Seconds to collect the workers' replies to a remote-control ask (virtual transports).
REPLY_TIMEOUT = 1.0


class QueuePresence:
    """The broker's word on which queues have a consumer, asked every ``ttl`` seconds."""

    def __init__(self, app: Any, *, ttl: float = 5.0, timeout: float = REPLY_TIMEOUT,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self.ttl = ttl
        self.timeout = timeout
        self._mono = monotonic
        self._lock = threading.Lock()
        self._wanted: set[str] = set()
        self._answers: dict[str, bool | None] = {}
        self._asked_at: float | None = None
        self._first = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: How many times the broker was asked, and the seconds the asks took in all.
        self.asks = 0
        self.seconds = 0.0

    def consumed(self, queue: str, *, among: Iterable[str] = ()) -> bool | None:
        """Whether somebody consumes ``queue`` (None: not known), by the last answer; ``among``
        (the other queues of its rotation) are asked about from now on too."""
        with self._lock:
            new = {queue, *among} - self._wanted
            self._wanted.update(new)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="goatbeat-presence",
                                                daemon=True)
                self._thread.start()
        if not self._first.is_set():
            self._first.wait(self.timeout + 1.0)
        with self._lock:
            # A queue first named now is unknown until the next ask.
            if self._asked_at is None or (self._mono() - self._asked_at
                                          > 2 * self.ttl + self.timeout):
                return None
            return self._answers.get(queue)

    def close(self) -> None:
        """Stop asking (the thread ends after the ask in progress)."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                wanted = sorted(self._wanted)
            started = time.monotonic()
            answers = self._ask(wanted)
            with self._lock:
                self.asks += 1
                self.seconds += time.monotonic() - started
                self._answers = answers
                self._asked_at = self._mono()
            self._first.set()
            self._stop.wait(self.ttl)

    def _ask(self, queues: list[str]) -> dict[str, bool | None]:
        try:
            with self.app.connection_for_write() as connection:
                connection.ensure_connection(max_retries=1, timeout=self.timeout)
                if connection.transport.driver_type == "amqp":
                    return {queue: _amqp_consumed(connection, queue) for queue in queues}
                replies = self.app.control.inspect(
                    timeout=self.timeout, connection=connection).active_queues() or {}
        # The broker down or refusing: nobody can tell, and nothing moves.
        except Exception as exc:  # noqa: BLE001
            logger.warning("could not ask the broker who consumes %s: %s", ", ".join(queues),
                           exc, extra={"action": "rotation_presence"})
            return dict.fromkeys(queues)
        consumed = {entry.get("name") for found in replies.values() if isinstance(found, list)
                    for entry in found if isinstance(entry, dict)}
        return {queue: queue in consumed for queue in queues}


def _amqp_consumed(connection: Any, queue: str) -> bool | None:
    """A passive declare's consumer count, on a channel of its own (a queue the broker does
    not hold closes the channel it was asked on)."""
    channel = connection.channel()
    try:
        _, _, consumers = channel.queue_declare(queue=queue, passive=True)
        return int(consumers) > 0
    except connection.channel_errors:
        return False  # no such queue: nobody consumes it
    finally:
        try:
            channel.close()
        except Exception:  # noqa: BLE001  # already closed by the broker's refusal
            pass
