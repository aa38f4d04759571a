"""Any ``celery.schedules`` class (``solar``, or a user's own) as a goatbeat trigger.

Interval and crontab schedules are converted to native triggers (see :mod:`.config`); every
other schedule class goes through :class:`CelerySchedule`, which asks the schedule itself with
``remaining_estimate``. Its limits: such a schedule lives only in the Celery config of the
process (it cannot be stored as data), so every replica must carry the same config, and its
occurrences are only as stable as the class's own arithmetic.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from goatbeat_celery.core.rules.triggers import LAST_OCCURRENCE, Trigger, TriggerRegistry
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.instants import UTC, JSONValue, ensure_aware
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.spec import TriggerSpec

KIND = "celery"
_STEP = timedelta(microseconds=1)
#: remaining_estimate is allowed to answer "now or earlier" this many times before giving up.
_MAX_NUDGES = 64


class CelerySchedule:
    """A trigger asking a Celery schedule object when it next runs after an instant."""

    kind = KIND

    def __init__(self, name: str, schedule: Any) -> None:
        self.name = name
        self.schedule = schedule

    def to_spec(self) -> TriggerSpec:
        return TriggerSpec(kind=KIND, params={"entry": self.name, "repr": repr(self.schedule)})

    def next_after(self, instant: datetime) -> datetime | None:
        cursor = ensure_aware(instant, "instant")
        if cursor >= LAST_OCCURRENCE:
            return None
        for _ in range(_MAX_NUDGES):
            # remaining_estimate(last) is "time from now until the run after `last`".
            remaining: timedelta = self.schedule.remaining_estimate(cursor)
            now = ensure_aware(_now(self.schedule), "schedule.now()")
            try:
                candidate = (now + remaining).astimezone(UTC)
            except OverflowError:  # past datetime.max: no occurrence
                return None
            if candidate > LAST_OCCURRENCE:
                return None  # no trigger has an occurrence past it
            if candidate > instant:
                return candidate
            try:
                cursor = cursor + max(_STEP, instant - candidate)
            except OverflowError:
                return None
        return None

    def describe(self) -> str:
        return f"celery {self.schedule!r}"


def _now(schedule: Any) -> datetime:
    value = schedule.now()
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value if isinstance(value, datetime) else datetime.now(UTC)


def register(registry: TriggerRegistry, entries: Mapping[str, Any]) -> TriggerRegistry:
    """Add the ``celery`` kind, resolving each stored trigger by its config entry name."""
    table = dict(entries)

    def build(params: Mapping[str, JSONValue]) -> Trigger:
        name = params.get("entry")
        schedule = table.get(str(name))
        if schedule is None:
            raise ConfigurationError(
                [Problem("trigger", f"schedule object of config entry {name!r} is not in this "
                         "replica's beat_schedule", "give every replica the same config")]
            )
        return CelerySchedule(str(name), schedule)

    return registry.with_kind(KIND, build)
