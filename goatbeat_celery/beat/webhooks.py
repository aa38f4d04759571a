"""Webhooks: the outbox's events POSTed as signed JSON, from a thread of their own.

Delivery never runs on the scheduling path. A :class:`WebhookDelivery` thread takes due events
from the outbox (:class:`~goatbeat_celery.core.protocols.Outbox`) under a claim that expires,
POSTs each to every webhook that has not taken it yet, and records the outcome: delivered, or
tried again after a delay that doubles each time (``goatbeat_webhook_retry_backoff`` up to
``goatbeat_webhook_retry_backoff_max``). A receiver that is slow, hangs or is down holds up
this thread only, each request bounded by ``goatbeat_webhook_timeout``; the scheduling loop
never waits on it. Delivery is at least once: a receiver deduplicates on the event id.

Each request carries::

    Content-Type: application/json
    Goatbeat-Event-Id: <event id, the same on every attempt>
    Goatbeat-Event-Kind: <kind>
    Goatbeat-Timestamp: <Unix seconds when this attempt was signed>
    Goatbeat-Signature: v1=<hex HMAC-SHA256 of "<timestamp>.<body>" under the secret>

A receiver recomputes the HMAC over the timestamp, a dot and the raw body, compares it in
constant time, and refuses a timestamp far from its own clock (replays): see docs/webhooks.md.

The secret is never printed: not in a problem, a log line, or a repr. Webhook URLs are shown as
``scheme://host/…`` only, since incoming-webhook URLs carry their own secret in the path.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from typing import Any
from urllib.parse import urlsplit

from goatbeat_celery.core.protocols import Outbox
from goatbeat_celery.core.rules.outbox import retry_delay
from goatbeat_celery.core.rules.validation import seconds_problem
from goatbeat_celery.core.types.errors import GoatbeatError
from goatbeat_celery.core.types.instants import to_timedelta
from goatbeat_celery.core.types.outbox import OutboxEntry, OutboxRetry
from goatbeat_celery.core.types.problems import Problem

logger = logging.getLogger(__name__)

__all__ = ["Webhook", "WebhookDelivery", "WebhookFormat", "WebhookSettings", "read_webhooks",
           "sign", "start"]

PREFIX = "goatbeat_"
#: The settings this module reads (``goatbeat_`` + each).
KEYS = ("webhooks", "webhook_secret", "webhook_timeout", "webhook_retry_backoff",
        "webhook_retry_backoff_max")
_HOOK_KEYS = ("url", "format", "secret")

DEFAULT_TIMEOUT = timedelta(seconds=5)
DEFAULT_BACKOFF = timedelta(seconds=1)
DEFAULT_BACKOFF_MAX = timedelta(minutes=5)
#: Events taken in one claim: each may wait up to the timeout on every webhook.
BATCH = 10
#: How long the thread waits for new events when it found none.
POLL_INTERVAL = 1.0
#: A claim covers the batch's worst case (every request timing out) and this margin.
CLAIM_MARGIN = timedelta(seconds=30)
#: How long :meth:`WebhookDelivery.close` waits for a request under way.
STOP_TIMEOUT = 5.0
#: How much of a receiver's answer is kept in the error of a failed attempt.
ANSWER_KEPT = 200

#: Without the version: the package root imports what imports this module.
USER_AGENT = "goatbeat_celery-webhooks"
SIGNATURE_HEADER = "Goatbeat-Signature"
TIMESTAMP_HEADER = "Goatbeat-Timestamp"
EVENT_ID_HEADER = "Goatbeat-Event-Id"
EVENT_KIND_HEADER = "Goatbeat-Event-Kind"


class WebhookFormat(Enum):
    """The body a webhook receives: goatbeat's own envelope, or Slack's ``{"text": …}``."""

    GENERIC = "generic"
    SLACK = "slack"


def shown_url(url: str) -> str:
    """``scheme://host/…``: where a webhook goes, without the path or query that may hold its
    secret."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}/…"


@dataclass(frozen=True)
class Webhook:
    """One receiver. Its ``key`` (a digest of the URL) names it in ``delivered_to``."""

    url: str = field(repr=False)
    secret: str = field(repr=False)
    format: WebhookFormat = WebhookFormat.GENERIC

    @property
    def key(self) -> str:
        return "hook-" + hashlib.sha256(self.url.encode()).hexdigest()[:16]

    @property
    def shown(self) -> str:
        return shown_url(self.url)

    def __repr__(self) -> str:
        return f"Webhook({self.shown!r}, format={self.format.value!r})"


@dataclass(frozen=True, kw_only=True)
class WebhookSettings:
    """What ``goatbeat_webhooks`` and its companions say, validated."""

    hooks: tuple[Webhook, ...]
    #: ``goatbeat_webhook_secret``: what hooks without their own secret sign with.
    secret: str | None = field(default=None, repr=False)
    timeout: timedelta = DEFAULT_TIMEOUT
    retry_backoff: timedelta = DEFAULT_BACKOFF
    retry_backoff_max: timedelta = DEFAULT_BACKOFF_MAX


