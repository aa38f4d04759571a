"""Webhooks: the outbox's events POSTed as signed JSON, from threads of their own.

Delivery never runs on the scheduling path. A :class:`WebhookDelivery` thread takes due events
from the outbox (:class:`~goatbeat_celery.core.protocols.Outbox`) under a claim that expires,
hands each to the lane of every webhook that has not taken it yet (a thread per webhook,
:mod:`~goatbeat_celery.beat.webhook_lanes`), and records the outcome: delivered, or tried again
after a delay that doubles each time (``goatbeat_webhook_retry_backoff`` up to
``goatbeat_webhook_retry_backoff_max``). A request as a whole, answer included, is bounded by
``goatbeat_webhook_timeout`` (:mod:`~goatbeat_celery.beat.webhook_post`); a receiver that is
slow, hangs or is down holds up its own lane only; the scheduling loop never waits on it.
Delivery is at least once: a receiver deduplicates on the event id.

Each request carries::

    Content-Type: application/json
    Goatbeat-Event-Id: <event id, the same on every attempt>
    Goatbeat-Event-Kind: <kind>
    Goatbeat-Timestamp: <Unix seconds when this attempt was signed>
    Goatbeat-Signature: v1=<hex HMAC-SHA256 of "<timestamp>.<body>" under the secret>

A receiver recomputes the HMAC over the timestamp, a dot and the raw body, compares it in
constant time, and refuses a timestamp far from its own clock (replays): see docs/webhooks.md.
The event id it deduplicates on is the body's ``id``, which the signature covers; the header
repeats it for routing before the body is read, and is not signed (signing it too would change
what every receiver verifies).

The secret is never printed: not in a problem, a log line, or a repr. Webhook URLs are shown as
``scheme://host/…`` only, since incoming-webhook URLs carry their own secret in the path.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial

from goatbeat_celery.beat.webhook_lanes import DEPTH, Failed, Lane
from goatbeat_celery.beat.webhook_post import DeliveryFailed, post
from goatbeat_celery.core.protocols import Outbox
from goatbeat_celery.core.rules.outbox import retry_delay
from goatbeat_celery.core.types.errors import GoatbeatError
from goatbeat_celery.core.types.outbox import OutboxEntry, OutboxRetry
from goatbeat_celery.settings.webhook_urls import shown_url

# The settings are read with the rest of the configuration, in every process; delivery uses
# them, and importers of this module still find them here.
from goatbeat_celery.settings.webhooks import (
    DEFAULT_BACKOFF,
    DEFAULT_BACKOFF_MAX,
    DEFAULT_TIMEOUT,
    KEYS,
    PREFIX,
    Webhook,
    WebhookFormat,
    WebhookSettings,
    read_webhooks,
)

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_BACKOFF", "DEFAULT_BACKOFF_MAX", "DEFAULT_TIMEOUT", "KEYS", "PREFIX",
           "DeliveryFailed", "Webhook", "WebhookDelivery", "WebhookFormat", "WebhookSettings",
           "post", "read_webhooks", "shown_url", "sign", "start"]

#: The most events taken at once.
BATCH = 10
#: How long the thread waits for new events when it found none.
POLL_INTERVAL = 1.0
#: A claim covers the worst case of an event's wait (a full lane, every request timing out)
#: and this margin.
CLAIM_MARGIN = timedelta(seconds=30)
#: How long :meth:`WebhookDelivery.close` waits for the requests under way.
STOP_TIMEOUT = 5.0

#: Without the version: the package root imports what imports this module.
USER_AGENT = "goatbeat_celery-webhooks"
SIGNATURE_HEADER = "Goatbeat-Signature"
TIMESTAMP_HEADER = "Goatbeat-Timestamp"
EVENT_ID_HEADER = "Goatbeat-Event-Id"
EVENT_KIND_HEADER = "Goatbeat-Event-Kind"


# -- what is sent ------------------------------------------------------------------------
def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The signature header's value: ``v1=`` and the hex HMAC-SHA256 of
    ``<timestamp>.<body>`` under ``secret``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def body_of(entry: OutboxEntry, hook: Webhook) -> bytes:
    """What ``hook`` receives for ``entry``: goatbeat's envelope, or Slack's text."""
    if hook.format is WebhookFormat.SLACK:
        return json.dumps({"text": slack_text(entry)}, ensure_ascii=False).encode()
    return json.dumps({
        "id": entry.event_id,
        "kind": entry.kind,
        "created_at": entry.created_at.isoformat().replace("+00:00", "Z"),
        "attempt": entry.attempts + 1,
        "data": dict(entry.payload),
    }, ensure_ascii=False, separators=(",", ":")).encode()


def slack_text(entry: OutboxEntry) -> str:
    """The line a Slack-style receiver shows: the payload's ``summary`` when it has one, with
    ``&``, ``<`` and ``>`` escaped as Slack asks: a task's error or a name holding
    ``<!channel>`` or ``<https://…|text>`` shows as written, never as a mention or a link."""
    summary = entry.payload.get("summary")
    if isinstance(summary, str) and summary.strip():
        return slack_escaped(f"goatbeat {entry.kind}: {summary}")
    compact = json.dumps(dict(entry.payload), ensure_ascii=False, separators=(",", ":"))
    return slack_escaped(f"goatbeat {entry.kind}: {compact[:1000]}")


