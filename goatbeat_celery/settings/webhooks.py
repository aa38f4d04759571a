"""The webhook settings: ``goatbeat_webhooks`` and its companions, read and validated.

Read wherever the configuration is (beat delivers, ``goatbeat check`` reports), so this module
imports nothing of beat: :mod:`goatbeat_celery.beat.webhooks` delivers what it describes. A
problem names its setting and never quotes a secret, nor a URL (its path may be one).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from typing import Any

from goatbeat_celery.core.rules.validation import seconds_problem
from goatbeat_celery.core.types.instants import to_timedelta
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.settings.webhook_urls import shown_url, url_problems

__all__ = ["DEFAULT_BACKOFF", "DEFAULT_BACKOFF_MAX", "DEFAULT_TIMEOUT", "KEYS", "Webhook",
           "WebhookFormat", "WebhookSettings", "read_webhooks"]

PREFIX = "goatbeat_"
#: The settings this module reads (``goatbeat_`` + each).
KEYS = ("webhooks", "webhook_secret", "webhook_timeout", "webhook_retry_backoff",
        "webhook_retry_backoff_max")
_HOOK_KEYS = ("url", "format", "secret")

DEFAULT_TIMEOUT = timedelta(seconds=5)
DEFAULT_BACKOFF = timedelta(seconds=1)
DEFAULT_BACKOFF_MAX = timedelta(minutes=5)


class WebhookFormat(Enum):
    """The body a webhook receives: goatbeat's own envelope, or Slack's ``{"text": …}``."""

    GENERIC = "generic"
    SLACK = "slack"


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


def read_webhooks(conf: Mapping[str, Any], problems: list[Problem]) -> WebhookSettings | None:
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
    problems.extend(found)
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
        read: list[Problem] = []
        value = to_timedelta(value, label, read)
        if read:
            found.extend(read)
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
    if url is not None and not isinstance(url, str):
        found.append(Problem(where, f"expected a URL, got {type(url).__name__}",
                             "give the receiver's http:// or https:// URL as a string"))
    elif url is None or not url.strip():
        found.append(Problem(where, "is empty", "give the receiver's http:// or https:// URL"))
    else:
        found.extend(url_problems(url.strip(), where))
    kind = own.get("format", WebhookFormat.GENERIC.value)
    try:
        shape = WebhookFormat(kind.value if isinstance(kind, WebhookFormat) else kind)
    except (ValueError, TypeError):
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
