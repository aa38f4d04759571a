"""Cron triggers: 5-field expressions evaluated in an IANA zone, on croniter.

croniter finds the matching *wall-clock* times (it is only ever given naive datetimes); this
module maps them to real instants (:mod:`.wallclock`, shared with recurrence rules), with
:mod:`zoneinfo` and ``fold``, following Vixie cron / cronie across daylight-saving transitions:

* a job is *wildcard* when its minute or hour field starts with ``*`` (``*/15 * * * *``,
  ``0 * * * *``) and *fixed* otherwise (``30 2 * * *``);
* wildcard jobs run at every real instant whose wall time matches: wall times skipped by a
  spring-forward gap do not occur, and wall times repeated by a fall-back overlap run on both
  passes;
* fixed jobs run once per wall-clock match: a match inside a gap runs once, at the first
  instant after the gap; a match inside an overlap runs on its first pass only.

Several matches that land on the same instant (two matches inside one gap) run once.

Day-of-month and day-of-week combine with OR when both are restricted (standard cron; a
stepped field such as ``*/2`` counts as restricted, unlike Vixie cron's "starts with ``*``"
quirk); ``day_or=False`` gives Celery's ``crontab`` semantics, where they combine with AND.
"""

from __future__ import annotations

import difflib
import re
import threading
import zoneinfo
from collections.abc import Mapping
from datetime import datetime, timedelta, tzinfo
from typing import cast

from croniter import CroniterBadDateError, CroniterError, croniter

from goatbeat_celery.core.rules.triggers import LAST_OCCURRENCE, TriggerRegistry
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.instants import JSONValue, ensure_aware
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.spec import TriggerSpec
from goatbeat_celery.wallclock import WallClock

__all__ = ["CronTrigger", "register"]

#: Vixie cron's macros, each standing for a 5-field expression (``@reboot`` has no meaning here).
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
# croniter's hashed (H) and random (R) values: random ones would differ between replicas, and
# hashed ones need an id; offset/jitter on the schedule does this job instead.
_HASHED_OR_RANDOM = re.compile(r"^[hr](\(\d+-\d+\))?(/\d+)?$", re.IGNORECASE)
# Quartz writes the last Friday of the month 5L (croniter: L5); names are written as numbers
# for croniter, which takes L only before a number.
_LAST_DAY_OF_WEEK = re.compile(r"^(?P<day>[0-7]|sun|mon|tue|wed|thu|fri|sat)l$", re.IGNORECASE)
_DAY_NUMBERS = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
_MINUTE = timedelta(minutes=1)
_EXAMPLE_ZONE = "Europe/Paris"
# The field every problem of an expression names.
_CRON = "cron expression"


