"""The lateness chart's layout, from executions alone."""

from __future__ import annotations

from datetime import datetime, timedelta

from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.web.chart import lateness_chart

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
    assert chart.x_ticks[-1].label == "now" and chart.x_ticks[0].label == "-60m"


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