def read_webhooks(conf: Mapping[str, Any], problems: list[str]) -> WebhookSettings | None:
    """The webhook settings of ``conf`` (None when ``goatbeat_webhooks`` is left out); every
    problem is appended, naming its setting, and never quoting a secret."""
    given = conf.get(PREFIX + "webhooks")
    found: list[Problem] = []
    timeout = _duration(conf, "webhook_timeout", DEFAULT_TIMEOUT, timedelta(minutes=1), found)
    backoff = _duration(conf, "webhook_retry_backoff", DEFAULT_BACKOFF, timedelta(hours=1),
                        found)
    most = _duration(conf, "webhook_retry_backoff_max", DEFAULT_BACKOFF_MAX, timedelta(days=1),
                     found)
    secret = conf.get(PREFIX + "webhook_secret")
    if secret is not None and (not isinstance(secret, str) or not secret.strip()):
        found.append(Problem(PREFIX + "webhook_secret", "must be a non-empty string",
                             "give the shared secret receivers verify signatures with"))
        secret = None
    hooks: list[Webhook] = []
    if given is not None:
        items = [given] if isinstance(given, (str, Mapping)) else given
        if not isinstance(items, (list, tuple)):
            found.append(Problem(PREFIX + "webhooks", "expected a list of URLs (or of dicts "
                                 f"with url, format and secret), got {type(given).__name__}"))
            items = []
        elif not items:
            found.append(Problem(PREFIX + "webhooks", "is empty, which would deliver nowhere",
                                 "list the webhook URLs, or leave the setting out"))
        for index, item in enumerate(items):
            hook = _webhook(item, f"{PREFIX}webhooks[{index}]", secret, found)
            if hook is not None:
                hooks.append(hook)
        keys = [hook.key for hook in hooks]
        if len(set(keys)) < len(keys):
            found.append(Problem(PREFIX + "webhooks", "lists the same URL twice",
                                 "give each webhook once"))
    problems.extend(map(str, found))
    if given is None or found:
        return None
    return WebhookSettings(hooks=tuple(hooks), secret=secret, timeout=timeout,
                           retry_backoff=backoff, retry_backoff_max=most)


def _duration(conf: Mapping[str, Any], key: str, default: timedelta, maximum: timedelta,
              found: list[Problem]) -> timedelta:
    value = conf.get(PREFIX + key)
    if value is None:
        return default
    label = PREFIX + key
    if isinstance(value, str):
        read: list[str] = []
        value = to_timedelta(value, label, read)
        if read:
            found.extend(map(Problem.read, read))
            return default
    problem = seconds_problem(value, label, maximum=maximum, inclusive_minimum=False)
    if problem is not None:
        found.append(problem)
        return default
    return to_timedelta(value, label)


def _webhook(item: object, label: str, secret: str | None,
             found: list[Problem]) -> Webhook | None:
    own: Mapping[str, Any]
    if isinstance(item, str):
        own = {"url": item}
    elif isinstance(item, Mapping):
        own = item
        for key in sorted(set(map(str, own)) - set(_HOOK_KEYS)):
            found.append(Problem(f"{label}.{key}", "unknown key",
                                 f"use one of {', '.join(_HOOK_KEYS)}"))
    else:
        found.append(Problem(label, "expected a URL or a dict with url, format and secret, "
                             f"got {type(item).__name__}"))
        return None
    url = own.get("url")
    where = f"{label}.url" if isinstance(item, Mapping) else label
    before = len(found)
    if not isinstance(url, str) or not url.strip():
        found.append(Problem(where, "is empty", "give the receiver's http:// or https:// URL"))
    else:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https"):
            # The scheme only: the rest of a URL may be its secret.
            found.append(Problem(where, f"must be an http:// or https:// URL, got a "
                                 f"{parts.scheme or 'relative'} one"))
        elif not parts.hostname:
            found.append(Problem(where, "has no host", "give the receiver's full URL"))
        elif any(char.isspace() for char in url.strip()):
            found.append(Problem(where, "contains spaces", "encode them as %20"))
    kind = own.get("format", WebhookFormat.GENERIC.value)
    try:
        shape = WebhookFormat(kind.value if isinstance(kind, WebhookFormat) else kind)
    except ValueError:
        found.append(Problem(f"{label}.format", f"unknown format {kind!r}",
                             "use generic or slack"))
        shape = WebhookFormat.GENERIC
    own_secret = own.get("secret")
    if own_secret is not None and (not isinstance(own_secret, str) or not own_secret.strip()):
        found.append(Problem(f"{label}.secret", "must be a non-empty string"))
        own_secret = None
    chosen = own_secret or secret
    if chosen is None and "secret" not in own:
        found.append(Problem(f"{label}", "has no secret to sign with",
                             f"set {PREFIX}webhook_secret (or the webhook's own secret)"))
    if len(found) > before or not isinstance(url, str) or chosen is None:
        return None
    return Webhook(url=url.strip(), secret=chosen, format=shape)


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
    """The line a Slack-style receiver shows: the payload's ``summary`` when it has one."""
    summary = entry.payload.get("summary")
    if isinstance(summary, str) and summary.strip():
        return f"goatbeat {entry.kind}: {summary}"
    compact = json.dumps(dict(entry.payload), ensure_ascii=False, separators=(",", ":"))
    return f"goatbeat {entry.kind}: {compact[:1000]}"


