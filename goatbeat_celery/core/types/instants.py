"""Instants and durations: every instant an aware :class:`~datetime.datetime` in UTC (a naive one
is refused with :class:`~goatbeat_celery.core.types.errors.ConfigurationError` wherever it
enters), every duration given as seconds, :class:`~datetime.timedelta` or text with units."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any, Union

from goatbeat_celery.core.types import validation
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.problems import Problem

UTC = timezone.utc

#: Durations are given as seconds or as :class:`~datetime.timedelta`.
Duration = Union[float, int, timedelta]

JSONValue = Any


def ensure_aware(value: datetime, name: str) -> datetime:
    """Return ``value`` in UTC, refusing naive datetimes with an error naming ``name``."""
    if type(value) is datetime and value.tzinfo is UTC:
        return value  # what astimezone(UTC) returns for it; the common case, once per claim
    if not isinstance(value, datetime):
        raise ConfigurationError([Problem(name,
                                          f"expected a datetime, got {type(value).__name__}")])
    if value.tzinfo is None or value.utcoffset() is None:
        raise ConfigurationError(
            [Problem(name, f"naive datetime {value.isoformat()} refused",
                     "attach a zone (e.g. datetime(..., tzinfo=timezone.utc))")]
        )
    try:
        return value.astimezone(UTC)
    except OverflowError as exc:
        raise ConfigurationError(
            [Problem(name, f"{value.isoformat()} is outside the years a datetime holds in UTC")]
        ) from exc


def check_aware(*values: datetime | None, name: str = "instant") -> None:
    """Refuse any naive datetime among ``values`` (``None`` passes)."""
    for value in values:
        # The cheap test first: stores run this for every instant of every claim.
        if value is not None and (not isinstance(value, datetime) or value.tzinfo is None
                                  or value.utcoffset() is None):
            ensure_aware(value, name)


#: The ways a duration may be written, as error messages list them.
DURATION_FORMS = "seconds (60, 0.5) or amounts with units d, h, m, s (90s, 1m, 1h30m, 2d, 1.5h)"
_DURATION_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


class DurationError(ValueError):
    """Why a duration is refused, as a problem says it: ``message`` and the ``hint`` that fixes
    it (``""`` when the message says it); ``str()`` gives both, as ``"<message>; <hint>"``."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(f"{message}; {hint}" if hint else message)
        self.message = message
        self.hint = hint


def parse_duration(text: str) -> float:
    """Seconds from a duration as the CLI prints it or a user types it: plain seconds (``60``,
    ``0.5``) or amounts with units, largest first (``90s``, ``1m``, ``1h30m``, ``2d``,
    ``1.5h``). ValueError (a :class:`DurationError`) says why ``text`` is refused: unreadable,
    not finite, or negative."""
    stripped = text.strip()
    try:
        seconds = float(stripped)  # plain seconds, as always accepted
    except ValueError:
        seconds = _seconds_with_units(stripped, text)
    if not math.isfinite(seconds):
        raise DurationError(f"must be a finite duration, got {text!r}")
    if seconds < 0:
        raise DurationError(f"must not be negative, got {text!r}")
    return seconds


def _seconds_with_units(text: str, given: str) -> float:
    unreadable = DurationError(f"cannot read {given!r} as a duration", f"give {DURATION_FORMS}")
    sign, rest = (-1.0, text[1:]) if text.startswith("-") else (1.0, text)
    total, found = 0.0, False
    for unit, size in _DURATION_UNITS:
        amount, has_unit, after = rest.partition(unit)
        if not has_unit:
            continue
        amount = amount.strip()
        if not (amount.isascii() and amount.replace(".", "", 1).isdigit()):
            raise unreadable
        total, found, rest = total + float(amount) * size, True, after
    if not found or rest.strip():
        raise unreadable
    return sign * total


def to_timedelta(value: Duration | str, name: str,
                 problems: list[Problem] | None = None) -> timedelta:
    """Convert seconds, a duration string (see :func:`parse_duration`) or a timedelta; bad
    values are reported (or raised) under ``name``."""
    if isinstance(value, timedelta):
        return value
    try:
        seconds = _seconds_of(parse_duration(value) if isinstance(value, str) else value)
    except DurationError as exc:
        if problems is None:
            raise ConfigurationError([Problem(name, str(exc))]) from None
        problems.append(Problem(name, exc.message, exc.hint))
        return timedelta(0)
    return timedelta(seconds=seconds)


def _seconds_of(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DurationError(f"expected seconds, a duration such as '1m30s' or a timedelta, got "
                            f"{value!r}")
    problem = validation.seconds_problem(value, "", minimum=-validation.MAX_DURATION)
    if problem is not None:  # not finite, or beyond what a datetime can be shifted by
        raise DurationError(problem.message, problem.hint)
    return float(value)
