"""Whether somebody consumes a queue: what a rotated schedule's handover asks before it gives an
owner's occurrence to the next queue (:func:`goatbeat_celery.core.rules.rotation.place`).

The broker is asked at most once per ``ttl`` for all the queues asked about so far, on the
submission's thread, and the answer kept:

* AMQP (RabbitMQ): a passive ``queue.declare`` per queue, whose reply counts the queue's
  consumers: one round trip each, a millisecond or so on a local network; a queue the broker
  does not hold has nobody.
* Redis and the other virtual transports know nothing of consumers: the workers are asked
  through Celery's remote control (``active_queues``), which collects replies for ``timeout``
  seconds, so a refresh holds that batch's sending that long. A worker that does not answer
  within it (busy in its remote-control thread, or a ``solo`` pool running a task) counts as
  absent.

When the broker cannot be asked, presence is unknown (None) and no occurrence moves.
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
    """The broker's word on which queues have a consumer, kept for ``ttl`` seconds."""

    def __init__(self, app: Any, *, ttl: float = 5.0, timeout: float = REPLY_TIMEOUT,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self.ttl = ttl
        self.timeout = timeout
        self._mono = monotonic
        self._lock = threading.Lock()
        self._asked_at: float | None = None
        self._answers: dict[str, bool | None] = {}
        #: How many times the broker was asked, and the seconds it took in all (for the docs'
        #: figures and the tests).
        self.asks = 0
        self.seconds = 0.0

    def consumed(self, queue: str, *, among: Iterable[str] = ()) -> bool | None:
        """Whether somebody consumes ``queue`` (None: not known). A stale or missing answer is
        asked for afresh, together with ``among`` and every queue asked about before."""
        with self._lock:
            now = self._mono()
            fresh = self._asked_at is not None and now - self._asked_at < self.ttl
            if fresh and queue in self._answers:
                return self._answers[queue]
            wanted = {*self._answers, queue, *among}
            started = time.monotonic()
            answers = self._ask(sorted(wanted))
            self.asks += 1
            self.seconds += time.monotonic() - started
            self._answers = answers
            self._asked_at = self._mono()
            return answers.get(queue)

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
