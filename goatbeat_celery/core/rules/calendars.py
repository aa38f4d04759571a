"""Exclusion calendars: named lists of dates and date ranges (holidays, freeze windows) on
which the schedules observing them do not run.

A calendar's dates are *local* dates, read in the zone of each schedule that observes it: a
cron schedule's own zone, and UTC for interval and once schedules (their grid has no zone, and
UTC is the one zone every replica and every face agrees on without reading an app's settings).
An occurrence is excluded when the local date of its *due* instant (after its offset or jitter)
falls on an excluded date or inside an excluded range (both ends included).

The leader records an excluded occurrence ``skipped`` with the reason ``excluded by calendar
<name>``, never sends it, and moves the schedule on; previews
(:func:`~goatbeat_celery.core.rules.controls.upcoming_runs`) step over it the same way. The rules
are written once here and used by the engine, the API and the stores.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from goatbeat_celery.core.rules import validation
from goatbeat_celery.core.rules.validation import (
    MAX_CALENDARS,
    calendar_name_problems,
    calendars_problems,
)
from goatbeat_celery.core.types.claims import PlannedClaim
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.instants import JSONValue
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.spec import ScheduleSpec

#: The most dates and ranges one calendar holds.
MAX_ENTRIES = 1_000
#: A preview steps over at most this many excluded occurrences before it stops looking.
MAX_SCAN = 100_000

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_UTC = timezone.utc
_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True, kw_only=True)
class Calendar:
    """A named calendar: excluded ``dates`` and inclusive ``ranges`` of ``(first, last)``.

    ``version`` grows with each edit; ``damage`` names what of a stored row could not be read
    (a schedule observing a damaged calendar is set aside, never run on a guess)."""

    name: str
    dates: tuple[date, ...] = ()
    ranges: tuple[tuple[date, date], ...] = ()
    description: str | None = None
    version: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None
    damage: tuple[Problem, ...] = ()

    def excludes(self, day: date) -> bool:
        """Whether ``day`` is one of the dates or inside one of the ranges."""
        return day in self.dates or any(first <= day <= last for first, last in self.ranges)

    def entries(self) -> list[JSONValue]:
        """The dates and ranges as stored: ``"YYYY-MM-DD"`` and ``{"from": …, "to": …}``,
        dates first, each in order."""
        found: list[JSONValue] = [day.isoformat() for day in sorted(self.dates)]
        found.extend({"from": first.isoformat(), "to": last.isoformat()}
                     for first, last in sorted(self.ranges))
        return found

    def problems(self) -> list[Problem]:
        """Every problem of this calendar, each naming its field."""
        found = validation.calendar_name_problems(self.name)
        if self.description is not None:
            problem = validation.description_problem(self.description)
            found.extend([] if problem is None else [problem])
        count = len(self.dates) + len(self.ranges)
        if count > MAX_ENTRIES:
            found.append(Problem("entries", f"{count} dates and ranges",
                                 f"at most {MAX_ENTRIES} are allowed (merge consecutive dates "
                                 "into ranges)"))
        for first, last in self.ranges:
            if last < first:
                found.append(Problem("ranges", f"{first.isoformat()}..{last.isoformat()} ends "
                                     "before it starts", "give the earlier date first"))
        return [problem.about(f"calendar {self.name!r}") for problem in found]


def parse_day(value: object, label: str, problems: list[Problem]) -> date | None:
    """A ``YYYY-MM-DD`` date (a ``date`` is taken as is), or None with the problem noted."""
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    if isinstance(value, str) and _DAY.fullmatch(value):
        try:
            return date.fromisoformat(value)
        except ValueError:
            pass
    problems.append(Problem(label, f"{validation.shown_value(value)} is not a date",
                            "give YYYY-MM-DD, e.g. 2026-12-24"))
    return None


def parse_range(value: object, label: str, problems: list[Problem]
                ) -> tuple[date, date] | None:
    """A range from ``{"from": d, "to": d}``, a ``(first, last)`` pair or ``"d..d"`` text."""
    ends: Sequence[object]
    if isinstance(value, Mapping) and set(value) == {"from", "to"}:
        ends = (value["from"], value["to"])
    elif isinstance(value, str) and value.count("..") == 1:
        ends = value.split("..")
    elif isinstance(value, (list, tuple)) and len(value) == 2:
        ends = value
    else:
        problems.append(Problem(label, f"{validation.shown_value(value)} is not a range",
                                "give {'from': '2026-12-24', 'to': '2027-01-02'} or "
                                "2026-12-24..2027-01-02"))
        return None
    first = parse_day(ends[0], label, problems)
    last = parse_day(ends[1], label, problems)
    if first is None or last is None:
        return None
    return first, last


def calendar_of(name: str, dates: object, ranges: object, description: str | None
                ) -> Calendar:
    """A calendar of ``dates`` and ``ranges`` as a caller gives them (lists of what
    :func:`parse_day` and :func:`parse_range` read, or one of each given bare), or
    ConfigurationError listing every problem."""
    problems: list[Problem] = []
    found_dates: list[date] = []
    found_ranges: list[tuple[date, date]] = []
    for value in _given(dates, "dates", (str, date), problems):
        day = parse_day(value, "dates", problems)
        if day is not None:
            found_dates.append(day)
    for given in _given(ranges, "ranges", (str, Mapping), problems):
        span = parse_range(given, "ranges", problems)
        if span is not None:
            found_ranges.append(span)
    # Each date and range once, in order: the stored list reads the same however given.
    calendar = Calendar(name=name, dates=tuple(sorted(set(found_dates))),
                        ranges=tuple(sorted(set(found_ranges))), description=description)
    problems = [*(p.about(f"calendar {name!r}") for p in problems), *calendar.problems()]
    if problems:
        raise ConfigurationError(problems, subject=f"calendar {name!r}")
    return calendar


def _given(values: object, label: str, bare: tuple[type, ...], problems: list[Problem]
           ) -> list[object]:
    """The items of ``values``: a list (or another iterable), or one item given bare (of a
    ``bare`` type); a problem for anything else (a number, an object of dates)."""
    if isinstance(values, bare):
        return [values]
    if isinstance(values, Iterable) and not isinstance(values, (Mapping, str, bytes)):
        return list(values)
    problems.append(Problem(label, f"expected a list, got {validation.shown_value(values)}",
                            "give e.g. ['2026-12-24']" if label == "dates" else
                            "give e.g. ['2026-12-24..2027-01-02']"))
    return []


def parse_entries(entries: object, label: str = "entries"
                  ) -> tuple[tuple[date, ...], tuple[tuple[date, date], ...], list[Problem]]:
    """The dates and ranges of a stored ``entries`` JSON list, and its problems."""
    problems: list[Problem] = []
    if not isinstance(entries, list):
        return (), (), [Problem(label, "expected a JSON list of dates and ranges, found "
                                f"{validation.shown_value(entries)}")]
    dates: list[date] = []
    ranges: list[tuple[date, date]] = []
    for entry in entries:
        if isinstance(entry, str) and ".." not in entry:
            day = parse_day(entry, label, problems)
            if day is not None:
                dates.append(day)
        else:
            found = parse_range(entry, label, problems)
            if found is not None:
                ranges.append(found)
    return tuple(dates), tuple(ranges), problems


def calendar_zone(spec: ScheduleSpec) -> tzinfo:
    """The zone in which a schedule's calendars are read: its trigger's ``timezone`` (cron),
    else UTC. Raises ConfigurationError for a zone that does not exist."""
    name = spec.trigger.params.get("timezone")
    if not isinstance(name, str) or name in ("", "UTC"):
        return _UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigurationError([Problem("timezone", f"unknown zone {name!r}")],
                                 subject="schedule") from exc


def local_day(instant: datetime, zone: tzinfo) -> date:
    """The date an aware ``instant`` falls on in ``zone``."""
    return instant.astimezone(zone).date()


class Exclusions:
    """The calendars one schedule observes, resolved: which due instants they exclude.

    Each calendar's dates are kept in a set and its ranges merged and sorted, so that judging
    one instant costs a lookup and a bisection whatever the calendar holds (a preview may judge
    many)."""

    def __init__(self, calendars: Sequence[Calendar], zone: tzinfo) -> None:
        self.calendars = tuple(calendars)
        self.zone = zone
        self._index = [(f"excluded by calendar {c.name}", frozenset(c.dates), *_merged(c.ranges))
                       for c in self.calendars]

    def reason(self, due: datetime) -> str | None:
        """``excluded by calendar <name>`` (the first of the schedule's calendars to exclude
        the due instant's local date), or None when it runs."""
        day = local_day(due, self.zone)
        for reason, dates, firsts, lasts in self._index:
            if day in dates:
                return reason
            at = bisect_right(firsts, day) - 1
            if at >= 0 and day <= lasts[at]:
                return reason
        return None

    def next_day(self, due: datetime) -> datetime:
        """The first instant of the local day after ``due``'s (later than ``due``)."""
        day = local_day(due, self.zone) + timedelta(days=1)
        start = datetime.combine(day, time(0), tzinfo=self.zone).astimezone(_UTC)
        return start if start > due else due + _MICROSECOND

    def exclude(self, claim: PlannedClaim) -> PlannedClaim:
        """``claim`` with its excluded occurrences named in ``excluded`` (the claim records
        them ``skipped`` with the reason)."""
        # An occurrence skipped already (given up by the misfire rule) keeps its reason.
        already = {point for point, _ in claim.excluded}
        excluded = tuple((point, reason) for point, due in claim.occurrences
                         if point not in already and (reason := self.reason(due)) is not None)
        return replace(claim, excluded=claim.excluded + excluded) if excluded else claim


def _merged(ranges: Sequence[tuple[date, date]]) -> tuple[list[date], list[date]]:
    """``ranges`` merged where they overlap or touch, as sorted first and last dates."""
    firsts: list[date] = []
    lasts: list[date] = []
    for first, last in sorted(r for r in ranges if r[0] <= r[1]):
        if lasts and first <= lasts[-1] + timedelta(days=1):
            lasts[-1] = max(lasts[-1], last)
        else:
            firsts.append(first)
            lasts.append(last)
    return firsts, lasts


def resolve(spec: ScheduleSpec, found: Mapping[str, Calendar | None]) -> Exclusions:
    """The exclusions of a schedule from the calendars ``found`` by name (None or absent: no
    such calendar). Raises ConfigurationError naming each calendar missing or unreadable:
    the schedule is set aside rather than run on the days it should not."""
    problems: list[Problem] = []
    calendars: list[Calendar] = []
    for name in spec.calendars:
        calendar = found.get(name)
        if calendar is None:
            problems.append(Problem("calendars", f"no calendar named {name!r}",
                                    "create it or remove it from the schedule"))
        elif calendar.damage:
            problems.append(Problem("calendars", f"calendar {name!r} cannot be read: "
                                    + "; ".join(str(damage) for damage in calendar.damage)))
        else:
            calendars.append(calendar)
    if problems:
        raise ConfigurationError(problems, subject="schedule")
    return Exclusions(calendars, calendar_zone(spec))


def calendar_from_row(values: Mapping[str, Any]) -> Calendar:
    """A :class:`Calendar` from a stored row's columns (``name``, ``description``,
    ``entries``, ``version``, ``created_at``, ``updated_at``), what cannot be read named in
    its ``damage``."""
    damage: list[Problem] = []
    dates, ranges, problems = parse_entries(values["entries"])
    damage.extend(problems)
    description = validation.stored_value(values["description"], str, None, "description",
                                          damage)
    version = validation.stored_value(values["version"], int, -1, "version", damage,
                                      required=True)
    return Calendar(name=str(values["name"]), dates=dates, ranges=ranges,
                    description=description, version=version,
                    created_at=values["created_at"], updated_at=values["updated_at"],
                    damage=tuple(damage))


__all__ = ["MAX_CALENDARS", "MAX_ENTRIES", "MAX_SCAN", "Calendar", "Exclusions",
           "calendar_from_row", "calendar_name_problems", "calendar_zone",
           "calendars_problems", "local_day", "parse_day", "parse_entries",
           "parse_range", "resolve"]
