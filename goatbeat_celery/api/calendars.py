"""Exclusion calendars: the dates the schedules observing one do not run on."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from typing import Any

from goatbeat_celery.api.arguments import _calendar_name
from goatbeat_celery.api.base import SchedulesBase
from goatbeat_celery.api.preconditions import _check_version
from goatbeat_celery.core.rules.calendars import Calendar, calendar_of
from goatbeat_celery.core.rules.validation import calendar_name_problems, nul_problem
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.problems import Problem

#: The default of an argument that may be given as None (a description removed).
_UNSET: Any = object()


class CalendarMethods(SchedulesBase):
    """The exclusion calendars."""

    def get_calendar(self, name: str) -> Calendar:
        return self.store.get_calendar(_calendar_name(name))

    def observing(self, calendar: str) -> list[str]:
        """The names of the schedules observing ``calendar`` (CalendarNotFound for a typo)."""
        self.store.get_calendar(_calendar_name(calendar))
        return self.store.schedules_observing(calendar)

    def find_calendars(self, names: Iterable[str]) -> dict[str, Calendar]:
        """The calendars of ``names`` that exist, by name, in one read (none for a name no
        calendar can have); ConfigurationError for a name that is not a string."""
        wanted = tuple(names)
        problems = [problem for name in wanted if not isinstance(name, str)
                    for problem in calendar_name_problems(name)]
        if problems:
            raise ConfigurationError(problems, subject="calendar names")
        # A NUL is in no stored name, and a database refuses to compare with one.
        return self.store.find_calendars([n for n in wanted if nul_problem(n, "name") is None])

    def list_calendars(self) -> list[Calendar]:
        """Every calendar, by name."""
        return self.store.list_calendars()

    def create_calendar(self, name: str, *, dates: Iterable[date | str] = (),
                        ranges: Iterable[object] = (),
                        description: str | None = None) -> Calendar:
        """Store a new calendar of excluded ``dates`` (``date`` objects or ``"YYYY-MM-DD"``)
        and ``ranges`` (``(first, last)`` pairs, ``{"from": …, "to": …}`` or
        ``"YYYY-MM-DD..YYYY-MM-DD"``, both ends included): the schedules observing it do not
        run on those dates, read in each schedule's zone (``docs/controls.md``). Every problem
        is reported at once and nothing is stored."""
        calendar = calendar_of(name, dates, ranges, description)
        return self.store.create_calendar(calendar)

    def update_calendar(self, name: str, *, dates: Iterable[date | str] | None = None,
                        ranges: Iterable[object] | None = None,
                        description: str | None = _UNSET,
                        expected_version: int | None = None) -> Calendar:
        """Replace a calendar's ``dates``, ``ranges`` or ``description`` (those given). The
        leader reads calendars each time it plans, so the change applies at its next planning.
        A compare-and-set on the version read here, or on ``expected_version``."""
        current = self.store.get_calendar(_calendar_name(name))
        _check_version(f"calendar {name!r}", current.version, expected_version)
        if current.damage and (dates is None or ranges is None):
            raise ConfigurationError(
                [*current.damage, Problem("", f"calendar {name!r} cannot be read as stored",
                                          "give both dates and ranges anew, or delete it")],
                subject=f"calendar {name!r}")
        calendar = calendar_of(
            name, current.dates if dates is None else dates,
            current.ranges if ranges is None else ranges,
            current.description if description is _UNSET else description)
        if (not current.damage and calendar.entries() == current.entries()
                and calendar.description == current.description):
            return current
        return self.store.replace_calendar(calendar, expected_version=current.version)

    def delete_calendar(self, name: str) -> None:
        """Delete a calendar. Refused (CalendarInUse, naming them) while schedules observe it:
        removing it from them first is a decision about their runs, not a side effect."""
        self.store.delete_calendar(_calendar_name(name))
