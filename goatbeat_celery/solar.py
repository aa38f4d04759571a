"""Solar triggers: Celery's ``solar`` schedule (sunrise, dusk… at a place), stored as data.

The occurrences are those ``celery.schedules.solar(event, latitude, longitude)`` computes, with
the same ephem observer (horizon, no refraction, the sun's centre or its edge) and the same
answer for days the event does not happen at high latitudes (polar day or night): the search
goes on from the next anti-transit, day after day, for at most
:data:`MAX_SEARCH_DAYS` days; when the event does not come within them, Celery answers the
instant its search stopped (where it looks again), and so does this trigger.

Needs the ``ephem`` package (``pip install celery-goatbeat[solar]``, as Celery's own
``celery[solar]``); without it, a solar trigger is refused with that advice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from types import ModuleType
from typing import Any

from goatbeat_celery.core.rules.triggers import LAST_OCCURRENCE, TriggerRegistry
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.instants import UTC, JSONValue, ensure_aware
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.spec import TriggerSpec

__all__ = ["EVENTS", "SolarTrigger", "register"]

KIND = "solar"
#: Each event: (the sun's altitude at it, ephem's method, whether the sun's centre counts).
EVENTS: dict[str, tuple[str, str, bool]] = {
    "dawn_astronomical": ("-18", "next_rising", True),
    "dawn_nautical": ("-12", "next_rising", True),
    "dawn_civil": ("-6", "next_rising", True),
    "sunrise": ("-0:34", "next_rising", False),
    "solar_noon": ("0", "next_transit", False),
    "sunset": ("-0:34", "next_setting", False),
    "dusk_civil": ("-6", "next_setting", True),
    "dusk_nautical": ("-12", "next_setting", True),
    "dusk_astronomical": ("-18", "next_setting", True),
}
#: Celery's ``solar.max_search_days``.
MAX_SEARCH_DAYS = 366
_STEP = timedelta(microseconds=1)
#: ephem's dates are floats of days: an answer rounded to the instant asked about is asked
#: again a little later, this many times at most (as for any Celery schedule).
_MAX_NUDGES = 64
_NO_EPHEM = ("needs the ephem package, as Celery's solar schedule does: "
             "pip install 'celery-goatbeat[solar]'")


class SolarTrigger:
    """Occurrences of a solar event at a latitude and longitude (degrees, north and east)."""

    kind = KIND

    def __init__(self, event: str, latitude: float, longitude: float) -> None:
        problems = solar_problems(event, latitude, longitude)
        ephem = _ephem()
        if ephem is None:
            problems.append(Problem("solar", _NO_EPHEM))
        if problems or ephem is None:
            raise ConfigurationError(problems, subject="solar trigger")
        self.event = event
        self.latitude = latitude
        self.longitude = longitude
        self._ephem = ephem

    @classmethod
    def from_params(cls, params: Mapping[str, JSONValue]) -> SolarTrigger:
        """Build from stored parameters ``event``, ``latitude`` and ``longitude``."""
        event: Any = params.get("event")
        latitude: Any = params.get("latitude")
        longitude: Any = params.get("longitude")
        return cls(event, latitude, longitude)

    def to_spec(self) -> TriggerSpec:
        return TriggerSpec(kind=KIND, params={
            "event": self.event, "latitude": self.latitude, "longitude": self.longitude})

    def describe(self) -> str:
        return f"solar {self.event} at latitude {self.latitude}, longitude {self.longitude}"

    def __repr__(self) -> str:
        return f"SolarTrigger({self.event!r}, {self.latitude!r}, {self.longitude!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SolarTrigger):
            return NotImplemented
        return self.to_spec() == other.to_spec()

    def __hash__(self) -> int:
        return hash((self.event, self.latitude, self.longitude))

    def next_after(self, instant: datetime) -> datetime | None:
        """The first occurrence strictly after ``instant``, in UTC (``None`` past the last
        instant any trigger has)."""
        instant = ensure_aware(instant, "instant").astimezone(UTC)
        cursor = instant
        for _ in range(_MAX_NUDGES):
            if cursor >= LAST_OCCURRENCE:
                return None
            found = self._next_event(cursor)
            if found > LAST_OCCURRENCE:
                return None
            if found > instant:
                return found
            cursor = cursor + max(_STEP, instant - found)
        return None

    def _next_event(self, start: datetime) -> datetime:
        """Celery's ``solar._next_event`` from ``start``: ephem's answer, in UTC."""
        ephem = self._ephem
        horizon, method, use_center = EVENTS[self.event]
        # A new observer a call: ephem's are mutable, and the trigger is shared.
        observer = ephem.Observer()
        observer.lat = str(self.latitude)
        observer.lon = str(self.longitude)
        observer.elev = 0
        observer.horizon = horizon
        observer.pressure = 0
        when = start.replace(tzinfo=None)
        observer.date = when
        sun = ephem.Sun()
        options = {"use_center": True} if use_center else {}
        moment = ephem.Date(when)
        for _ in range(MAX_SEARCH_DAYS):
            try:
                moment = getattr(observer, method)(sun, start=moment, **options)
                break
            except ephem.CircumpolarError:
                moment = observer.next_antitransit(sun, start=moment)
        answer: datetime = moment.datetime()
        return answer.replace(tzinfo=UTC)


def solar_problems(event: object, latitude: object, longitude: object,
                   label: str = "") -> list[Problem]:
    """Every problem of a solar trigger's parameters, each naming its field."""
    found: list[Problem] = []
    if event not in EVENTS:
        found.append(Problem(f"{label}event", f"unknown solar event {event!r}",
                             f"use one of: {', '.join(sorted(EVENTS))}"))
    for name, value, bound, sides in (("latitude", latitude, 90, "south to north"),
                                      ("longitude", longitude, 180, "west to east")):
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value):
            found.append(Problem(f"{label}{name}", f"expected a number of degrees, got "
                                 f"{value!r}", f"-{bound} to {bound}, {sides}"))
        elif not -bound <= value <= bound:
            found.append(Problem(f"{label}{name}", f"{value:g} is out of range "
                                 f"-{bound} to {bound}", f"degrees, {sides}"))
    return found


def _ephem() -> ModuleType | None:
    try:
        import ephem  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return None
    module: ModuleType = ephem
    return module


def register(registry: TriggerRegistry) -> TriggerRegistry:
    """A copy of ``registry`` that also builds ``solar`` triggers (refused, with the advice to
    install ephem, where it is missing)."""
    return registry.with_kind(KIND, SolarTrigger.from_params)
