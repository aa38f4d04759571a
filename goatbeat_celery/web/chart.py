"""The lateness chart: submitted minus due for each execution of the last hour, laid out here
as coordinates for an inline SVG the template draws (no JavaScript, nothing fetched)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.display import human_seconds, lateness, when

WIDTH = 720
HEIGHT = 240
#: Room for the axis labels and titles: left, right, top, bottom.
MARGIN = (72, 16, 12, 46)


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    title: str
    manual: bool


@dataclass(frozen=True)
class Tick:
    position: float
    label: str


@dataclass(frozen=True)
class Chart:
    """What the template draws; ``points`` is empty when nothing was submitted in the window."""

    width: int
    height: int
    left: float
    right: float
    top: float
    bottom: float
    points: tuple[Point, ...]
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    worst: str
    count: int
    #: When the executions given were only the newest ones read (``limit``), and the window
    #: holds more: the earliest due instant among them, before which the chart knows nothing.
    partial_since: datetime | None = None
    #: The end of the window (the database clock), which the caption's times are relative to.
    now: datetime | None = None

    @property
    def polyline(self) -> str:
        return " ".join(f"{p.x:.1f},{p.y:.1f}" for p in self.points)


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 5 × 10^n seconds at or above ``value`` (at least 1 s)."""
    step = 1.0
    while True:
        for factor in (1.0, 2.0, 5.0):
            if step * factor >= value:
                return step * factor
        step *= 10


def lateness_chart(executions: Sequence[Execution], now: datetime, *,
                   window: timedelta = timedelta(hours=1), limit: int | None = None) -> Chart:
    """Lateness against due time over ``window`` ending ``now`` (the database clock).
    ``limit``: the executions are the newest ``limit`` read, so when there are that many and
    the oldest falls inside the window, the chart says from when it is complete."""
    left, right = MARGIN[0], WIDTH - MARGIN[1]
    top, bottom = MARGIN[2], HEIGHT - MARGIN[3]
    start = now - window
    seen = sorted(((e.due_at, late, e) for e in executions
                   if (late := lateness(e)) is not None and start <= e.due_at <= now),
                  key=lambda item: (item[0], item[2].key))
    ceiling = _nice_ceiling(max((late for _, late, _ in seen), default=0.0))
    span = window.total_seconds()

    def x_of(instant: datetime) -> float:
        return left + (right - left) * (instant - start).total_seconds() / span

    def y_of(seconds: float) -> float:
        clamped = min(max(seconds, 0.0), ceiling)
        return bottom - (bottom - top) * clamped / ceiling

    points = tuple(
        Point(x_of(due), y_of(late),
              f"{e.schedule_name}: due {when(due)}, {human_seconds(late)} late",
              e.manual)
        for due, late, e in seen
    )
    minutes = int(span // 60)
    x_ticks = tuple(Tick(x_of(start + timedelta(minutes=m)),
                         "now" if m == minutes else f"-{minutes - m}m")
                    for m in range(0, minutes + 1, max(1, minutes // 6)))
    y_ticks = tuple(Tick(y_of(ceiling * share), human_seconds(ceiling * share))
                    for share in (0.0, 0.25, 0.5, 0.75, 1.0))
    worst = human_seconds(max(late for _, late, _ in seen)) if seen else "-"
    oldest = min((e.due_at for e in executions), default=None)
    partial = (oldest if limit is not None and len(executions) >= limit and oldest is not None
               and oldest > start else None)
    return Chart(WIDTH, HEIGHT, left, right, top, bottom, points, x_ticks, y_ticks, worst,
                 len(points), partial, now)
