"""The memory store's exclusion calendars."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from goatbeat_celery.core.protocols import CalendarStore
from goatbeat_celery.core.rules.calendars import Calendar
from goatbeat_celery.core.types.errors import CalendarInUse, CalendarNotFound, ScheduleConflict
from goatbeat_celery.store.memory.base import MemoryStoreBase


class MemoryCalendars(MemoryStoreBase, CalendarStore):
    """Exclusion calendars and the schedules observing them."""

    def create_calendar(self, calendar: Calendar) -> Calendar:
        with self._lock:
            if calendar.name in self._calendars:
                raise ScheduleConflict.taken("calendar", calendar.name)
            now = self.now()
            stored = replace(calendar, version=1, created_at=now, updated_at=now, damage=())
            self._calendars[calendar.name] = stored
        self.notify()
        return stored

    def replace_calendar(self, calendar: Calendar, *,
                         expected_version: int | None = None) -> Calendar:
        with self._lock:
            current = self.get_calendar(calendar.name)
            if expected_version is not None and current.version != expected_version:
                raise ScheduleConflict.stale("calendar", calendar.name, current.version,
                                             expected_version)
            stored = replace(current, description=calendar.description,
                             dates=calendar.dates, ranges=calendar.ranges,
                             version=current.version + 1, updated_at=self.now(), damage=())
            self._calendars[calendar.name] = stored
        self.notify()
        return stored

    def delete_calendar(self, name: str) -> None:
        with self._lock:
            self.get_calendar(name)
            users = self.schedules_observing(name)
            if users:
                raise CalendarInUse(name, users)
            del self._calendars[name]

    def schedules_observing(self, name: str) -> list[str]:
        with self._lock:
            return [s.name for _, s in sorted(self._schedules.items())
                    if name in s.spec.calendars]

    def get_calendar(self, name: str) -> Calendar:
        with self._lock:
            calendar = self._calendars.get(name)
            if calendar is None:
                raise CalendarNotFound(name)
            return calendar

    def list_calendars(self) -> list[Calendar]:
        with self._lock:
            return [c for _, c in sorted(self._calendars.items())]

    def find_calendars(self, names: Collection[str]) -> dict[str, Calendar]:
        with self._lock:
            return {name: self._calendars[name] for name in names if name in self._calendars}
