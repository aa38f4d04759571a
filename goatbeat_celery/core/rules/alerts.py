"""Alerts: when a schedule misses, fails, overruns or goes quiet, and when that is over.

The leader looks at a page of schedules at a time, each with its newest executions
(:class:`Evidence`), and :func:`plan_alerts` decides, from that evidence and the alerts open on
the schedule, what to write: open an alert, count it again, or resolve it
(:class:`AlertChange`). The store writes the changes in the leader's fenced transaction, with at
most one open alert per schedule and rule, so that replicas and failovers neither repeat nor
lose one.

Each rule judges a *condition* on the evidence, with three answers: it holds (a
:class:`Finding`, with the run that shows it), it does not (the alert, if open, resolves), or
the evidence cannot say (:data:`UNJUDGED`: an open alert stays open, none is opened). Nothing is
judged from silence where nothing tracks runs: ``overrun`` and ``silent`` need run tracking,
and ``failed`` and ``lost`` are drawn only from what workers reported or the leader's lost
verdict (``unknown`` outcomes are no evidence).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from goatbeat_celery.core.rules.runs import RunState, measured_text, seconds_text
from goatbeat_celery.core.types.alerts import (
    ALERT_DEPTH,
    DEFAULT_ALERT_FAILURES,
    DEFAULT_ALERT_LOST,
    DEFAULT_ALERT_MISSED,
    MAX_ALERT_FAILURES,
    Alert,
    AlertAction,
    AlertChange,
    AlertEvent,
    AlertRule,
    AlertRules,
    AlertState,
)
from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.outbox import OutboxEvent

__all__ = [
    "ALERT_DEPTH",
    "DEFAULT_ALERT_FAILURES",
    "DEFAULT_ALERT_LOST",
    "DEFAULT_ALERT_MISSED",
    "MAX_ALERT_FAILURES",
    "UNJUDGED",
    "Alert",
    "AlertAction",
    "AlertChange",
    "AlertEvent",
    "AlertRule",
    "AlertRules",
    "AlertState",
    "Evidence",
    "Finding",
    "judge",
    "outbox_event",
    "plan_alerts",
    "reminders",
    "resolved_refusal",
    "silence_passed",
    "told",
]


#: The outbox event kind of each change (``alert.opened``...), and the noun in its summary.
EVENT_KINDS = {"open": "alert.opened", "repeat": "alert.repeated", "resolve": "alert.resolved",
               "remind": "alert.reminded"}


def told(action: AlertAction, alert: Alert, now: datetime) -> bool:
    """Whether a change of ``alert`` (as written, at ``now``) is told to the outbox and the
    signals: its counting again neither while it is silenced nor once acknowledged; a new
    alert, a reminder and a resolution always. A silence mutes repeats, not the end: whoever
    was told the alert opened must learn it is over, or a pager stays raised for good."""
    if action in ("open", "remind", "resolve"):
        return True
    if alert.silenced_at(now):
        return False
    return not (action == "repeat" and alert.acknowledged)


def resolved_refusal(alert: Alert, done: str) -> str:
    """Why a resolved alert cannot be ``done`` (acknowledged, silenced)."""
    when = "" if alert.resolved_at is None else f" at {alert.resolved_at.isoformat()}"
    return (f"alert {alert.id} ({alert.rule.value} on {alert.schedule_name!r}) was resolved"
            f"{when}: only an open alert is {done}")


def silence_passed(until: datetime, now: datetime) -> str:
    return (f"until: {until.isoformat()} is not after now ({now.isoformat()}); give a later "
            "instant")


def reminders(open_alerts: Sequence[Alert], now: datetime,
              resolving: Collection[tuple[str, AlertRule]] = ()) -> list[AlertChange]:
    """A ``remind`` for each open alert whose silence has ended by ``now``, except those
    being resolved (``resolving``: schedule and rule), whose resolution is told instead."""
    return [AlertChange(schedule_name=alert.schedule_name, rule=alert.rule, action="remind",
                        reason=alert.reason, silenced_until=alert.silenced_until)
            for alert in open_alerts
            if alert.open and alert.silenced_until is not None and alert.silenced_until <= now
            and (alert.schedule_name, alert.rule) not in resolving]


def outbox_event(event: AlertEvent) -> OutboxEvent:
    """The outbox event of one alert change, written in the transaction that records it: its
    id stable for the change (the alert's id, the change and, for a repeat, the count), its
    payload the alert as plain data with the change and a one-line summary."""
    alert = event.alert
    suffix = f":{alert.count}" if event.action == "repeat" else ""
    if event.action == "remind" and event.silence_ended is not None:
        suffix = f":{event.silence_ended.isoformat()}"
    summary = {
        "open": f"{alert.schedule_name}: {alert.rule.value} alert raised: {alert.reason}",
        "repeat": f"{alert.schedule_name}: {alert.rule.value} alert again ({alert.count} "
                  f"times): {alert.reason}",
        "resolve": f"{alert.schedule_name}: {alert.rule.value} alert resolved",
        "remind": f"{alert.schedule_name}: {alert.rule.value} alert still open after its "
                  f"silence ({alert.count} times): {alert.reason}",
    }[event.action]
    return OutboxEvent(event_id=f"alert:{alert.id}:{event.action}{suffix}",
                       kind=EVENT_KINDS[event.action],
                       payload={**alert.as_json(), "action": event.action, "summary": summary})


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """What the leader judges one schedule by: its rules, whether it is enabled, when it was
    created, and its newest executions (newest occurrence first, at most :data:`ALERT_DEPTH`)."""

    schedule_name: str
    rules: AlertRules
    enabled: bool
    created_at: datetime | None
    runs: Sequence[Execution]
    #: The schedule's own count of failed runs in a row (its run policies keep it), which
    #: the reason gives where the failures fill every run read.
    failures_in_a_row: int = 0


@dataclass(frozen=True)
class Finding:
    """A rule holds: why, and the run that shows it (None when no one run does)."""

    reason: str
    key: str | None = None


class _Unjudged:
    def __repr__(self) -> str:
        return "UNJUDGED"


#: The evidence cannot say whether a rule holds: an open alert stays open, none is opened.
UNJUDGED: Final = _Unjudged()

Verdict = Finding | None | _Unjudged

#: Run ends that are evidence of an outcome (``unknown`` is none).
_KNOWN_ENDS = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.REVOKED,
                         RunState.REJECTED, RunState.LOST})


def run_watched(run: Execution, *, runs_tracked: bool) -> bool:
    """Whether ``run`` may change without a new claim in a way a verdict reads: in flight, but
    without run tracking only until the broker took it (AlertScope.runs_tracked)."""
    return run.in_flight and (runs_tracked or run.state is not ExecutionState.SUBMITTED)


def run_changed_since(run: Execution, since: datetime, *, runs_tracked: bool) -> bool:
    """Whether ``run`` may weigh differently in a verdict than it did before ``since``:
    watched, waiting to be settled, or claimed since (AlertScope)."""
    return (run_watched(run, runs_tracked=runs_tracked) or run.settled is False
            or run.claimed_at >= since)


def plan_alerts(evidence: Evidence, open_alerts: Mapping[AlertRule, Alert], *,
                now: datetime, tracked_since: datetime | None) -> list[AlertChange]:
    """The changes to the alerts of one schedule: open what holds and is not open, count again
    an open one that a new run shows, resolve an open one that no longer holds (or whose rule
    was turned off), leave alone what cannot be judged.

    ``tracked_since``: from when the leader knows the workers track runs (None: it does not);
    the rules that need tracking are judged only then."""
    changes: list[AlertChange] = []
    name = evidence.schedule_name
    for rule in AlertRule:
        current = open_alerts.get(rule)
        if not evidence.rules.on(rule):
            if current is not None:
                changes.append(AlertChange(schedule_name=name, rule=rule, action="resolve",
                                           reason="the rule was turned off"))
            continue
        verdict = judge(rule, evidence, now=now, tracked_since=tracked_since)
        if isinstance(verdict, _Unjudged):
            continue
        if verdict is None:
            if current is not None:
                changes.append(AlertChange(schedule_name=name, rule=rule, action="resolve",
                                           reason=current.reason))
        elif current is None:
            changes.append(AlertChange(schedule_name=name, rule=rule, action="open",
                                       reason=verdict.reason, key=verdict.key))
        elif verdict.key is not None and verdict.key != current.key:
            changes.append(AlertChange(schedule_name=name, rule=rule, action="repeat",
                                       reason=verdict.reason, key=verdict.key))
    return changes


def judge(rule: AlertRule, evidence: Evidence, *, now: datetime,
          tracked_since: datetime | None) -> Verdict:
    """Whether ``rule`` holds for the schedule at ``now`` (its rule in force)."""
    if rule.needs_tracking and tracked_since is None:
        return UNJUDGED
    rules, runs = evidence.rules, evidence.runs
    if rule is AlertRule.MISSED:
        assert rules.missed is not None
        return _missed(runs, rules.missed)
    if rule is AlertRule.LATE:
        assert rules.late is not None
        return _late(runs, rules.late)
    if rule is AlertRule.FAILED:
        assert rules.failures is not None
        return _failed(runs, rules.failures, evidence.failures_in_a_row)
    if rule is AlertRule.LOST:
        assert rules.lost is not None
        return _lost(runs, rules.lost)
    if rule is AlertRule.OVERRUN:
        assert rules.max_runtime is not None
        return _overrun(runs, rules.max_runtime, now)
    assert rules.silent is not None and tracked_since is not None
    return _silent(evidence, rules.silent, now, tracked_since)


def _scheduled(runs: Sequence[Execution]) -> list[Execution]:
    """The runs of the schedule's own occurrences (no manual run, nothing held back)."""
    return [run for run in runs if not run.manual and run.state is not ExecutionState.HELD]


def _missed(runs: Sequence[Execution], missed: int) -> Verdict:
    """``missed`` occurrences in a row did not run, up to the newest: those coalesced before
    the newest run, or, while the newest did not run (it expired, or the misfire rule gave it
    up), those that did not run since the last that did."""
    scheduled = [run for run in _scheduled(runs)
                 if run.state is not ExecutionState.SKIPPED or run.given_up]
    if not scheduled:
        return UNJUDGED
    newest = scheduled[0]
    if newest.state is not ExecutionState.EXPIRED and not newest.given_up:
        if newest.missed < missed:
            return None  # it ran, after fewer missed than the rule waits for
        plural = "s" if newest.missed > 1 else ""
        return Finding(f"{newest.missed} occurrence{plural} before {newest.key} did not run: "
                       "no leader sent them in time (coalesced by the misfire policy, or later "
                       "than the misfire grace)", newest.key)
    in_a_row, ended = 0, False
    for run in scheduled:
        if run.state is not ExecutionState.EXPIRED and not run.given_up:
            ended = True
            break
        # A given-up row counts itself in its missed count; an expired one does not.
        in_a_row += run.missed if run.given_up else 1 + run.missed
    if in_a_row < missed:
        return UNJUDGED  # none ran since: the streak may still reach the count
    # A streak that fills every run read may be longer.
    least = "" if ended or len(runs) < ALERT_DEPTH else "at least "
    streak = (f"; {least}{in_a_row} occurrences in a row did not run" if in_a_row > 1
              else "")
    if newest.given_up:
        return Finding(f"occurrence {newest.key} was not sent: {newest.last_error}{streak}",
                       newest.key)
    return Finding(f"occurrence {newest.key} passed its starting deadline before it could "
                   f"be sent (no leader could send it in time{streak})", newest.key)


def _late(runs: Sequence[Execution], late: timedelta) -> Verdict:
    newest = next((run for run in _scheduled(runs) if run.submitted_at is not None), None)
    if newest is None or newest.submitted_at is None:
        return UNJUDGED
    lateness = newest.submitted_at - newest.due_at
    if lateness > late:
        return Finding(f"run {newest.key} sent {measured_text(lateness)} after it was due "
                       f"(more than {seconds_text(late)})", newest.key)
    return None


def _ended(runs: Sequence[Execution]) -> list[Execution]:
    """The runs with a known outcome, newest first."""
    return [run for run in runs if run.run_state in _KNOWN_ENDS]


def _failed(runs: Sequence[Execution], failures: int, counted: int) -> Verdict:
    ended = _ended(runs)
    if not ended:
        return UNJUDGED
    if ended[0].run_state is RunState.SUCCEEDED:
        return None
    in_a_row = 0
    for run in ended:
        if run.run_state is not RunState.FAILED:
            break
        in_a_row += 1
    if in_a_row >= failures:
        last = ended[0]
        # Only the newest ALERT_DEPTH runs are read: a streak that fills them may be longer,
        # as the schedule's own count may tell.
        if in_a_row < len(ended) or len(runs) < ALERT_DEPTH:
            streak = f"{in_a_row}"
        elif counted > in_a_row:
            streak = f"{counted}"
        else:
            streak = f"at least {in_a_row}"
        return Finding(f"{streak} runs failed in a row (the last, {last.key}: "
                       f"{last.run_error or 'no error given'})", last.key)
    return UNJUDGED


def _lost(runs: Sequence[Execution], lost: int) -> Verdict:
    """``lost`` runs were marked lost since the last success."""
    ended = _ended(runs)
    if not ended:
        return UNJUDGED
    found: list[Execution] = []
    succeeded = False
    for run in ended:
        if run.run_state is RunState.SUCCEEDED:
            succeeded = True
            break
        if run.run_state is RunState.LOST:
            found.append(run)
    if len(found) >= lost:
        newest = found[0]
        # Where no success is among the runs read, more may have been lost before them.
        least = "" if succeeded or len(runs) < ALERT_DEPTH else "at least "
        many = (f" ({least}{len(found)} runs lost since the last success)" if len(found) > 1
                else "")
        return Finding(f"run {newest.key} lost: {newest.run_error or 'no reason given'}{many}",
                       newest.key)
    if ended[0].run_state is RunState.SUCCEEDED:
        return None
    return UNJUDGED


def _overrun(runs: Sequence[Execution], max_runtime: timedelta, now: datetime) -> Verdict:
    for run in runs:
        if (run.run_state is RunState.RUNNING and run.started_at is not None
                and now - run.started_at > max_runtime):
            return Finding(f"run {run.key} has been running for "
                           f"{measured_text(now - run.started_at)} (more than "
                           f"{seconds_text(max_runtime)})", run.key)
    return None


def _silent(evidence: Evidence, window: timedelta, now: datetime,
            tracked_since: datetime) -> Verdict:
    if not evidence.enabled:
        return None  # a paused schedule is quiet on purpose
    since = now - window
    successes = [run.finished_at for run in evidence.runs
                 if run.run_state is RunState.SUCCEEDED and run.finished_at is not None]
    if any(finished > since for finished in successes):
        return None
    watched_from = max(tracked_since, evidence.created_at or tracked_since)
    if watched_from > since:
        return UNJUDGED  # not watched for a whole window yet
    last = (f"; the last success ended {max(successes).isoformat()}" if successes
            else "; none among its recent runs")
    return Finding(f"no run succeeded in the last {seconds_text(window)}{last}")
