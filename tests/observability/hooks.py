"""Hooks named by dotted path in the configuration tests."""

from __future__ import annotations

from goatbeat_celery.core.loop.observer import OccurrenceRecord

seen: list[OccurrenceRecord] = []
not_callable = 42


def remember(record: OccurrenceRecord) -> None:
    seen.append(record)
