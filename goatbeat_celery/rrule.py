"""Recurrence-rule triggers: RFC 5545 ``RRULE`` text evaluated in an IANA zone, on dateutil.

The stored rule is the text an iCalendar tool writes, ``DTSTART`` included::

    DTSTART;TZID=Europe/Paris:20260105T090000
    RRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=TU
    EXDATE;TZID=Europe/Paris:20260217T090000

Its date-times are wall times of the schedule's zone: a ``TZID`` must name that zone, and a
UTC value (``…Z``, as ``UNTIL`` is written by RFC 5545 tools) is read as the wall time it
shows in that zone. dateutil finds the matching wall times (it is only given naive ones);
:mod:`.wallclock` maps them to instants with the rules cron follows across daylight-saving
transitions. A rule whose minute or hour runs over the clock (``FREQ`` of ``MINUTELY`` or
``SECONDLY`` without ``BYMINUTE``, or of ``HOURLY``/``MINUTELY``/``SECONDLY`` without
``BYHOUR``) is a *wildcard* job, the rest are *fixed* ones.
"""

from __future__ import annotations

import re
import threading
import zoneinfo
from collections.abc import Mapping
from datetime import datetime, timedelta, tzinfo
from typing import Any

from dateutil import rrule as du

from goatbeat_celery.core.rules.triggers import LAST_OCCURRENCE, TriggerRegistry
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.instants import JSONValue, ensure_aware
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.spec import TriggerSpec
from goatbeat_celery.cron import zone_problems
from goatbeat_celery.wallclock import WallClock

__all__ = ["RRuleTrigger", "register", "with_start"]

KIND = "rrule"
_SECOND = timedelta(seconds=1)
_PROPERTIES = ("DTSTART", "RRULE", "RDATE", "EXRULE", "EXDATE")
_UTC_VALUE = re.compile(r"(\d{8}T\d{6})Z")
_TZID = re.compile(r";TZID=([^;:]+)", re.IGNORECASE)
_HINT = ("write RFC 5545 text such as 'DTSTART;TZID=Europe/Paris:20260105T090000\\n"
         "RRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=TU'")
#: Frequencies whose period is a fixed count of wall-clock seconds (weeks keep their weekday):
#: a rule of one of these, without COUNT, can start again from a later point of its own grid.
_PERIOD = {du.WEEKLY: timedelta(weeks=1), du.DAILY: timedelta(days=1),
           du.HOURLY: timedelta(hours=1), du.MINUTELY: timedelta(minutes=1),
           du.SECONDLY: timedelta(seconds=1)}


class RRuleTrigger:
    """Occurrences of an RFC 5545 recurrence rule (with ``EXDATE``/``RDATE``) in a zone.

    Immutable from the outside; safe to share between threads.
    """

    kind = KIND

    def __init__(self, rule: str, timezone: str = "UTC") -> None:
        problems: list[Problem] = list(zone_problems(timezone))
        zone = None if problems else zoneinfo.ZoneInfo(timezone)
        parsed = _parse(rule, None if zone is None else timezone, problems)
        if problems or parsed is None or zone is None:
            raise ConfigurationError(problems, subject="rrule trigger")
        self.rule = rule
        self.timezone = timezone
        self.zone: tzinfo = zone
        self._set = parsed
        rules: list[du.rrule] = list(getattr(parsed, "_rrule", []))
        self.wildcard = any(_wildcard(one) for one in rules)
        self._lock = threading.Lock()
        self._clock = WallClock(zone, self._next_wall, wildcard=self.wildcard, step=_SECOND)

    @classmethod
    def from_params(cls, params: Mapping[str, JSONValue]) -> RRuleTrigger:
        """Build from stored parameters ``rule`` and ``timezone`` (default UTC)."""
        rule: Any = params.get("rule")
        timezone: Any = params.get("timezone", "UTC")
        return cls(rule, timezone)

    def to_spec(self) -> TriggerSpec:
        return TriggerSpec(kind=KIND, params={"rule": self.rule, "timezone": self.timezone})

    def describe(self) -> str:
        return f"rrule {' '.join(self.rule.split())} {self.timezone}"

    def __repr__(self) -> str:
        return f"RRuleTrigger({self.rule!r}, {self.timezone!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RRuleTrigger):
            return NotImplemented
        return (self.rule, self.timezone) == (other.rule, other.timezone)

    def __hash__(self) -> int:
        return hash((self.rule, self.timezone))

    def next_after(self, instant: datetime) -> datetime | None:
        """The first occurrence strictly after ``instant``, in UTC (``None`` if there is none)."""
        instant = ensure_aware(instant, "instant")
        if instant >= LAST_OCCURRENCE:
            return None
        try:
            found = self._clock.next_after(instant)
        except OverflowError:  # past datetime.max
            return None
        return None if found is None or found > LAST_OCCURRENCE else found

    def _next_wall(self, after: datetime) -> datetime | None:
        """The first matching wall time strictly after the naive ``after``."""
        with self._lock:
            found: datetime | None = _from(self._set, after).after(after, inc=False)
        return found


def register(registry: TriggerRegistry) -> TriggerRegistry:
    """A copy of ``registry`` that also builds ``rrule`` triggers."""
    return registry.with_kind(KIND, RRuleTrigger.from_params)


