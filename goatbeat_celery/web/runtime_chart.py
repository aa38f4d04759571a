"""The runtime chart of a schedule's page: how long each of its recent runs took, against when
it started, laid out here as coordinates for an inline SVG the template draws (no JavaScript,
nothing fetched), failed runs marked, with the p50 and p95 of what it draws.

Both axes are scaled to the runs drawn: time from the first start to the last (a schedule that
runs every second fills the width with its last few minutes, a daily one with its last months;
the axis is :class:`~goatbeat_celery.web.chart_frame.TimeAxis`, shared with the lateness
chart), duration from 0 to a round value at or above the longest run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlencode

from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.runs import RunState
from goatbeat_celery.web.chart_frame import Frame, Tick, TimeAxis, TimeTick, round_ceiling
from goatbeat_celery.web.present import moment, seconds_text

#: Ends whose duration is the run's own: a lost or unknown run's "end" is the leader's verdict.
_MEASURED = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.REVOKED, RunState.REJECTED})
#: Two runs further apart than this many times the median gap between runs are not joined.
_GAP_FACTOR = 10


@dataclass(frozen=True)
class RunMark:
    x: float
    y: float
    title: str
    failed: bool
    #: ``key=…`` of the link to the run's page (one path for every mark, read once).
    query: str


@dataclass(frozen=True, kw_only=True)
class RuntimeChart(Frame):
    """What the template draws; ``marks`` is empty when no run read reported a duration."""

    marks: tuple[RunMark, ...]
    x_ticks: tuple[TimeTick, ...]
    y_ticks: tuple[Tick, ...]
    #: The runs read, and how many of them ended without a duration of their own.
    read: int
    unmeasured: int
    failed: int
    p50: str
    p95: str
    #: The y of the p50 and p95 lines (None without marks).
    p50_y: float | None
    p95_y: float | None
    first: datetime | None
    last: datetime | None

    @property
    def count(self) -> int:
        return len(self.marks)

    @property
    def polylines(self) -> list[str]:
        """The marks joined in order of start, broken where the runs stopped for a while (a
        gap ten times the usual one): a line drawn across it would show runs that never were."""
        if len(self.marks) < 2:
            return []
        gaps = sorted(b.x - a.x for a, b in zip(self.marks, self.marks[1:], strict=False))
        broken_at = max(gaps[len(gaps) // 2] * _GAP_FACTOR, 1.0)
        lines: list[list[RunMark]] = [[self.marks[0]]]
        for before, mark in zip(self.marks, self.marks[1:], strict=False):
            if mark.x - before.x > broken_at:
                lines.append([])
            lines[-1].append(mark)
        return [" ".join(f"{m.x:.1f},{m.y:.1f}" for m in line) for line in lines
                if len(line) > 1]

    @property
    def p95_label_y(self) -> float:
        """Above its line, or below it when the line runs along the top of the plot."""
        at = self.p95_y or self.top
        return at - 4 if at - 14 >= self.top else at + 13

    @property
    def p50_label_y(self) -> float:
        """Below its line when the p95 line (and its label) sits just above it."""
        at = self.p50_y or self.bottom
        above = at - 4
        if at - 14 < self.top or abs(above - self.p95_label_y) < 12:
            return min(at + 13, self.bottom - 2)
        return above


def duration(execution: Execution) -> float | None:
    """Seconds the run took, as its worker measured it (else from its start to its end); None
    for a run not ended, or ended by a verdict rather than by running (lost, unknown)."""
    if execution.run_state not in _MEASURED:
        return None
    if execution.runtime is not None:
        return max(execution.runtime.total_seconds(), 0.0)
    if execution.started_at is not None and execution.finished_at is not None:
        return max((execution.finished_at - execution.started_at).total_seconds(), 0.0)
    return None


def _start(execution: Execution, seconds: float) -> datetime | None:
    if execution.started_at is not None:
        return execution.started_at
    if execution.finished_at is not None:
        return execution.finished_at - timedelta(seconds=seconds)
    return None


def nearest_rank(ordered: Sequence[float], rank: int) -> float:
    """The ``rank``-th percentile of ``ordered`` (sorted, not empty), by nearest rank."""
    return ordered[max(0, math.ceil(rank / 100 * len(ordered)) - 1)]


def runtime_chart(executions: Sequence[Execution], now: datetime) -> RuntimeChart:
    """The duration of each run of ``executions`` (a schedule's newest, read at ``now`` by
    the database clock) that reported one, against when it started."""
    frame = Frame.standard()
    measured = []
    for execution in executions:
        seconds = duration(execution)
        start = None if seconds is None else _start(execution, seconds)
        if seconds is not None and start is not None:
            measured.append((start, seconds, execution))
    measured.sort(key=lambda item: (item[0], item[2].key))
    unmeasured = sum(1 for e in executions
                     if e.run_state is not None and not e.run_state.live
                     and duration(e) is None)
    if not measured:
        return RuntimeChart(**frame.frame_fields(), marks=(), x_ticks=(), y_ticks=(),
                            read=len(executions), unmeasured=unmeasured, failed=0, p50="-",
                            p95="-", p50_y=None, p95_y=None, first=None, last=None)
    axis = TimeAxis.fitted(frame, [start for start, _, _ in measured])
    ordered = sorted(seconds for _, seconds, _ in measured)
    ceiling = round_ceiling(max(ordered[-1], 0.001), 0.001)
    marks = tuple(
        RunMark(axis.x_of(start), frame.y_of(seconds, ceiling),
                f"{e.run_state.value if e.run_state else '?'} in {seconds_text(seconds)}, "
                f"started {moment(start, now)}", e.run_state is RunState.FAILED,
                urlencode({"key": e.key}))
        for start, seconds, e in measured)
    y_ticks = tuple(Tick(frame.y_of(ceiling * share, ceiling), seconds_text(ceiling * share))
                    for share in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0))
    p50, p95 = nearest_rank(ordered, 50), nearest_rank(ordered, 95)
    return RuntimeChart(
        **frame.frame_fields(), marks=marks, x_ticks=axis.ticks, y_ticks=y_ticks,
        read=len(executions), unmeasured=unmeasured, failed=sum(1 for m in marks if m.failed),
        p50=seconds_text(p50), p95=seconds_text(p95), p50_y=frame.y_of(p50, ceiling),
        p95_y=frame.y_of(p95, ceiling), first=measured[0][0], last=measured[-1][0])
