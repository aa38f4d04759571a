"""Inside a task: which schedule and which occurrence this run is for.

goatbeat puts the schedule's name, the occurrence instant and the fencing token in the message
headers of every run it sends, and uses the occurrence's idempotency key as the task id::

    from goatbeat_celery import occurrence_of

    @app.task(bind=True)
    def report(self):
        run = occurrence_of(self)
        if run is None:
            ...  # called by hand or by other code, not by goatbeat
        elif run.manual:
            ...  # `celery goatbeat run-now`, Schedules.run_now()
        else:
            build_report(for_day=run.at.date(), idempotency_key=run.key)

The key is what makes a task idempotent: a resubmission after a crash carries the same key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from goatbeat_celery.headers import MANUAL, OCCURRENCE, SCHEDULE, TOKEN

__all__ = ["Occurrence", "occurrence_of"]


@dataclass(frozen=True, kw_only=True)
class Occurrence:
    """One run goatbeat sent: ``key`` (the task id, also the idempotency key), ``schedule``
    (its name), ``at`` (the occurrence instant, aware, UTC: the grid point, before any offset),
    ``manual`` (an extra run asked for by hand) and ``token`` (the fencing token of the leader
    that sent it)."""

    key: str
    schedule: str
    at: datetime
    manual: bool
    token: int | None


def occurrence_of(task_or_request: Any) -> Occurrence | None:
    """The occurrence a running task (``self`` of a bound task) or its ``request`` was sent
    for, or ``None`` when goatbeat did not send it."""
    request = getattr(task_or_request, "request", task_or_request)
    headers = _headers(request)
    schedule = headers.get(SCHEDULE)
    instant = headers.get(OCCURRENCE)
    key = getattr(request, "id", None)
    if not isinstance(schedule, str) or not isinstance(instant, str) or not isinstance(key, str):
        return None
    try:
        at = datetime.fromisoformat(instant)
    except ValueError:
        return None
    if at.tzinfo is None:
        return None
    token = headers.get(TOKEN)
    return Occurrence(key=key, schedule=schedule, at=at.astimezone(timezone.utc),
                      manual=bool(headers.get(MANUAL, False)),
                      token=token if isinstance(token, int) else None)


def _headers(request: Any) -> Mapping[str, Any]:
    """goatbeat's headers as the worker put them on the request: as attributes (message
    protocol 2) or in ``request.headers``."""
    found: dict[str, Any] = {}
    raw = getattr(request, "headers", None)
    if isinstance(raw, Mapping):
        found.update(raw)
    for name in (SCHEDULE, OCCURRENCE, TOKEN, MANUAL):
        value = getattr(request, name, None)
        if value is not None:
            found[name] = value
    return found
