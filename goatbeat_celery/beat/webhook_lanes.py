"""Lanes: each webhook's requests on a thread of its own, so that one slow receiver delays only
its own events.

A lane takes the events handed to it in order and answers each with the attempt's error (None
when the receiver took it). Two rules keep a bad receiver from holding events it will not take:

* a lane holds at most :data:`DEPTH` events. Events are taken only while every lane has room
  for them, except a lane that does not :meth:`~Lane.hold_back` the others: one whose last
  request failed, or whose request under way has taken :data:`STALL` seconds already. An event
  handed to such a lane when it is full is answered at once as not tried, to be tried again
  later with the event's backoff;
* after a request that ran out of time, the events already waiting in the lane are answered
  at once as not tried: a receiver that hangs or trickles costs one request's timeout per
  round, not one per event.

A lane's thread starts with its first event and then waits on its queue: an idle lane costs
nothing.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from goatbeat_celery.core.types.outbox import OutboxEntry

logger = logging.getLogger(__name__)

#: The most events waiting in one lane (the one under way included).
DEPTH = 10
#: How long a request may be under way before its lane no longer holds the others back (a
#: receiver answers in milliseconds when it is well).
STALL = 1.0


@dataclass(frozen=True)
class Failed:
    """A request the receiver did not accept: why, and whether it ran out of time."""

    error: str
    timed_out: bool = False


#: Sends ``entry`` to the lane's webhook; returns how it failed, or None when it was taken.
Attempt = Callable[[OutboxEntry], "Failed | None"]
#: Told each answer: (event, webhook key, error or None).
Answered = Callable[[OutboxEntry, str, "str | None"], None]


class Lane:
    """One webhook's queue of events and the thread that sends them."""

    def __init__(self, key: str, name: str, attempt: Attempt, answered: Answered,
                 stop: threading.Event) -> None:
        self.key = key
        self._name = name
        self._attempt = attempt
        self._answered = answered
        self._stop = stop
        self._queue: queue.SimpleQueue[OutboxEntry | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._waiting = 0
        #: When the request under way started (monotonic); None between requests.
        self._since: float | None = None
        #: Whether the last request failed (until one succeeds).
        self._failing = False
        self._thread: threading.Thread | None = None

    def hand(self, entry: OutboxEntry) -> None:
        """Queue ``entry`` for this webhook; a full lane answers it at once as not tried."""
        with self._lock:
            full = self._waiting >= DEPTH
            if not full:
                self._waiting += 1
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=self._name,
                                                    daemon=True)
                    self._thread.start()
        if full:
            self._answered(entry, self.key, f"not tried: {DEPTH} events are waiting for this "
                           "receiver already")
            return
        self._queue.put(entry)

    def room(self) -> int:
        """How many more events the lane takes now."""
        with self._lock:
            return DEPTH - self._waiting

    def holds_back(self) -> bool:
        """Whether events should wait for room here: not when the last request failed, nor
        while the request under way has taken :data:`STALL` seconds already."""
        since = self._since
        return not self._failing and (since is None or time.monotonic() - since < STALL)

    def close(self, timeout: float) -> None:
        """Let the thread end after the request under way (waiting at most ``timeout``)."""
        self._queue.put(None)
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        skip = 0  # events to answer without a request, after a failed one
        while (entry := self._queue.get()) is not None:
            try:
                if self._stop.is_set():
                    continue  # its claim runs out, and it is taken again
                if skip:
                    skip -= 1
                    error: str | None = "not tried: the request before it timed out"
                else:
                    failed = self._attempted(entry)
                    self._failing = failed is not None
                    error = None if failed is None else failed.error
                    if failed is not None and failed.timed_out:
                        skip = self._queue.qsize()
                self._answered(entry, self.key, error)
            finally:
                with self._lock:
                    self._waiting -= 1

    def _attempted(self, entry: OutboxEntry) -> Failed | None:
        self._since = time.monotonic()
        try:
            return self._attempt(entry)
        except Exception:  # never let the lane die: its events would wait forever
            logger.exception("goatbeat webhooks: unexpected error sending an event",
                             extra={"action": "webhook_error"})
            return Failed("unexpected error (in beat's log)")
        finally:
            self._since = None
