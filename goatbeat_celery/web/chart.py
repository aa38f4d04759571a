"""The lateness chart: submitted minus due for each execution due in the last hour, laid out
here as coordinates for an inline SVG the template draws (no JavaScript, nothing fetched).

The time axis is fitted to the runs drawn (:class:`~goatbeat_celery.web.chart_frame.TimeAxis`,
as the runtime chart's): a schedule that runs every second spreads its last runs over the
width instead of piling them at the end of an hour.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.display import human_seconds, lateness, when
from goatbeat_celery.web.chart_frame import Frame, Tick, TimeAxis, TimeTick, round_ceiling

__all__ = ["Chart", "Point", "lateness_chart"]


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    title: str
    manual: bool


@dataclass(frozen=True, kw_only=True)
class Chart(Frame):
    """What the template draws; ``points`` is empty when nothing was submitted in the window."""

    points: tuple[Point, ...]
    x_ticks: tuple[TimeTick, ...]
    y_ticks: tuple[Tick, ...]
    worst: str
    count: int
    #: When the executions given were only the newest ones read (``limit``), and the window
    #: holds more: the earliest due instant among them, before which the chart knows nothing.
    partial_since: datetime | None = None
    #: The end of the window (the database clock), which the caption's times are relative to.
    now: datetime | None = None
    #: The first and last due instants drawn (None without points).
    first: datetime | None = None
    last: datetime | None = None

    @property
    def polyline(self) -> str:
        return " ".join(f"{p.x:.1f},{p.y:.1f}" for p in self.points)


def lateness_chart(executions: Sequence[Execution], now: datetime, *,
                   window: timedelta = timedelta(hours=1), limit: int | None = None) -> Chart:
    """Lateness against due time of the executions due in ``window`` ending ``now`` (the
    database clock), the time axis fitted to those drawn (the whole window when none is).
    ``limit``: the executions are the newest ``limit`` read, so when there are that many and
    the oldest falls inside the window, the chart says from when it is complete."""
    frame = Frame.standard()
    start = now - window
    seen = sorted(((e.due_at, late, e) for e in executions
                   if (late := lateness(e)) is not None and start <= e.due_at <= now),
                  key=lambda item: (item[0], item[2].key))
    ceiling = round_ceiling(max((late for _, late, _ in seen), default=0.0), 1.0)
    axis = (TimeAxis.fitted(frame, [due for due, _, _ in seen]) if seen
            else TimeAxis(frame, start, now))
    points = tuple(
        Point(axis.x_of(due), frame.y_of(late, ceiling),
              f"{e.schedule_name}: due {when(due)}, {human_seconds(late)} late",
              e.manual)
        for due, late, e in seen
    )
    y_ticks = tuple(Tick(frame.y_of(ceiling * share, ceiling), human_seconds(ceiling * share))
                    for share in (0.0, 0.25, 0.5, 0.75, 1.0))
    worst = human_seconds(max(late for _, late, _ in seen)) if seen else "-"
    oldest = min((e.due_at for e in executions), default=None)
    partial = (oldest if limit is not None and len(executions) >= limit and oldest is not None
               and oldest > start else None)
    return Chart(**frame.frame_fields(), points=points, x_ticks=axis.ticks, y_ticks=y_ticks,
                 worst=worst, count=len(points), partial_since=partial, now=now,
                 first=seen[0][0] if seen else None, last=seen[-1][0] if seen else None)
