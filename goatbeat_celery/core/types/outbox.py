"""The outbox: events delivered off the scheduling path (alerts to webhooks, exports).

An event is written to the outbox in the same transaction as what it reports, so that it is
never lost nor sent for something that was rolled back; a delivery thread apart from the
scheduling loop takes it from there, at least once, retried with backoff. Its ``event_id`` is
stable across attempts: a receiver deduplicates on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.validation import payload_problems

#: The longest event id and kind accepted (they travel in HTTP headers and logs).
MAX_EVENT_ID = 200
MAX_KIND = 100
#: The longest error text kept with an event (the rest is cut).
MAX_ERROR = 2000


@dataclass(frozen=True, kw_only=True)
class OutboxEvent:
    """An event to deliver: ``event_id`` (unique, the receiver's deduplication key), ``kind``
    (``"alert.opened"``, say) and ``payload``, a JSON object."""

    event_id: str
    kind: str
    payload: Mapping[str, Any] = field(default_factory=dict)

    def problems(self) -> list[Problem]:
        """What is wrong with the event, every problem at once."""
        found: list[Problem] = []
        for label, value, most in (("event_id", self.event_id, MAX_EVENT_ID),
                                   ("kind", self.kind, MAX_KIND)):
            if not isinstance(value, str) or not value.strip():
                found.append(Problem(label, f"expected a non-empty string, got {value!r}"))
            elif len(value) > most or not value.isprintable():
                found.append(Problem(label, f"at most {most} printable characters, got "
                                     f"{len(value)}"))
        if not isinstance(self.payload, Mapping):
            found.append(Problem("payload", f"expected a JSON object, got "
                                 f"{type(self.payload).__name__}"))
        else:
            found.extend(payload_problems("payload", dict(self.payload)))
        return found


def check_events(events: Sequence[OutboxEvent]) -> None:
    """Raise ConfigurationError listing every problem of ``events`` (nothing is written then)."""
    found: list[Problem] = []
    for index, event in enumerate(events):
        if not isinstance(event, OutboxEvent):
            found.append(Problem(f"events[{index}]",
                                 f"expected an OutboxEvent, got {type(event).__name__}"))
            continue
        found.extend(replace(p, field=f"events[{index}].{p.field}", subject="")
                     for p in event.problems())
    if found:
        raise ConfigurationError(found, subject="outbox events")


@dataclass(frozen=True, kw_only=True)
class OutboxEntry:
    """An event as the outbox holds it, with its delivery so far (instants by the store's
    clock)."""

    event_id: str
    kind: str
    payload: Mapping[str, Any]
    created_at: datetime
    #: Delivery attempts made (0 until the first).
    attempts: int
    #: When it may be taken for delivery next.
    next_attempt_at: datetime
    #: When it was delivered to every destination; None until then.
    delivered_at: datetime | None
    #: The destinations that took it already (their keys), so a retry skips them.
    delivered_to: tuple[str, ...]
    last_error: str | None
    #: Who is delivering it now, and until when that claim holds.
    claimed_by: str | None
    claimed_until: datetime | None

    @property
    def delivered(self) -> bool:
        return self.delivered_at is not None


@dataclass(frozen=True, kw_only=True)
class OutboxRetry:
    """A delivery that failed: try again ``delay`` after the store's now, the destinations in
    ``delivered_to`` having taken it already."""

    event_id: str
    delay: timedelta
    error: str
    delivered_to: tuple[str, ...] = ()


def error_text(text: str) -> str:
    """An error as kept with an event: cut to :data:`MAX_ERROR` characters."""
    return text if len(text) <= MAX_ERROR else text[:MAX_ERROR - 3] + "..."
