"""Single values as tables and JSON show them: instants (UTC: ``2026-11-29T21:40:02Z`` in
tables, full ISO-8601 in JSON), durations (``1h30m`` / ``2.5s`` in tables, seconds in JSON),
and JSON text (one line for a table, an ASCII document for ``--json``)."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from typing import Any

from goatbeat_celery.core.types.instants import UTC

#: What a table shows for no value.
NONE = "-"


def iso(instant: datetime | None) -> str | None:
    """An instant for JSON: ISO-8601 in UTC, or ``None``."""
    return None if instant is None else instant.astimezone(UTC).isoformat()


def when(instant: datetime | None) -> str:
    """An instant for a table: UTC to the second (milliseconds when there are any)."""
    if instant is None:
        return NONE
    utc = instant.astimezone(UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += f".{utc.microsecond // 1000:03d}"
    return text + "Z"


def seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


def human_seconds(value: float) -> str:
    """``90`` → ``1m30s``, ``0.25`` → ``0.25s``, ``86400`` → ``1d``."""
    if not math.isfinite(value):  # a hand-edited row may hold NaN or infinity
        return f"{value}s"
    if value < 0:
        return "-" + human_seconds(-value)
    whole = int(value)
    fraction = value - whole
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole >= size:
            parts.append(f"{whole // size}{unit}")
            whole %= size
    rest = whole + fraction
    if rest or not parts:
        parts.append(f"{rest:.3f}".rstrip("0").rstrip(".") + "s")
    return "".join(parts)


def human_duration(value: timedelta | None) -> str:
    return NONE if value is None else human_seconds(value.total_seconds())


def relative(instant: datetime | None, now: datetime) -> str:
    """``2026-…Z (in 12s)`` or ``2026-…Z (3s ago)``, measured on the database clock."""
    if instant is None:
        return NONE
    delta = (instant - now).total_seconds()
    hint = f"in {human_seconds(delta)}" if delta >= 0 else f"{human_seconds(-delta)} ago"
    return f"{when(instant)} ({hint})"


def compact_json(value: Any) -> str:
    """``value`` as one line of JSON for a table (``repr`` for what JSON cannot hold)."""
    try:
        return json.dumps(value, separators=(", ", ": "), sort_keys=True, ensure_ascii=False,
                          default=repr)
    except (TypeError, ValueError):  # keys that do not sort, or a value that holds itself
        return repr(value)


def document(value: Any) -> str:
    """A ``--json`` document: the exact data, ASCII only (``\\u202e``, never the character);
    ``repr`` for a value JSON cannot hold (none comes from a store)."""
    return json.dumps(value, indent=2, ensure_ascii=True, default=repr)
