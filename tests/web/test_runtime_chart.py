"""The runtime chart's layout, from executions alone: axes scaled to the runs drawn, failed
runs marked, percentiles by nearest rank, and what is left out."""

from __future__ import annotations

from datetime import datetime, timedelta

from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.runs import RunState
from goatbeat_celery.web.runtime_chart import runtime_chart

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def ran(started: datetime, seconds: float | None, state: RunState = RunState.SUCCEEDED,
        *, finished: datetime | None = None) -> Execution:
    return Execution(
        key=f"a:{started.isoformat()}", schedule_name="a", occurrence_at=started,
        due_at=started, token=1, state=ExecutionState.SUBMITTED, claimed_at=started,
        submitted_at=started, run_state=state, started_at=started,
        finished_at=finished if finished is not None or seconds is None
        else started + timedelta(seconds=seconds),
        runtime=None if seconds is None else timedelta(seconds=seconds))


def test_every_second_runs_fill_the_width_instead_of_piling_at_one_end() -> None:
    # 500 runs a second apart: the last 8m20s, far less than any fixed window of an hour.
    runs = [ran(NOW - timedelta(seconds=s), 0.02 + (s % 10) / 100) for s in range(500)]
    chart = runtime_chart(runs, NOW)
    assert chart.count == 500
    width = chart.right - chart.left
    xs = [m.x for m in chart.marks]
    assert xs == sorted(xs)
    assert xs[0] - chart.left < 0.05 * width and chart.right - xs[-1] < 0.05 * width
    # Ticks a minute or two apart, labelled to the minute; the runtime axis ends at 0.2 s.
    assert 3 <= len(chart.x_ticks) <= 7
    assert all(t.form == "hm" and len(t.label) == 5 for t in chart.x_ticks)
    assert chart.y_ticks[-1].label == "0.2s"
    assert all(chart.top <= m.y <= chart.bottom for m in chart.marks)
    assert len(chart.polylines) == 1


def test_failed_runs_are_marked_and_the_percentiles_are_by_nearest_rank() -> None:
    runs = [ran(NOW - timedelta(minutes=20 - i), float(i),
                RunState.FAILED if i in (3, 7) else RunState.SUCCEEDED) for i in range(1, 21)]
    chart = runtime_chart(runs, NOW)
    assert [m.failed for m in chart.marks].count(True) == chart.failed == 2
    assert (chart.p50, chart.p95) == ("10s", "19s")
    assert chart.p95_y is not None and chart.p50_y is not None and chart.p95_y < chart.p50_y
    assert chart.first == runs[0].started_at and chart.last == runs[-1].started_at


def test_runs_without_a_runtime_of_their_own_are_left_out_and_counted() -> None:
    started = NOW - timedelta(minutes=5)
    runs = [ran(started, 2.0),
            ran(started + timedelta(minutes=1), None, RunState.LOST,
                finished=NOW - timedelta(minutes=1)),
            ran(started + timedelta(minutes=2), None, RunState.RUNNING),
            # No runtime reported, but a start and an end: the difference is its duration.
            ran(started + timedelta(minutes=3), None, finished=started + timedelta(minutes=3,
                                                                                seconds=4))]
    chart = runtime_chart(runs, NOW)
    assert chart.count == 2 and chart.unmeasured == 1 and chart.read == 4
    assert chart.p95 == "4s"


def test_a_gap_in_the_runs_breaks_the_line_and_days_read_as_dates() -> None:
    early = [ran(NOW - timedelta(days=3, minutes=m), 1.0) for m in range(5)]
    late = [ran(NOW - timedelta(minutes=m), 1.0) for m in range(5)]
    chart = runtime_chart(early + late, NOW)
    assert len(chart.polylines) == 2
    assert all(t.form in ("d", "dhm") for t in chart.x_ticks)


def test_no_runtime_yet_draws_nothing() -> None:
    chart = runtime_chart([ran(NOW, None, RunState.RUNNING)], NOW)
    assert chart.marks == () and chart.p50 == "-" and chart.polylines == []
