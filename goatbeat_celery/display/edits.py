"""Edits refused because the definition changed since the person read it."""

from __future__ import annotations

from collections.abc import Mapping

from goatbeat_celery.core.types.spec import quoted_name
from goatbeat_celery.display.escaping import shown


def field_changes(read: Mapping[str, object], now: Mapping[str, object]) -> list[str]:
    """What differs between the fields a person read (``read``, as the form showed them) and
    the same fields now: ``cron '*/5 * * * *' → '*/10 * * * *'``, in the order of ``now``;
    an empty field reads ``none``."""
    def quoted(value: object) -> str:
        return "none" if value in (None, "") else f"'{shown(str(value))}'"

    return [f"{key} {quoted(read.get(key))} \u2192 {quoted(value)}"
            for key, value in now.items()
            if key in read and str(read.get(key) or "") != str(value or "")]


def changed_since_read(name: str, read: Mapping[str, object],
                       now: Mapping[str, object]) -> str | None:
    """The refusal of an edit made over a definition changed since the person read it, naming
    what changed (None when no field shown differs: then only the version says so)."""
    changes = field_changes(read, now)
    if not changes:
        return None
    return (f"schedule {quoted_name(name)} changed since you read it: {', '.join(changes)}; "
            "read it again and redo your change")