class DeliveryFailed(Exception):
    """One request that the receiver did not accept (a status, a timeout, a refusal)."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    # A redirect would turn the POST into a GET without its body: a failure to report.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)

#: Sends one request: (url, body, headers, timeout in seconds); raises DeliveryFailed.
Sender = Callable[[str, bytes, Mapping[str, str], float], None]


def post(url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> None:
    """POST ``body``; any 2xx answer accepts it, anything else raises DeliveryFailed."""
    request = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")
    try:
        with _OPENER.open(request, timeout=timeout) as answer:
            status = answer.status
            answer.read(ANSWER_KEPT)
    except urllib.error.HTTPError as exc:
        said = exc.read(ANSWER_KEPT).decode("utf-8", "replace").strip()
        raise DeliveryFailed(f"HTTP {exc.code}" + (f": {said}" if said else "")) from None
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        # A URL error may quote the URL: name the failure, never the URL.
        raise DeliveryFailed(f"{type(reason).__name__}: {_without(str(reason), url)}") from None
    if not 200 <= status < 300:
        raise DeliveryFailed(f"HTTP {status}")


def _without(text: str, url: str) -> str:
    return text.replace(url, shown_url(url))


# -- the delivery thread -----------------------------------------------------------------
class WebhookDelivery:
    """Drains the outbox to the webhooks, on a daemon thread of its own (:meth:`start`), or
    one batch at a time (:meth:`deliver_due`)."""

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

    @property
    def claim(self) -> timedelta:
        """How long a batch is held: every request of it timing out, and a margin."""
        return self.settings.timeout * BATCH * len(self.settings.hooks) + CLAIM_MARGIN

    def deliver_due(self) -> int:
        """Take a batch of due events and deliver each to the webhooks that have not taken it;
        returns how many were taken. Store errors are raised (the caller waits and retries)."""
        taken = self.outbox.take_events(holder=self.holder, limit=BATCH, hold_for=self.claim)
        for entry in taken:
            if self._stop.is_set():
                break  # the claim runs out and the event is taken again, here or elsewhere
            self._deliver(entry)
        return len(taken)

    def _deliver(self, entry: OutboxEntry) -> None:
        took = set(entry.delivered_to)
        errors: list[str] = []
        for hook in self.settings.hooks:
            if hook.key in took:
                continue
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
                errors.append(f"{hook.shown}: {exc}")
                continue
            took.add(hook.key)
        if self._report is not None:
            self._report(not errors)
        if not errors:
            self.outbox.mark_events_delivered([entry.event_id])
            logger.info("webhook event %s (%s) delivered", entry.event_id, entry.kind,
                        extra={"action": "webhook_delivered"})
            return
        attempt = entry.attempts + 1
        delay = retry_delay(attempt, first=self.settings.retry_backoff,
                            most=self.settings.retry_backoff_max)
        error = "; ".join(errors)
        self.outbox.retry_events([OutboxRetry(event_id=entry.event_id, delay=delay, error=error,
                                              delivered_to=tuple(sorted(took)))],
                                 holder=self.holder)
        logger.warning("webhook event %s (%s) not delivered (attempt %d): %s; next attempt "
                       "in %gs", entry.event_id, entry.kind, attempt, error,
                       delay.total_seconds(), extra={"action": "webhook_failed"})

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
            try:
                taken = self.deliver_due()
            except GoatbeatError as exc:
                logger.warning("goatbeat webhooks: cannot read the outbox: %s", exc,
                               extra={"action": "webhook_store_error"})
                taken = 0
            except Exception:  # never let the thread die: events would wait forever
                logger.exception("goatbeat webhooks: unexpected error; retrying",
                                 extra={"action": "webhook_error"})
                taken = 0
            if taken < BATCH:
                self._stop.wait(POLL_INTERVAL)

    def close(self) -> None:
        """Stop after the request under way (waiting at most a few seconds: the thread is a
        daemon, and what it had claimed is taken again once the claim runs out)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(STOP_TIMEOUT)


def start(outbox: Outbox, settings: WebhookSettings, *, holder: str,
          report: Callable[[bool], None] | None = None) -> WebhookDelivery:
    """Start delivering the outbox to ``settings``' webhooks on a thread of its own (telling
    ``report`` whether each attempt delivered its event)."""
    return WebhookDelivery(outbox, settings, holder=holder, report=report).start()
