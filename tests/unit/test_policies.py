"""The run policies' rules (core.rules.policies), as tables: overlap, how a run ended, backoff, and
what a finished run writes on its schedule."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from goatbeat_celery.core.rules.policies import (
    FailureBackoff,
    OverlapAction,
    OverlapPolicy,
    RunEnd,
    ScheduleMode,
    backoff_problems,
    overlap_decision,
    run_end,
    settle,
)
from goatbeat_celery.core.rules.runs import RunState
from goatbeat_celery.core.rules.triggers import IntervalTrigger

UTC = timezone.utc
T0 = datetime(2026, 1, 1, tzinfo=UTC)
S = timedelta(seconds=1)
ALLOW, SKIP, BUFFER = OverlapPolicy.ALLOW, OverlapPolicy.SKIP, OverlapPolicy.BUFFER_ONE
CLAIM, HOLD, SKIPPED = OverlapAction.CLAIM, OverlapAction.HOLD, OverlapAction.SKIP
RATE, DELAY = ScheduleMode.FIXED_RATE, ScheduleMode.FIXED_DELAY
SUCCESS, FAILURE, NEUTRAL = RunEnd.SUCCESS, RunEnd.FAILURE, RunEnd.NEUTRAL


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.mark.parametrize(("policy", "unfinished", "waiting", "action"), [
    (ALLOW, None, None, CLAIM),
    (ALLOW, "s:1", None, CLAIM),
    (ALLOW, "s:1", "s:2", CLAIM),
    (SKIP, None, None, CLAIM),
    (SKIP, "s:1", None, SKIPPED),
    (SKIP, None, "s:2", SKIPPED),  # a run held under an earlier policy still goes first
    (BUFFER, None, None, CLAIM),
    (BUFFER, "s:1", None, HOLD),
    (BUFFER, "s:1", "s:2", SKIPPED),  # at most one waits
    (BUFFER, None, "s:2", SKIPPED),
])
def test_overlap_decision_table(policy: OverlapPolicy, unfinished: str | None,
                                waiting: str | None, action: OverlapAction) -> None:
    assert overlap_decision(policy, unfinished=unfinished, waiting=waiting).action is action


def test_a_skip_names_the_run_it_did_not_overlap() -> None:
    decision = overlap_decision(SKIP, unfinished="report:2026-01-01T00:00:00+00:00",
                                waiting=None)
    assert decision.reason == "run report:2026-01-01T00:00:00+00:00 had not finished"


def test_a_skip_behind_a_held_run_names_the_held_run() -> None:
    decision = overlap_decision(BUFFER, unfinished="s:1", waiting="s:2")
    assert decision.reason == "run s:2 is already waiting for its turn"


@pytest.mark.parametrize(("run_state", "pending", "end"), [
    (None, True, None),  # claimed or submitted, not started: not over
    (RunState.RUNNING, True, None),
    (RunState.RETRYING, True, None),
    (RunState.SUCCEEDED, True, SUCCESS),
    (RunState.FAILED, True, FAILURE),
    (RunState.REVOKED, True, NEUTRAL),
    (RunState.REJECTED, True, NEUTRAL),
    (RunState.LOST, True, NEUTRAL),  # what every run becomes without tracking
    (None, False, NEUTRAL),  # abandoned, expired, skipped: never sent, over
])
def test_run_end_table(run_state: RunState | None, pending: bool, end: RunEnd | None) -> None:
    assert run_end(run_state, pending=pending) is end


@pytest.mark.parametrize(("failures", "seconds"), [
    (0, 0), (1, 10), (2, 20), (3, 40), (4, 80), (5, 100), (50, 100), (10**9, 100),
])
def test_backoff_doubles_from_its_base_up_to_its_cap(failures: int, seconds: float) -> None:
    backoff = FailureBackoff(base=10 * S, factor=2, maximum=100 * S)
    assert backoff.delay(failures) == seconds * S


def test_backoff_without_a_cap_stops_at_the_longest_duration() -> None:
    assert FailureBackoff(base=S, factor=10).delay(1000) == timedelta(days=3650)


def test_backoff_with_factor_one_is_constant() -> None:
    assert FailureBackoff(base=30 * S, factor=1).delay(7) == 30 * S


@pytest.mark.parametrize(("base", "factor", "maximum", "problem"), [
    (30 * S, 2.0, 300 * S, None),
    (None, None, None, None),
    (timedelta(0), None, None, "failure_backoff: must be > 0s"),
    (30 * S, 0.5, None, "failure_backoff_factor: must be a number from 1 to 100"),
    (30 * S, float("nan"), None, "failure_backoff_factor: must be a number from 1 to 100"),
    (30 * S, True, None, "failure_backoff_factor: must be a number from 1 to 100"),
    (30 * S, None, 10 * S, "failure_backoff_max: must not be shorter than failure_backoff"),
    (None, 3.0, None, "failure_backoff: give it too"),
])
def test_backoff_problems(base: timedelta | None, factor: float | None,
                          maximum: timedelta | None, problem: str | None) -> None:
    found = [str(p) for p in backoff_problems(base, factor, maximum)]
    if problem is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith(problem), found


# -- settle ----------------------------------------------------------------------------------
MINUTE_GRID = IntervalTrigger(timedelta(minutes=1))


def grid_after(instant: datetime) -> tuple[datetime | None, datetime | None]:
    point = MINUTE_GRID.next_after(instant)
    return point, point


def settled(end: RunEnd, *, finished: float, failures: int = 0, mode: ScheduleMode = RATE,
            backoff: FailureBackoff | None = None, pause_after: int | None = None,
            next_run: float | None = 60, delay: timedelta | None = None,
            error: str | None = None) -> tuple[int, float | None, str | None]:
    """(failures in a row, next run in seconds after T0, paused reason) after one end."""
    next_at = None if next_run is None else at(next_run)
    result = settle(end, finished_at=at(finished), failures=failures, mode=mode, delay=delay,
                    backoff=backoff, pause_after=pause_after, next_occurrence_at=next_at,
                    next_run_at=next_at, grid_after=grid_after, run_error=error)
    assert result.next_occurrence_at == result.next_run_at
    run = None if result.next_run_at is None else (result.next_run_at - T0).total_seconds()
    return result.consecutive_failures, run, result.paused_reason


BACKOFF = FailureBackoff(base=30 * S, factor=2, maximum=600 * S)


@pytest.mark.parametrize(("end", "failures", "expected"), [
    (SUCCESS, 0, (0, 60, None)),
    (SUCCESS, 4, (0, 60, None)),  # a success resets the count
    (FAILURE, 0, (1, 60, None)),  # no backoff configured: the grid as planned
    (NEUTRAL, 3, (3, 60, None)),  # lost, revoked: neither resets nor counts
])
def test_fixed_rate_without_backoff_keeps_the_grid(end: RunEnd, failures: int,
                                                   expected: tuple[int, float, None]) -> None:
    assert settled(end, finished=5, failures=failures) == expected


@pytest.mark.parametrize(("failures", "finished", "next_run", "expected_next"), [
    (0, 5, 60, 60),     # 1st failure: 30 s from 0:05 is 0:35, before the planned 1:00
    (1, 5, 60, 120),    # 2nd: 60 s from 0:05 is 1:05: the next grid point after it, 2:00
    (2, 50, 60, 180),   # 3rd: 120 s from 0:50 is 2:50 → 3:00
    (1, 0, 60, 60),     # 60 s from 0:00 is exactly 1:00: that point is eligible
    (9, 5, 60, 660),    # capped at 600 s: 10:05 → 11:00
])
def test_fixed_rate_backoff_moves_to_the_first_grid_point_it_permits(
        failures: int, finished: float, next_run: float, expected_next: float) -> None:
    assert settled(FAILURE, finished=finished, failures=failures, backoff=BACKOFF,
                   next_run=next_run) == (failures + 1, expected_next, None)


def test_backoff_never_brings_a_later_run_forward() -> None:
    assert settled(FAILURE, finished=5, backoff=BACKOFF, next_run=3600) == (1, 3600, None)


def test_a_success_after_failures_waits_no_backoff() -> None:
    assert settled(SUCCESS, finished=5, failures=5, backoff=BACKOFF) == (0, 60, None)


def test_a_finished_schedule_stays_finished() -> None:
    assert settled(FAILURE, finished=5, backoff=BACKOFF, next_run=None) == (1, None, None)


@pytest.mark.parametrize(("end", "failures", "expected"), [
    (SUCCESS, 0, (0, 15, None)),   # ended 0:05, delay 10 s
    (NEUTRAL, 0, (0, 15, None)),   # a lost run ends the wait too
    (FAILURE, 0, (1, 35, None)),   # the backoff (30 s) is longer than the delay
    (FAILURE, 2, (3, 125, None)),  # 120 s
])
def test_fixed_delay_counts_from_the_end_of_the_run(end: RunEnd, failures: int,
                                                    expected: tuple[int, float, None]) -> None:
    assert settled(end, finished=5, failures=failures, mode=DELAY, delay=10 * S,
                   backoff=BACKOFF, next_run=1) == expected


def test_fixed_delay_keeps_the_latest_end_of_runs_settled_out_of_order() -> None:
    # A run that ended at 0:05 is settled after one that ended at 0:20 set 0:30.
    assert settled(SUCCESS, finished=5, mode=DELAY, delay=10 * S, next_run=30) == (0, 30, None)


def test_fixed_delay_of_a_finished_schedule_waits_again() -> None:
    assert settled(SUCCESS, finished=5, mode=DELAY, delay=10 * S, next_run=None) == (0, 15, None)


@pytest.mark.parametrize(("end", "failures", "paused"), [
    (FAILURE, 1, False),
    (FAILURE, 2, True),   # the third failure in a row
    (FAILURE, 7, True),
    (SUCCESS, 2, False),
    (NEUTRAL, 2, False),  # lost runs never pause a schedule (workers without tracking)
])
def test_pause_after_failures(end: RunEnd, failures: int, paused: bool) -> None:
    reason = settled(end, finished=5, failures=failures, pause_after=3, error="ValueError: x")[2]
    assert (reason is not None) is paused
    if reason is not None:
        assert reason == f"paused after {failures + 1} failed runs in a row; last error: " \
                         "ValueError: x"
