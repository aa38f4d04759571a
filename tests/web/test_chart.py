"""The lateness chart's layout, from executions alone: its time axis fitted to the runs drawn
(shared with the runtime chart), so that runs a second apart spread over the width."""

from __future__ import annotations

from datetime import datetime, timedelta

from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.web.chart import lateness_chart
from goatbeat_celery.web.chart_frame import Frame
from goatbeat_celery.web.runtime_chart import RuntimeChart

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def submitted(name: str, due: datetime, late: float) -> Execution:
    return Execution(key=f"{name}:{due.isoformat()}", schedule_name=name, occurrence_at=due,
                     due_at=due, token=1, state=ExecutionState.SUBMITTED, claimed_at=due,
                     submitted_at=due + timedelta(seconds=late))


def test_points_lie_inside_the_plot_in_due_order() -> None:
    executions = [submitted("a", NOW - timedelta(minutes=m), late)
                  for m, late in ((5, 0.2), (50, 3.0), (30, 1.0))]
    chart = lateness_chart(executions, NOW)
    assert chart.count == 3
    xs = [p.x for p in chart.points]
    assert xs == sorted(xs)
    for point in chart.points:
        assert chart.left <= point.x <= chart.right
        assert chart.top <= point.y <= chart.bottom
    assert chart.worst == "3s"
    assert chart.y_ticks[-1].label == "5s"  # the scale rounds up to 1, 2 or 5 × 10^n


def test_only_the_last_hour_and_only_submitted_runs_are_drawn() -> None:
    old = submitted("a", NOW - timedelta(hours=2), 1.0)
    pending = Execution(key="b:x", schedule_name="b", occurrence_at=NOW, due_at=NOW, token=1,
                        state=ExecutionState.CLAIMED, claimed_at=NOW)
    chart = lateness_chart([old, pending], NOW)
    assert chart.points == ()
    assert chart.worst == "-"
    # Nothing drawn: the axis is the hour, ticked every 10 minutes.
    assert [t.label for t in chart.x_ticks] == [
        "11:00", "11:10", "11:20", "11:30", "11:40", "11:50", "12:00"]


def test_names_in_point_titles_are_data_for_the_template_to_escape() -> None:
    chart = lateness_chart([submitted("<b>x</b>", NOW - timedelta(minutes=1), 0.5)], NOW)
    assert chart.points[0].title.startswith("<b>x</b>: due")


def test_a_chart_of_the_newest_runs_read_says_from_when_it_is_complete() -> None:
    newest = [submitted("a", NOW - timedelta(minutes=m), 0.1) for m in (1, 2, 3)]
    partial = lateness_chart(newest, NOW, limit=3)
    assert partial.partial_since == NOW - timedelta(minutes=3)
    assert lateness_chart(newest, NOW, limit=4).partial_since is None  # all there were
    older = [*newest, submitted("a", NOW - timedelta(hours=2), 0.1)]
    assert lateness_chart(older, NOW, limit=4).partial_since is None  # the hour is complete


def test_runs_a_second_apart_spread_over_the_width_instead_of_piling_at_now() -> None:
    # The 500 newest runs of an every-second schedule: the last 8m20s of the hour.
    runs = [submitted("tick", NOW - timedelta(seconds=s), 0.05 + (s % 7) / 100)
            for s in range(500)]
    chart = lateness_chart(runs, NOW, limit=500)
    assert chart.count == 500
    width = chart.right - chart.left
    xs = [p.x for p in chart.points]
    assert xs == sorted(xs)
    # The first and last sit near each end (3 % of the span is left each side).
    assert xs[0] - chart.left < 0.05 * width and chart.right - xs[-1] < 0.05 * width
    # Evenly: each tenth of the width holds about a tenth of the points (53 of 500 for a
    # tenth of the 94 % they fill; 37 for the two tenths that hold a padding).
    for tenth in range(10):
        low = chart.left + width * tenth / 10
        inside = sum(1 for x in xs if low <= x < low + width / 10)
        assert 35 <= inside <= 56, (tenth, inside)
    assert (chart.first, chart.last) == (NOW - timedelta(seconds=499), NOW)
    assert 3 <= len(chart.x_ticks) <= 7
    assert all(t.form == "hm" and t.instant.endswith("+00:00") for t in chart.x_ticks)
    assert all(chart.left <= t.position <= chart.right for t in chart.x_ticks)


def test_one_run_sits_in_the_middle_of_a_minute() -> None:
    chart = lateness_chart([submitted("a", NOW - timedelta(minutes=7), 1.0)], NOW)
    (point,) = chart.points
    assert abs(point.x - (chart.left + chart.right) / 2) < 0.5
    assert [t.form for t in chart.x_ticks] == ["hms"] * len(chart.x_ticks)


def test_both_charts_are_drawn_on_the_same_frame() -> None:
    chart = lateness_chart([], NOW)
    assert isinstance(chart, Frame) and issubclass(RuntimeChart, Frame)
    assert chart.frame_fields() == Frame.standard().frame_fields()


def test_runs_milliseconds_apart_are_drawn_in_the_middle_of_ten_seconds() -> None:
    runs = [submitted("a", NOW - timedelta(milliseconds=ms), 0.1) for ms in (0, 40, 80)]
    chart = lateness_chart(runs, NOW)
    middle = (chart.left + chart.right) / 2
    assert all(abs(p.x - middle) < 0.01 * (chart.right - chart.left) for p in chart.points)
    assert len(chart.x_ticks) >= 2  # a span ticked by the second, not an empty axis
