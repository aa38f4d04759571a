"""What the dashboard's charts share: the frame of the plot (its size and margins, the fields
every chart's template reads) and a time axis fitted to the instants drawn, with ticks on
round steps that the page's script can show in the browser's zone.

The lateness chart (:mod:`goatbeat_celery.web.chart`) and the runtime chart
(:mod:`goatbeat_celery.web.runtime_chart`) are laid out on these, so that both read alike: a
schedule that runs every second fills the width with its last seconds, a daily one with its
last months.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.display import iso

__all__ = ["HEIGHT", "MARGIN", "MAX_TICKS", "WIDTH", "Frame", "Tick", "TimeAxis", "TimeTick",
           "round_ceiling"]

WIDTH = 720
HEIGHT = 240
#: Room for the axis labels and titles: left, right, top, bottom.
MARGIN = (72, 16, 12, 46)
#: Steps between two time ticks, in seconds: the first that leaves at most MAX_TICKS ticks.
_TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
               43200, 86400, 2 * 86400, 7 * 86400, 14 * 86400, 28 * 86400, 91 * 86400,
               364 * 86400)
MAX_TICKS = 7
#: The share of the time span left empty on each side, so that no mark sits on the frame.
_PAD = 0.03
#: The time shown each side of a single instant (seconds): a span to draw it in.
_ALONE = 30.0
#: The least span an axis shows (seconds), so that it holds a tick or two of a second's step:
#: runs sent a few milliseconds apart are drawn in its middle, not stretched over the width.
_LEAST_SPAN = 10.0


@dataclass(frozen=True)
class Frame:
    """The plot's size and where its inner rectangle lies (what every chart template reads)."""

    width: int
    height: int
    left: float
    right: float
    top: float
    bottom: float

    @classmethod
    def standard(cls) -> Frame:
        return cls(WIDTH, HEIGHT, MARGIN[0], WIDTH - MARGIN[1], MARGIN[2], HEIGHT - MARGIN[3])

    def frame_fields(self) -> dict[str, Any]:
        """The frame's fields, to build a chart (a Frame itself) on it."""
        return {"width": self.width, "height": self.height, "left": self.left,
                "right": self.right, "top": self.top, "bottom": self.bottom}

    def y_of(self, value: float, ceiling: float) -> float:
        """Where ``value`` lies on a vertical axis from 0 to ``ceiling``, clamped to it."""
        return self.bottom - (self.bottom - self.top) * min(max(value, 0.0), ceiling) / ceiling


@dataclass(frozen=True)
class Tick:
    position: float
    label: str


@dataclass(frozen=True)
class TimeTick:
    """A tick of the time axis: ``label`` in UTC, ``instant`` (ISO-8601) and ``form`` (``hms``,
    ``hm``, ``dhm`` or ``d``) for the page's script, which shows it in the browser's zone."""

    position: float
    label: str
    instant: str
    form: str


@dataclass(frozen=True)
class TimeAxis:
    """A horizontal time axis over ``low`` to ``high`` in ``frame``."""

    frame: Frame
    low: datetime
    high: datetime

    @classmethod
    def fitted(cls, frame: Frame, instants: Sequence[datetime]) -> TimeAxis:
        """From the first instant to the last (not empty), a little wider on each side so that
        no mark sits on the frame; a single instant gets a minute around it, and instants
        closer together than :data:`_LEAST_SPAN` that span around their middle."""
        first, last = min(instants), max(instants)
        span = (last - first).total_seconds()
        pad = span * _PAD if span > 0 else _ALONE
        pad = max(pad, (_LEAST_SPAN - span) / 2)
        return cls(frame, first - timedelta(seconds=pad), last + timedelta(seconds=pad))

    def x_of(self, instant: datetime) -> float:
        left, right = self.frame.left, self.frame.right
        return left + (right - left) * ((instant - self.low).total_seconds()
                                        / (self.high - self.low).total_seconds())

    @property
    def ticks(self) -> tuple[TimeTick, ...]:
        """At most :data:`MAX_TICKS`, on multiples of a round step counted from the Unix epoch
        (UTC midnight for days), labelled as finely as the step needs."""
        first, last = self.low, self.high
        span = (last - first).total_seconds()
        step = next((s for s in _TIME_STEPS if span / s <= MAX_TICKS), _TIME_STEPS[-1])
        if step >= 86400:
            form = "d"
        elif span >= 86400 or first.astimezone(UTC).date() != last.astimezone(UTC).date():
            form = "dhm"
        else:
            form = "hms" if step < 60 else "hm"
        at = math.ceil(first.timestamp() / step) * step
        found = []
        while at <= last.timestamp():
            instant = datetime.fromtimestamp(at, UTC)
            found.append(TimeTick(self.x_of(instant), _label(instant, form),
                                  iso(instant) or "", form))
            at += step
        return tuple(found)


def _label(instant: datetime, form: str) -> str:
    return instant.strftime({"hms": "%H:%M:%S", "hm": "%H:%M", "dhm": "%m-%d %H:%M",
                             "d": "%Y-%m-%d"}[form])


def round_ceiling(value: float, least: float) -> float:
    """The smallest of 1, 2, 5 × 10^n at or above ``value``, and at least ``least`` (itself
    one of them)."""
    step = least
    while True:
        for factor in (1.0, 2.0, 5.0):
            if step * factor >= value * (1 - 1e-9):
                return step * factor
        step *= 10
