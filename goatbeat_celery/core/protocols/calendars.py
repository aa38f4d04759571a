"""Exclusion calendars (core.rules.calendars)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from goatbeat_celery.core.rules.calendars import Calendar


class CalendarStore(Protocol):
    """Exclusion calendars (core.rules.calendars), and the schedules observing them."""

    def create_calendar(self, calendar: Calendar) -> Calendar:
        """Insert ``calendar`` (its name, description, dates and ranges) with version 1.
        Raises ScheduleConflict if the name exists. Notifies waiting replicas."""
        ...

    def replace_calendar(self, calendar: Calendar, *,
                         expected_version: int | None = None) -> Calendar:
        """Overwrite a calendar's description, dates and ranges, incrementing its version.
        With ``expected_version``, only if the stored version equals it (else
        ScheduleConflict, nothing changed). Raises CalendarNotFound. Notifies waiting
        replicas: a leader reads calendars each time it plans, so the change applies there."""
        ...

    def delete_calendar(self, name: str) -> None:
        """Delete the calendar. Raises CalendarNotFound, and CalendarInUse (nothing deleted)
        while a schedule observes it, the check and the delete in one transaction."""
        ...

    def schedules_observing(self, name: str) -> list[str]:
        """The names of the schedules observing calendar ``name``, in order (none for a
        calendar that does not exist)."""
        ...

    def get_calendar(self, name: str) -> Calendar:
        """The calendar named ``name``. Raises CalendarNotFound. Never fails on what a row
        holds: what cannot be read is named in ``Calendar.damage``."""
        ...

    def list_calendars(self) -> list[Calendar]:
        """Every calendar, by name, read as :meth:`get_calendar` reads them."""
        ...

    def find_calendars(self, names: Collection[str]) -> dict[str, Calendar]:
        """The calendars of ``names`` that exist, by name, in one read (what a leader reads
        per batch of due schedules observing calendars)."""
        ...