def slack_escaped(text: str) -> str:
    """``text`` with the three characters Slack's markup gives a meaning escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


#: Sends one request: (url, body, headers, timeout in seconds); raises DeliveryFailed.
Sender = Callable[[str, bytes, Mapping[str, str], float], None]


# -- the delivery thread -----------------------------------------------------------------
@dataclass
class _InFlight:
    """An event handed to the lanes: the webhooks still to answer, and what they said."""

    entry: OutboxEntry
    waiting: set[str]
    took: set[str]
    errors: list[str] = field(default_factory=list)


class WebhookDelivery:
    """Drains the outbox to the webhooks, on a daemon thread of its own (:meth:`start`), or
    one batch at a time (:meth:`deliver_due`).

    The thread takes due events and hands each to the lane of every webhook that has not taken
    it (:mod:`~goatbeat_celery.beat.webhook_lanes`); it records an event once every lane has
    answered for it. It never waits on a lane that is failing or stalled: while a slow
    receiver's request drags on, events are still taken for the others, so one slow receiver
    delays only its own events (and a well one, for a moment, those that wait for room in its
    lane).
    """

    def __init__(self, outbox: Outbox, settings: WebhookSettings, *, holder: str,
                 send: Sender = post, clock: Callable[[], float] = time.time,
                 report: Callable[[bool], None] | None = None) -> None:
        self.outbox = outbox
        #: Told whether each event's attempt delivered it (the metrics' counter).
        self._report = report
        self.settings = settings
        self.holder = holder
        self._send = send
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._hooks = {hook.key: hook for hook in settings.hooks}
        self._lanes = [Lane(hook.key, f"goatbeat-webhook-{index}", partial(self._attempt, hook),
                            self._answered, self._stop)
                       for index, hook in enumerate(settings.hooks)]
        #: Answers from the lanes (None wakes the thread to stop); read by one thread only.
        self._answers: queue.SimpleQueue[tuple[str, str, str | None] | None] = \
            queue.SimpleQueue()
        self._in_flight: dict[str, _InFlight] = {}

    @property
    def claim(self) -> timedelta:
        """How long taken events are held: a full lane's requests all timing out, and a
        margin."""
        return self.settings.timeout * DEPTH + CLAIM_MARGIN

    def deliver_due(self) -> int:
        """Take a batch of due events, hand each to the webhooks that have not taken it, and
        record the outcome once they all answered; returns how many were taken. Store errors
        are raised (the caller waits and retries). Not to be called while :meth:`start`'s
        thread runs."""
        taken = self._take()
        while self._in_flight and not self._stop.is_set():
            self._record(POLL_INTERVAL)
        return taken

    def _take(self) -> int:
        # Take what every lane has room for, those that do not hold the others back aside: a
        # busy lane makes the others wait a moment; a failing or stalled one turns away what it
        # cannot hold. With none holding back, what one of them has room for.
        holding = [lane.room() for lane in self._lanes if lane.holds_back()]
        room = min(holding) if holding else max((lane.room() for lane in self._lanes), default=0)
        if room <= 0:
            return 0
        taken = self.outbox.take_events(holder=self.holder, limit=min(BATCH, room),
                                        hold_for=self.claim)
        done: list[_InFlight] = []
        for entry in taken:
            if entry.event_id in self._in_flight:
                continue  # its claim ran out while it waited in a lane: that one stands
            pending = _InFlight(entry, waiting={lane.key for lane in self._lanes} -
                                set(entry.delivered_to), took=set(entry.delivered_to))
            if not pending.waiting:
                done.append(pending)
                continue
            self._in_flight[entry.event_id] = pending
            for lane in self._lanes:
                if lane.key in pending.waiting:
                    lane.hand(entry)
        self._settle(done)
        return len(taken)

    def _attempt(self, hook: Webhook, entry: OutboxEntry) -> Failed | None:
        """One request of ``entry`` to ``hook`` (on its lane's thread): how it failed, or
        None."""
        body = body_of(entry, hook)
        stamp = str(int(self._clock()))
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            EVENT_ID_HEADER: entry.event_id,
            EVENT_KIND_HEADER: entry.kind,
            TIMESTAMP_HEADER: stamp,
            SIGNATURE_HEADER: sign(hook.secret, stamp, body),
        }
        try:
            self._send(hook.url, body, headers, self.settings.timeout.total_seconds())
        except DeliveryFailed as exc:
            return Failed(str(exc), timed_out=exc.timed_out)
        return None

    def _answered(self, entry: OutboxEntry, key: str, error: str | None) -> None:
        self._answers.put((entry.event_id, key, error))

    def _record(self, wait: float) -> None:
        """Wait up to ``wait`` seconds for a lane's answer, read every answer there is, and
        record the events every lane has answered for."""
        try:
            answers = [self._answers.get(timeout=wait) if wait > 0 else
                       self._answers.get_nowait()]
        except queue.Empty:
            return
        while True:
            try:
                answers.append(self._answers.get_nowait())
            except queue.Empty:
                break
        done: list[_InFlight] = []
        for answer in answers:
            pending = None if answer is None else self._in_flight.get(answer[0])
            if answer is None or pending is None:
                continue
            _, key, error = answer
            pending.waiting.discard(key)
            if error is None:
                pending.took.add(key)
            else:
                pending.errors.append(f"{self._hooks[key].shown}: {error}")
            if not pending.waiting:
                done.append(self._in_flight.pop(pending.entry.event_id))
        self._settle(done)

    def _settle(self, done: Sequence[_InFlight]) -> None:
        """Record the events every webhook answered for: delivered, or tried again later."""
        delivered = [pending.entry for pending in done if not pending.errors]
        if delivered:
            self.outbox.mark_events_delivered([entry.event_id for entry in delivered])
        retries: list[OutboxRetry] = []
        for pending in done:
            if self._report is not None:
                self._report(not pending.errors)
            entry = pending.entry
            if not pending.errors:
                logger.info("webhook event %s (%s) delivered", entry.event_id, entry.kind,
                            extra={"action": "webhook_delivered"})
                continue
            attempt = entry.attempts + 1
            delay = retry_delay(attempt, first=self.settings.retry_backoff,
                                most=self.settings.retry_backoff_max)
            error = "; ".join(pending.errors)
            retries.append(OutboxRetry(event_id=entry.event_id, delay=delay, error=error,
                                       delivered_to=tuple(sorted(pending.took))))
            logger.warning("webhook event %s (%s) not delivered (attempt %d): %s; next attempt "
                           "in %gs", entry.event_id, entry.kind, attempt, error,
                           delay.total_seconds(), extra={"action": "webhook_failed"})
        if retries:
            self.outbox.retry_events(retries, holder=self.holder)

    # -- the thread ----------------------------------------------------------------------
    def start(self) -> WebhookDelivery:
        thread = threading.Thread(target=self._run, name="goatbeat-webhooks", daemon=True)
        self._thread = thread
        thread.start()
        logger.info("goatbeat webhooks: delivering to %s",
                    ", ".join(hook.shown for hook in self.settings.hooks),
                    extra={"action": "webhooks_started"})
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            taken = self._safely(self._take)
            # A full batch: more may be due at once. Otherwise wait for an answer or the poll.
            self._safely(partial(self._record, 0.0 if taken == BATCH else POLL_INTERVAL))
        self._safely(partial(self._record, 0.0))  # what the lanes answered before they stopped

    def _safely(self, step: Callable[[], int | None]) -> int:
        try:
            return step() or 0
        except GoatbeatError as exc:
            logger.warning("goatbeat webhooks: cannot read or write the outbox: %s", exc,
                           extra={"action": "webhook_store_error"})
        except Exception:  # never let the thread die: events would wait forever
            logger.exception("goatbeat webhooks: unexpected error; retrying",
                             extra={"action": "webhook_error"})
        self._stop.wait(POLL_INTERVAL)
        return 0

    def close(self) -> None:
        """Stop after the requests under way (waiting at most a few seconds in all: the
        threads are daemons, and what was taken is taken again once its claim runs out)."""
        self._stop.set()
        until = time.monotonic() + STOP_TIMEOUT
        for lane in self._lanes:
            lane.close(max(until - time.monotonic(), 0.0))
        self._answers.put(None)
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(max(until - time.monotonic(), 0.0))


def start(outbox: Outbox, settings: WebhookSettings, *, holder: str,
          report: Callable[[bool], None] | None = None) -> WebhookDelivery:
    """Start delivering the outbox to ``settings``' webhooks on a thread of its own (telling
    ``report`` whether each attempt delivered its event)."""
    return WebhookDelivery(outbox, settings, holder=holder, report=report).start()
