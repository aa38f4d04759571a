"""Calendars for ``calendar list``, ``calendar show`` and their ``--json``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from goatbeat_celery.core.rules.calendars import Calendar
from goatbeat_celery.display.layout import Value
from goatbeat_celery.display.scalars import NONE, iso, when


def calendar_entries(calendar: Calendar) -> list[str]:
    """A calendar's dates and ranges as typed: ``2026-12-24``, ``2026-12-24..2027-01-02``."""
    return [entry if isinstance(entry, str) else f"{entry['from']}..{entry['to']}"
            for entry in calendar.entries() if isinstance(entry, (str, dict))]


def calendar_json(calendar: Calendar) -> dict[str, Any]:
    """One calendar for scripts: entries as stored (dates, then ``{"from", "to"}`` ranges).

    A contract: ``calendar`` commands with ``--json`` and the HTTP API's calendars give this
    document (some add keys of their own). Keys, always present: ``name``, ``description``
    (null: none), ``entries``, ``version``, ``created_at``, ``updated_at`` (ISO-8601 in UTC)
    and ``damage``."""
    return {
        "name": calendar.name,
        "description": calendar.description,
        "entries": calendar.entries(),
        "version": calendar.version,
        "created_at": iso(calendar.created_at),
        "updated_at": iso(calendar.updated_at),
        "damage": [str(d) for d in calendar.damage],
    }


def calendar_fields(calendar: Calendar,
                    observed_by: Sequence[str] | None = None) -> list[tuple[str, Value]]:
    """Every detail of one calendar, as ``(label, value)`` lines for :func:`fields`, with the
    schedules observing it when given."""
    entries = calendar_entries(calendar)
    observers: list[tuple[str, Value]] = []
    if observed_by is not None:
        observers = [("observed by", ", ".join(observed_by) or NONE)]
    return [
        ("name", calendar.name),
        *([("description", calendar.description)] if calendar.description is not None
          else []),
        ("excluded", tuple(entries) if entries else NONE),
        *([("damage", tuple(str(d) for d in calendar.damage))] if calendar.damage else []),
        *observers,
        ("version", str(calendar.version)),
        ("updated", when(calendar.updated_at)),
    ]


def calendar_row(calendar: Calendar) -> tuple[str, ...]:
    """A calendar as a row of the ``calendar list`` table."""
    entries = calendar_entries(calendar)
    shown_entries = ", ".join(entries[:3]) + (f", … ({len(entries)})" if len(entries) > 3
                                              else "")
    return (calendar.name, "unreadable" if calendar.damage else (shown_entries or NONE),
            calendar.description or "")