def with_start(rule: str, timezone: str, now: datetime) -> str:
    """``rule`` with a ``DTSTART`` when it has none: midnight of ``now``'s day in ``timezone``,
    so that every replica counts the rule from the same start. Text that is not a string, or
    an unknown zone, is returned as it is (the trigger reports it)."""
    if not isinstance(rule, str) or zone_problems(timezone):
        return rule
    lines = _lines(rule)
    if any(line.upper().startswith("DTSTART") for line in lines):
        return rule
    day = ensure_aware(now, "now").astimezone(zoneinfo.ZoneInfo(timezone))
    start = f"DTSTART;TZID={timezone}:{day:%Y%m%d}T000000"
    return "\n".join((start, *lines))


def _lines(rule: str) -> list[str]:
    """One property a line, ``RRULE:`` written before a bare ``FREQ=…``."""
    lines = rule.split()
    return [line if ":" in line else f"RRULE:{line}" for line in lines]


def _parse(rule: object, timezone: str | None, problems: list[Problem]) -> du.rruleset | None:
    if not isinstance(rule, str) or not rule.strip():
        problems.append(Problem("rule", f"expected RFC 5545 text, got {rule!r}", _HINT))
        return None
    found: list[Problem] = []
    lines = _lines(rule)
    names = [re.split(r"[;:]", line, maxsplit=1)[0].upper() for line in lines]
    for line, name in zip(lines, names, strict=True):
        if name not in _PROPERTIES:
            found.append(Problem("rule", f"unknown property {name!r} in {line!r}",
                                 f"use {', '.join(_PROPERTIES)}"))
        for zone in _TZID.findall(line):
            if timezone is not None and zone != timezone:
                found.append(Problem("rule", f"{name}'s TZID {zone!r} is not the schedule's "
                                     f"zone {timezone!r}",
                                     f"write it in {timezone}, or give timezone={zone!r}"))
    starts = names.count("DTSTART")
    if starts != 1:
        found.append(Problem("rule", "DTSTART missing" if not starts else "more than one "
                             "DTSTART", "give one DTSTART line, the rule's first occurrence "
                             "(e.g. DTSTART;TZID=Europe/Paris:20260105T090000)"))
    rules = [line.split(":", 1)[1].upper() for line, name in zip(lines, names, strict=True)
             if name in ("RRULE", "EXRULE")]
    if names.count("RRULE") == 0 and names.count("RDATE") == 0:
        found.append(Problem("rule", "FREQ missing: no RRULE line", _HINT))
    for text in rules:
        parts = {part.partition("=")[0] for part in text.split(";")}
        if "FREQ" not in parts:
            found.append(Problem("rule", f"FREQ missing in {text!r}",
                                 "give FREQ=YEARLY, MONTHLY, WEEKLY, DAILY, HOURLY, MINUTELY "
                                 "or SECONDLY"))
        if {"COUNT", "UNTIL"} <= parts:
            found.append(Problem("rule", f"COUNT and UNTIL both in {text!r}",
                                 "RFC 5545 allows one of them: remove either"))
    problems.extend(found)
    if found:
        return None
    # With an unknown zone (reported already), the rule's text is still judged.
    zone = zoneinfo.ZoneInfo(timezone or "UTC")

    def wall(match: re.Match[str]) -> str:
        # A UTC value, as the wall time it shows in the schedule's zone.
        instant = datetime.strptime(match[1], "%Y%m%dT%H%M%S").replace(tzinfo=zoneinfo.ZoneInfo(
            "UTC"))
        return f"{instant.astimezone(zone):%Y%m%dT%H%M%S}"

    text = "\n".join(_UTC_VALUE.sub(wall, _TZID.sub("", line)) for line in lines)
    try:
        parsed = du.rrulestr(text, forceset=True, ignoretz=True)
    except (ValueError, TypeError, KeyError, IndexError, OverflowError) as exc:
        problems.append(Problem("rule", f"cannot read {rule!r} ({exc})", _HINT))
        return None
    assert isinstance(parsed, du.rruleset)
    return parsed


def _wildcard(rule: du.rrule) -> bool:
    """Whether the rule's minute or hour runs over the clock (cron's ``*`` fields)."""
    original: dict[str, Any] = getattr(rule, "_original_rule", {})
    freq: int = rule._freq
    minute_free = freq in (du.MINUTELY, du.SECONDLY) and not original.get("byminute")
    hour_free = freq in (du.HOURLY, du.MINUTELY, du.SECONDLY) and not original.get("byhour")
    return minute_free or hour_free


def _from(rules: du.rruleset, after: datetime) -> du.rruleset:
    """``rules`` with each rule that can started again at the last point of its own grid at or
    before ``after``: dateutil walks a rule from its start, and a minutely rule asked about a
    year after its start would walk half a million points."""
    own: list[du.rrule] = rules._rrule
    if rules._exrule:
        return rules
    moved = du.rruleset()
    for rule in own:
        moved.rrule(_rebased(rule, after))
    for date in rules._rdate:
        moved.rdate(date)
    for date in rules._exdate:
        moved.exdate(date)
    return moved


def _rebased(rule: du.rrule, after: datetime) -> du.rrule:
    period = _PERIOD.get(rule._freq)
    start: datetime = rule._dtstart
    if period is None or rule._count or after <= start:
        return rule
    # Whole periods of the rule's interval keep the time of day and the weekday dateutil
    # takes its defaults from, and keep every later occurrence on the grid.
    step = period * int(rule._interval)
    later = start + ((after - start) // step) * step
    return rule.replace(dtstart=later) if later > start else rule
