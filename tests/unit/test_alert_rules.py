"""The alert rules (core.rules.alerts): what each one judges from a schedule's newest runs,
and what the leader writes from that verdict and the alerts open, by tables of cases."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from goatbeat_celery.core.rules.alerts import (
    ALERT_DEPTH,
    UNJUDGED,
    Alert,
    AlertRule,
    AlertRules,
    AlertState,
    Evidence,
    Finding,
    judge,
    plan_alerts,
)
from goatbeat_celery.core.rules.runs import RunState
from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.instants import UTC

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TRACKED = NOW - timedelta(hours=1)
RULES = AlertRules(late=timedelta(seconds=30), failures=2, max_runtime=timedelta(minutes=5),
                   silent=timedelta(minutes=10))


def run(minutes_ago: int, *, state: ExecutionState = ExecutionState.SUBMITTED,
        run_state: RunState | None = RunState.SUCCEEDED, late: float = 1, missed: int = 0,
        manual: bool = False, runtime: float = 2, error: str | None = None) -> Execution:
    """A run of schedule "s" due ``minutes_ago``, sent ``late`` seconds after, that ran for
    ``runtime`` seconds (still running when ``run_state`` is running)."""
    due = NOW - timedelta(minutes=minutes_ago)
    started = due + timedelta(seconds=late + 1)
    ended = run_state not in (None, RunState.RUNNING, RunState.RETRYING)
    return Execution(
        key=f"s:{due.isoformat()}" + (":manual" if manual else ""), schedule_name="s",
        occurrence_at=due, due_at=due, token=1, state=state, claimed_at=due,
        submitted_at=(due + timedelta(seconds=late)
                      if state is ExecutionState.SUBMITTED else None),
        missed=missed, manual=manual, run_state=run_state,
        started_at=started if run_state is not None else None,
        finished_at=started + timedelta(seconds=runtime) if ended else None,
        run_error=error)


def evidence(*runs: Execution, rules: AlertRules = RULES, enabled: bool = True,
             created: datetime = NOW - timedelta(days=1)) -> Evidence:
    return Evidence(schedule_name="s", rules=rules, enabled=enabled, created_at=created,
                    runs=runs)


def opened(rule: AlertRule, key: str | None = None) -> Alert:
    return Alert(id=7, schedule_name="s", rule=rule, state=AlertState.OPEN, reason="earlier",
                 first_at=NOW - timedelta(minutes=30), last_at=NOW - timedelta(minutes=30),
                 key=key)


def verdict(rule: AlertRule, *runs: Execution, tracked: datetime | None = TRACKED,
            **given: Any) -> object:
    return judge(rule, evidence(*runs, **given), now=NOW, tracked_since=tracked)


# -- missed -------------------------------------------------------------------------------
def test_missed_holds_when_the_newest_occurrence_came_after_misses() -> None:
    newest = run(1, missed=3)
    found = verdict(AlertRule.MISSED, newest, run(2))
    assert found == Finding(f"3 occurrences before {newest.key} did not run: no leader sent "
                            "them in time (coalesced by the misfire policy, or later than the "
                            "misfire grace)", newest.key)


def test_missed_holds_for_an_occurrence_that_expired_before_it_was_sent() -> None:
    expired = run(1, state=ExecutionState.EXPIRED, run_state=None)
    found = verdict(AlertRule.MISSED, expired)
    assert isinstance(found, Finding) and found.key == expired.key
    assert "starting deadline" in found.reason


@pytest.mark.parametrize("runs", [
    (run(1), run(2, missed=3)),  # the next occurrence ran in time: over
    (run(0, manual=True, missed=0), run(1)),  # a manual run says nothing, the grid run does
], ids=["recovered", "manual-run-ignored"])
def test_missed_does_not_hold_once_an_occurrence_runs_without_a_miss(
        runs: tuple[Execution, ...]) -> None:
    assert verdict(AlertRule.MISSED, *runs) is None


def test_missed_is_unjudged_for_a_schedule_that_never_ran() -> None:
    assert verdict(AlertRule.MISSED) is UNJUDGED


def test_missed_waits_for_its_count_of_occurrences_that_did_not_run() -> None:
    three = replace(RULES, missed=3)
    assert verdict(AlertRule.MISSED, run(1, missed=2), rules=three) is None  # it ran: over
    newest = run(1, missed=3)
    found = verdict(AlertRule.MISSED, newest, rules=three)
    assert isinstance(found, Finding) and found.key == newest.key


def test_missed_counts_expired_occurrences_in_a_row_with_those_coalesced_between() -> None:
    expired = run(1, state=ExecutionState.EXPIRED, run_state=None)
    earlier = run(2, state=ExecutionState.EXPIRED, run_state=None, missed=1)
    runs = (expired, earlier, run(3, missed=5))  # the 5 before the run that ran are over
    found = verdict(AlertRule.MISSED, *runs, rules=replace(RULES, missed=3))
    assert isinstance(found, Finding) and found.key == expired.key
    assert "3 occurrences in a row did not run" in found.reason
    # Below the count while none ran since: the streak may still grow.
    assert verdict(AlertRule.MISSED, *runs, rules=replace(RULES, missed=4)) is UNJUDGED
    every = tuple(run(i, state=ExecutionState.EXPIRED, run_state=None)
                  for i in range(1, ALERT_DEPTH + 1))
    found = verdict(AlertRule.MISSED, *every, rules=replace(RULES, missed=3))
    assert isinstance(found, Finding)
    assert f"at least {ALERT_DEPTH} occurrences in a row" in found.reason


# -- late -----------------------------------------------------------------------------------
def test_late_holds_when_the_newest_run_was_sent_past_the_threshold() -> None:
    newest = run(1, late=45)
    found = verdict(AlertRule.LATE, newest)
    assert found == Finding(f"run {newest.key} sent 45s after it was due (more than 30s)",
                            newest.key)


def test_late_does_not_hold_for_a_run_sent_in_time_nor_at_the_threshold() -> None:
    assert verdict(AlertRule.LATE, run(1, late=30), run(2, late=90)) is None


def test_late_is_judged_on_the_newest_run_sent_not_one_still_claimed() -> None:
    found = verdict(AlertRule.LATE, run(0, state=ExecutionState.CLAIMED, run_state=None),
                    run(1, late=45))
    assert isinstance(found, Finding)


# -- failed ---------------------------------------------------------------------------------
def test_failed_holds_after_the_count_of_failures_in_a_row() -> None:
    last = run(1, run_state=RunState.FAILED, error="ValueError: boom")
    found = verdict(AlertRule.FAILED, last, run(2, run_state=RunState.FAILED), run(3))
    assert found == Finding(f"2 runs failed in a row (the last, {last.key}: ValueError: "
                            "boom)", last.key)


def test_a_failed_streak_filling_every_run_read_is_counted_as_at_least() -> None:
    failures = [run(minutes, run_state=RunState.FAILED) for minutes in range(1, ALERT_DEPTH + 1)]
    found = verdict(AlertRule.FAILED, *failures)
    assert isinstance(found, Finding)
    assert found.reason.startswith(f"at least {ALERT_DEPTH} runs failed in a row"), found
    # The schedule's own count, where it knows more.
    found = judge(AlertRule.FAILED, replace(evidence(*failures), failures_in_a_row=130),
                  now=NOW, tracked_since=TRACKED)
    assert isinstance(found, Finding) and found.reason.startswith("130 runs failed in a row")
    # Fewer runs than a full read: the schedule has no more, so the count is exact.
    found = verdict(AlertRule.FAILED, *failures[:4])
    assert isinstance(found, Finding) and found.reason.startswith("4 runs failed in a row")


@pytest.mark.parametrize(("runs", "expected"), [
    ((run(1, run_state=RunState.FAILED), run(2)), UNJUDGED),  # one failure: not yet
    ((run(1), run(2, run_state=RunState.FAILED), run(3, run_state=RunState.FAILED)), None),
    ((run(0, run_state=RunState.RUNNING), run(1)), None),  # a run in flight says nothing
    ((run(1, run_state=RunState.UNKNOWN),), UNJUDGED),  # untracked: no evidence either way
    ((), UNJUDGED),
], ids=["one-failure", "recovered", "running-after-success", "unknown", "no-runs"])
def test_failed_resolves_only_on_a_success_and_never_guesses(
        runs: tuple[Execution, ...], expected: object) -> None:
    assert verdict(AlertRule.FAILED, *runs) == expected


# -- lost -----------------------------------------------------------------------------------
def test_lost_holds_for_a_lost_run_since_the_last_success_even_behind_a_failure() -> None:
    lost = run(2, run_state=RunState.LOST, error="worker silent for 60s")
    found = verdict(AlertRule.LOST, run(1, run_state=RunState.FAILED), lost, run(3))
    assert found == Finding(f"run {lost.key} lost: worker silent for 60s", lost.key)


def test_lost_waits_for_its_count_of_runs_lost_since_the_last_success() -> None:
    two = replace(RULES, lost=2)
    newest = run(1, run_state=RunState.LOST, error="never started")
    older = run(3, run_state=RunState.LOST)
    assert verdict(AlertRule.LOST, newest, run(2), older, rules=two) is UNJUDGED
    found = verdict(AlertRule.LOST, newest, run(2, run_state=RunState.FAILED), older, run(4),
                    rules=two)
    assert found == Finding(f"run {newest.key} lost: never started (2 runs lost since the "
                            "last success)", newest.key)
    assert verdict(AlertRule.LOST, run(0), newest, older, rules=two) is None
    # Every run read lost, none succeeded: more may have been lost before them.
    every = tuple(run(i, run_state=RunState.LOST) for i in range(1, ALERT_DEPTH + 1))
    found = verdict(AlertRule.LOST, *every, rules=two)
    assert isinstance(found, Finding) and f"(at least {ALERT_DEPTH} runs lost" in found.reason


def test_lost_resolves_on_a_success_and_is_unjudged_on_failures_alone() -> None:
    assert verdict(AlertRule.LOST, run(1), run(2, run_state=RunState.LOST)) is None
    assert verdict(AlertRule.LOST, run(1, run_state=RunState.FAILED)) is UNJUDGED
    assert verdict(AlertRule.LOST, run(1, run_state=RunState.UNKNOWN)) is UNJUDGED


# -- overrun ----------------------------------------------------------------------------------
def test_overrun_holds_while_a_run_runs_past_max_runtime() -> None:
    long = run(7, run_state=RunState.RUNNING, late=0.123456)
    found = verdict(AlertRule.OVERRUN, long)
    assert isinstance(found, Finding) and found.key == long.key
    # Started 1.123456s after due, 7 minutes ago: shown to the hundredth.
    assert found.reason == (f"run {long.key} has been running for 418.88s (more than 300s)")
    assert verdict(AlertRule.OVERRUN, run(3, run_state=RunState.RUNNING)) is None
    assert verdict(AlertRule.OVERRUN, run(7)) is None  # ended: over


def test_the_rules_that_need_tracking_are_unjudged_without_it() -> None:
    assert verdict(AlertRule.OVERRUN, run(7, run_state=RunState.RUNNING),
                   tracked=None) is UNJUDGED
    assert verdict(AlertRule.SILENT, tracked=None) is UNJUDGED


# -- silent ----------------------------------------------------------------------------------
def test_silent_holds_when_no_run_succeeded_within_the_window() -> None:
    found = verdict(AlertRule.SILENT, run(12), run(11, run_state=RunState.FAILED))
    assert isinstance(found, Finding) and found.key is None
    assert found.reason.startswith("no run succeeded in the last 600s; the last success ended ")


def test_silent_holds_for_a_schedule_whose_runs_never_reached_a_worker() -> None:
    found = verdict(AlertRule.SILENT, run(5, run_state=None), run(15, run_state=None))
    assert found == Finding("no run succeeded in the last 600s; none among its recent runs")


@pytest.mark.parametrize(("runs", "given", "expected"), [
    ((run(5),), {}, None),  # a success in the window
    ((), {"tracked": NOW - timedelta(minutes=5)}, UNJUDGED),  # not watched a whole window
    ((), {"created": NOW - timedelta(minutes=5)}, UNJUDGED),  # too new to be silent
    ((), {"enabled": False}, None),  # paused: quiet on purpose
], ids=["success", "watched-too-briefly", "new-schedule", "paused"])
def test_silent_does_not_hold_or_is_unjudged(runs: tuple[Execution, ...],
                                             given: Mapping[str, Any],
                                             expected: object) -> None:
    assert verdict(AlertRule.SILENT, *runs, **given) == expected


# -- what the leader writes -----------------------------------------------------------------
#: The rules but silent, which any few failed runs in a row would raise too.
NOT_SILENT = replace(RULES, silent=None)


def plan(*runs: Execution, open_alerts: Mapping[AlertRule, Alert] = {},
         rules: AlertRules = NOT_SILENT,
         tracked: datetime | None = TRACKED) -> list[tuple[str, str]]:
    changes = plan_alerts(evidence(*runs, rules=rules), open_alerts, now=NOW,
                          tracked_since=tracked)
    return [(change.rule.value, change.action) for change in changes]


def test_a_rule_that_holds_opens_an_alert_and_one_open_is_counted_for_a_new_run_only() -> None:
    failures = (run(1, run_state=RunState.FAILED), run(2, run_state=RunState.FAILED))
    assert plan(*failures, run(3)) == [("failed", "open")]
    assert plan(*failures, open_alerts={
        AlertRule.FAILED: opened(AlertRule.FAILED, failures[0].key)}) == []
    assert plan(*failures, open_alerts={
        AlertRule.FAILED: opened(AlertRule.FAILED, "s:older")}) == [("failed", "repeat")]


def test_an_open_alert_resolves_when_its_rule_no_longer_holds_or_is_turned_off() -> None:
    assert plan(run(1), open_alerts={AlertRule.FAILED: opened(AlertRule.FAILED)}) == [
        ("failed", "resolve")]
    assert plan(run(1, late=45), rules=replace(NOT_SILENT, late=None),
                open_alerts={AlertRule.LATE: opened(AlertRule.LATE)}) == [("late", "resolve")]


def test_an_open_alert_stays_open_while_its_rule_cannot_be_judged() -> None:
    # The failover case: a new leader has not watched a whole window yet.
    assert plan(open_alerts={AlertRule.SILENT: opened(AlertRule.SILENT)}, rules=RULES,
                tracked=NOW - timedelta(minutes=1)) == []


def test_a_silent_alert_open_is_not_counted_again_at_every_look() -> None:
    assert plan(run(20), open_alerts={AlertRule.SILENT: opened(AlertRule.SILENT)},
                rules=RULES) == []