class CronTrigger:
    """Occurrences of a 5-field cron expression in an IANA time zone.

    Immutable from the outside; the one croniter instance it reuses is guarded by a lock so the
    trigger can be shared between threads.
    """

    kind = "cron"

    def __init__(self, expression: str, timezone: str = "UTC", *, day_or: bool = True) -> None:
        problems: list[Problem] = []
        fields = _parse_fields(expression, problems)
        cron: croniter[datetime] | None = None
        if fields is not None:
            cron = _build_croniter(expression, fields, bool(day_or), problems)
        zone = _load_zone(timezone, problems)
        if not isinstance(day_or, bool):
            problems.append(Problem("day_or", f"expected true or false, got {day_or!r}"))
        if problems or fields is None or zone is None or cron is None:
            raise ConfigurationError(problems, subject="cron trigger")
        self.expression = expression
        self.timezone = timezone
        self.day_or = day_or
        self.zone: tzinfo = zone
        #: Wildcard jobs follow the real clock across DST transitions, fixed ones the wall clock.
        self.wildcard = fields[0].startswith("*") or fields[1].startswith("*")
        self._cron = cron
        self._lock = threading.Lock()
        self._clock = WallClock(zone, self._next_wall, wildcard=self.wildcard, step=_MINUTE)

    # -- construction and storage ----------------------------------------------------------
    @classmethod
    def from_params(cls, params: Mapping[str, JSONValue]) -> CronTrigger:
        """Build from stored parameters ``expression``, ``timezone`` (default UTC), ``day_or``."""
        # The constructor checks types and values, reporting every problem at once.
        return cls(
            cast(str, params.get("expression")),
            cast(str, params.get("timezone", "UTC")),
            day_or=cast(bool, params.get("day_or", True)),
        )

    def to_spec(self) -> TriggerSpec:
        return TriggerSpec(kind=self.kind, params={
            "expression": self.expression, "timezone": self.timezone, "day_or": self.day_or,
        })

    def describe(self) -> str:
        days = "" if self.day_or else " (day-of-month AND day-of-week)"
        return f"cron {self.expression} {self.timezone}{days}"

    def __repr__(self) -> str:
        return (f"CronTrigger({self.expression!r}, {self.timezone!r}, "
                f"day_or={self.day_or!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CronTrigger):
            return NotImplemented
        return self.to_spec() == other.to_spec()

    def __hash__(self) -> int:
        return hash((self.expression, self.timezone, self.day_or))

    # -- occurrences -----------------------------------------------------------------------
    def next_after(self, instant: datetime) -> datetime | None:
        """The first occurrence strictly after ``instant``, in UTC (``None`` if there is none)."""
        instant = ensure_aware(instant, "instant")
        if instant >= LAST_OCCURRENCE:
            return None
        try:
            found = self._next_after(instant)
        except (CroniterBadDateError, OverflowError):
            # No match within croniter's search horizon, or past datetime.max.
            return None
        # No trigger has an occurrence past LAST_OCCURRENCE (so that a shift or a grace added
        # to one never overflows).
        return None if found is None or found > LAST_OCCURRENCE else found

    def _next_after(self, instant: datetime) -> datetime | None:
        return self._clock.next_after(instant)

    def _next_wall(self, after: datetime) -> datetime | None:
        """The first matching wall time strictly after the naive ``after``."""
        start = after.replace(second=0, microsecond=0)
        with self._lock:
            result = self._cron.get_next(datetime, start)
        return result


def register(registry: TriggerRegistry) -> TriggerRegistry:
    """A copy of ``registry`` that also builds ``cron`` triggers."""
    return registry.with_kind("cron", CronTrigger.from_params)


def _parse_fields(expression: object, problems: list[Problem]) -> tuple[str, ...] | None:
    hint = "use 5 fields: minute hour day-of-month month day-of-week, e.g. '30 2 * * *'"
    if not isinstance(expression, str):
        problems.append(Problem(_CRON, f"expected a string, got {expression!r}", hint))
        return None
    text = expression.strip()
    text = MACROS.get(text.lower(), text)
    fields = tuple(text.split())
    if len(fields) != 5:
        extra = " (seconds and years are not supported)" if len(fields) in (6, 7) else ""
        problems.append(Problem(_CRON, f"{expression!r} has {len(fields)} fields{extra}", hint))
        return None
    for name, field in zip(_FIELDS, fields, strict=True):
        if any(_HASHED_OR_RANDOM.match(part) for part in field.split(",")):
            problems.append(Problem(
                _CRON, f"{expression!r}: hashed or random values (H, R) in the {name} field "
                "are not supported", "write the value, or use the schedule's {offset} or {jitter} "
                "to spread schedules", mentions=("offset", "jitter")))
            return None
    if fields[2].lower() == "lw":
        problems.append(Problem(
            _CRON, f"{expression!r}: LW (the last weekday of the month) in the day-of-month "
            "field is not supported", "use L for the last day of the month, or a day of week "
            "such as 5L for the last Friday"))
        return None
    return fields


def _croniter_text(fields: tuple[str, ...]) -> str:
    """The fields as croniter reads them: each ``5L`` or ``friL`` day of week as ``L5``."""
    def croniter_form(part: str) -> str:
        match = _LAST_DAY_OF_WEEK.match(part)
        if match is None:
            return part
        day = match["day"].lower()
        return f"L{_DAY_NUMBERS.get(day, day)}"

    days = ",".join(croniter_form(part) for part in fields[4].split(","))
    return " ".join((*fields[:4], days))


def _build_croniter(expression: str, fields: tuple[str, ...], day_or: bool,
                    problems: list[Problem]) -> croniter[datetime] | None:
    text = _croniter_text(fields)
    try:
        cron = croniter(text, datetime(2000, 1, 1), ret_type=datetime, day_or=day_or)
        cron.get_next(datetime)  # an expression such as '0 0 30 2 *' never matches
    except CroniterBadDateError:
        problems.append(Problem(_CRON, f"{expression!r} never matches a real date",
                                "check the day-of-month against the month (and day_or)"))
        return None
    except (CroniterError, ValueError, TypeError, KeyError) as exc:
        fields_hint = "minute hour day-of-month month day-of-week, e.g. '30 2 * * *'"
        faults = "; ".join(_field_faults(fields))
        problems.append(
            Problem(_CRON, f"{expression!r}: {faults}", f"fields in order: {fields_hint}")
            if faults else
            Problem(_CRON, f"{expression!r} is invalid ({exc})", f"use 5 fields: {fields_hint}"))
        return None
    return cron


#: Each field's numbers, and the names it also takes (numbered from the field's first value).
_FIELD_VALUES: dict[str, tuple[int, int, tuple[str, ...]]] = {
    "minute": (0, 59, ()),
    "hour": (0, 23, ()),
    "day-of-month": (1, 31, ()),
    "month": (1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                      "nov", "dec")),
    "day-of-week": (0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
}


def _field_faults(fields: tuple[str, ...]) -> list[str]:
    """What is wrong with each field croniter refuses, in our words and naming the field.

    croniter decides what is valid (each field is tried alone, the others ``*``); this only
    explains a refusal, so an expression croniter takes is never refused here."""
    faults = []
    for index, (name, field) in enumerate(zip(_FIELDS, fields, strict=True)):
        alone = ["*"] * len(_FIELDS)
        alone[index] = field
        try:
            croniter(_croniter_text(tuple(alone)), datetime(2000, 1, 1), ret_type=datetime)
        except CroniterBadDateError:
            continue  # a valid field that matches no date with the others: not this field
        except (CroniterError, ValueError, TypeError, KeyError):
            faults.append(_field_fault(name, field))
    return faults


def _field_fault(name: str, field: str) -> str:
    low, high, names = _FIELD_VALUES[name]
    allowed = f"{low}-{high}" + (f" or {names[0]}-{names[-1]}" if names else "")
    where = f"{name} field {field!r}"

    def value_in_field(value: str, shown: str) -> str:
        # "minute field '61'" for the whole field, "minute field '1-61': 61" for a part of it
        return where if value == field.lower() else f"{where}: {shown}"

    for part in field.lower().split(","):
        if not part:
            return f"{where} has an empty item (a comma with nothing on one side)"
        values, slash, step = part.partition("/")
        if slash and not (step.isascii() and step.isdigit()):
            return f"{where}: the step {step!r} is not a whole number"
        if slash and not step.strip("0"):
            return f"{where}: the step must be at least 1"
        if name == "day-of-week" and "#" in values:
            values, _, nth = values.partition("#")
            if nth not in ("1", "2", "3", "4", "5"):
                return (f"{where}: #{nth} must be #1 to #5 (the first to fifth such day of the "
                        "month)")
        if name == "day-of-month" and values.endswith("w"):
            if len(field.split(",")) > 1 or "-" in values:
                return (f"{where}: W takes one day (15W: the weekday nearest the 15th), not a "
                        "list or range")
            values = values[:-1]
        if name == "day-of-week" and len(values) > 1 and "l" in (values[0], values[-1]):
            values = values.strip("l")  # 5L (or L5): the last such day of the month
        if values in ("*", "?", "l"):
            continue
        negative = values.startswith("-")
        for value in values.lstrip("-").split("-", 1):
            if value.isascii() and value.isdigit():
                number = "-" + value if negative else value
                negative = False
                # Compared as text first: int() refuses numbers of thousands of digits.
                if len(value.lstrip("0")) > 2 or not low <= int(number) <= high:
                    return f"{value_in_field(number, number)} is out of range {low}-{high}"
            elif value not in names:
                kind = {"month": "a month", "day-of-week": "a day"}.get(name, "a number")
                return f"{value_in_field(value, repr(value))} is not {kind} ({allowed})"
    if name == "day-of-week" and re.search(r"[#l]", field.lower()):
        return (f"{where} mixes a last or nth day (5L, 5#2) with other days, which croniter "
                "cannot combine; write one such day per schedule")
    return (f"{where} is not valid (values {allowed}, ranges such as 1-5, lists such as 1,15, "
            "steps such as */10)")


def zone_problems(name: object, label: str = "timezone") -> list[Problem]:
    """Problems of an IANA zone name (none when it is known)."""
    problems: list[Problem] = []
    _load_zone(name, problems, label)
    return problems


def _load_zone(name: object, problems: list[Problem], label: str = "timezone"
               ) -> zoneinfo.ZoneInfo | None:
    if not isinstance(name, str) or not name.strip():
        problems.append(Problem(
            label, f"expected an IANA zone name such as {_EXAMPLE_ZONE!r}, got {name!r}"))
        return None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        problems.append(Problem(label, f"unknown zone {name!r}",
                                f"use an IANA name such as {_suggest_zone(name)!r}"))
        return None


def _suggest_zone(name: str) -> str:
    """The closest known zone name, so a typo gets its correction in the error message."""
    known = sorted(zoneinfo.available_timezones())
    by_lower = {zone.lower(): zone for zone in known}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[close[0]] if close else _EXAMPLE_ZONE
