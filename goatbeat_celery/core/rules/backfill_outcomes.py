"""What became of a backfill's occurrences, and the re-runs of the failed ones.

A backfill's own executions are those it claimed: an occurrence runs under its own key
(:func:`~goatbeat_celery.core.types.execution.idempotency_key`) when that key was free, else
under :func:`~goatbeat_celery.core.types.execution.backfill_key`. Executions carry no backfill
id, so one under the occurrence's own key counts as the backfill's when it bears a backfill
claim's marks: not manual, due when claimed (``due_at`` = ``claimed_at``: the leader's claims
of the live grid are due before they are claimed), claimed while the backfill was active.

The failed ones (:func:`~goatbeat_celery.core.rules.backfill.failed_execution`) are run again
under new keys, :func:`rerun_key`: ``<idempotency key>:backfill-<id>-rerun-<round>``, the
round counting the re-runs of that backfill from 1. Like every backfill key it never ends
with an instant, so it never equals a grid key, and a worker records reports on it as on any
run of that occurrence. A re-run is an ordinary (not manual) execution of its occurrence: a
later ``failed`` backfill sees that the occurrence succeeded since.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from goatbeat_celery.core.rules.backfill import Backfill, failed_execution
from goatbeat_celery.core.types.errors import ScheduleConflict
from goatbeat_celery.core.types.execution import (
    Execution,
    ExecutionState,
    backfill_key,
    idempotency_key,
)
from goatbeat_celery.core.types.run_query import outcome_of

__all__ = ["OUTCOME_ORDER", "BackfillOutcomes", "BackfillTally", "OutcomeCount", "Rerun",
           "RerunRound", "backfill_outcomes", "is_own_execution", "outcomes_from_tally",
           "rerun_executions", "rerun_exists", "rerun_key", "rerun_round", "round_of",
           "tally_executions"]

#: The order outcomes are shown in: ends first (failures before successes would hide
#: nothing, but an operator looks for these), then what is still under way.
OUTCOME_ORDER = ("succeeded", "failed", "lost", "expired", "abandoned", "revoked", "rejected",
                 "unknown", "skipped", "running", "retrying", "submitted", "claimed", "held")

_ROUND = re.compile(r"-rerun-([1-9][0-9]{0,8})\Z")


def rerun_key(schedule_name: str, occurrence: datetime, backfill_id: int, round_: int) -> str:
    """The key of ``occurrence`` run again in re-run ``round_`` of backfill ``backfill_id``."""
    return backfill_key(schedule_name, occurrence, f"{backfill_id}-rerun-{round_}")


def rerun_round(backfill: Backfill, execution: Execution) -> int | None:
    """The re-run round of ``backfill`` that ``execution`` is a run of, None: none."""
    prefix = backfill_key(backfill.schedule_name, execution.occurrence_at, backfill.id)
    if execution.manual or not execution.key.startswith(prefix):
        return None
    found = _ROUND.fullmatch(execution.key[len(prefix):])
    if found is None or execution.key != rerun_key(backfill.schedule_name,
                                                   execution.occurrence_at, backfill.id,
                                                   int(found.group(1))):
        return None
    return int(found.group(1))


def is_own_execution(backfill: Backfill, execution: Execution) -> bool:
    """Whether ``backfill`` claimed ``execution`` (see the module's docstring)."""
    name, at = backfill.schedule_name, execution.occurrence_at
    if (execution.manual or execution.schedule_name != name
            or not backfill.start <= at <= backfill.end):
        return False
    if execution.key == backfill_key(name, at, backfill.id):
        return True
    return (execution.key == idempotency_key(name, at)
            and execution.due_at == execution.claimed_at
            and backfill.created_at is not None and execution.claimed_at >= backfill.created_at
            and (backfill.finished_at is None or execution.claimed_at <= backfill.finished_at))


@dataclass(frozen=True, kw_only=True)
class RerunRound:
    """One re-run of a backfill's failed occurrences: its round and its runs' outcomes."""

    round: int
    requested_at: datetime
    outcomes: dict[str, int]

    @property
    def runs(self) -> int:
        return sum(self.outcomes.values())


@dataclass(frozen=True, kw_only=True)
class Rerun:
    """Re-run ``round`` of ``backfill``'s failed occurrences, as requested: its executions."""

    backfill: Backfill
    round: int
    executions: tuple[Execution, ...]


@dataclass(frozen=True, kw_only=True)
class BackfillOutcomes:
    """What became of a backfill's occurrences.

    ``outcomes``: its own runs counted by outcome
    (:func:`~goatbeat_celery.core.types.run_query.outcome_of`: the run state once a worker
    reported, else the dispatch state); ``not_recorded``: runs it claimed whose execution is
    gone (pruned by the retention); ``not_run``: occurrences it looked at and did not run (its
    mode left them alone); ``to_examine``: occurrences not looked at yet. ``reruns``: its
    re-runs, oldest first. ``failed``: the occurrences whose latest run (its own or a re-run's)
    failed, oldest first: what "re-run the failed ones" runs."""

    backfill: Backfill
    outcomes: dict[str, int]
    not_recorded: int
    not_run: int
    to_examine: int
    reruns: tuple[RerunRound, ...] = ()
    failed: tuple[datetime, ...] = field(default=())

    @property
    def next_round(self) -> int:
        return max((r.round for r in self.reruns), default=0) + 1


class OutcomeCount(NamedTuple):
    """How many of a backfill's runs show ``outcome``
    (:func:`~goatbeat_celery.core.types.run_query.outcome_of`): of its own runs when ``round``
    is 0, else of that re-run's; ``first_claimed_at``: the earliest claim among them."""

    round: int
    outcome: str
    runs: int
    first_claimed_at: datetime


@dataclass(frozen=True)
class BackfillTally:
    """What a store counts of a backfill's executions (``BackfillStore.backfill_tally``): its
    runs by round and outcome, and the occurrences whose latest run (by claim, then key, among
    its own and its re-runs') failed (:func:`~goatbeat_celery.core.rules.backfill.
    failed_execution`), oldest first."""

    counts: tuple[OutcomeCount, ...]
    failed: tuple[datetime, ...]


def round_of(tail: str) -> int | None:
    """The re-run round a key's text after ``-rerun-`` names, None: none (a store counting
    re-runs in SQL groups them by that text)."""
    found = _ROUND.fullmatch("-rerun-" + tail)
    return None if found is None else int(found.group(1))


def _ordered(counts: dict[str, int]) -> dict[str, int]:
    return {outcome: counts[outcome] for outcome in
            sorted(counts, key=lambda o: (OUTCOME_ORDER.index(o)
                                          if o in OUTCOME_ORDER else len(OUTCOME_ORDER), o))}


def tally_executions(backfill: Backfill, executions: Sequence[Execution]) -> BackfillTally:
    """The tally of ``backfill`` from ``executions``, those of its schedule's occurrences in
    its range claimed since it was created (others are ignored): what a store without SQL
    counts."""
    counts: Counter[tuple[int, str]] = Counter()
    first: dict[int, datetime] = {}
    latest: dict[datetime, Execution] = {}
    for execution in executions:
        round_ = 0 if is_own_execution(backfill, execution) else rerun_round(backfill,
                                                                                execution)
        if round_ is None:
            continue
        counts[round_, outcome_of(execution.state.value, None if execution.run_state is None
                                  else execution.run_state.value)] += 1
        first[round_] = min(first.get(round_, execution.claimed_at), execution.claimed_at)
        before = latest.get(execution.occurrence_at)
        if before is None or (execution.claimed_at, execution.key) > (before.claimed_at,
                                                                       before.key):
            latest[execution.occurrence_at] = execution
    return BackfillTally(
        counts=tuple(OutcomeCount(r, o, n, first[r]) for (r, o), n in sorted(counts.items())),
        failed=tuple(sorted(at for at, e in latest.items() if failed_execution(e))))


def outcomes_from_tally(backfill: Backfill, tally: BackfillTally) -> BackfillOutcomes:
    """The outcomes of ``backfill`` from its store's tally."""
    by_round: dict[int, dict[str, int]] = {}
    first: dict[int, datetime] = {}
    for count in tally.counts:
        outcomes = by_round.setdefault(count.round, {})
        outcomes[count.outcome] = outcomes.get(count.outcome, 0) + count.runs
        first[count.round] = min(first.get(count.round, count.first_claimed_at),
                                 count.first_claimed_at)
    own = by_round.pop(0, {})
    return BackfillOutcomes(
        backfill=backfill, outcomes=_ordered(own),
        not_recorded=max(backfill.claimed - sum(own.values()), 0),
        not_run=max(backfill.examined - backfill.claimed, 0),
        to_examine=max(backfill.total - backfill.examined, 0),
        reruns=tuple(RerunRound(round=r, requested_at=first[r], outcomes=_ordered(by_round[r]))
                     for r in sorted(by_round)),
        failed=tuple(sorted(tally.failed)))


def backfill_outcomes(backfill: Backfill, executions: Sequence[Execution]) -> BackfillOutcomes:
    """The outcomes of ``backfill`` from ``executions``, those of its schedule's occurrences
    in its range (others are ignored)."""
    return outcomes_from_tally(backfill, tally_executions(backfill, executions))


def rerun_executions(backfill: Backfill, round_: int, occurrences: Sequence[datetime], *,
                     now: datetime) -> list[Execution]:
    """The executions re-run ``round_`` of ``backfill`` inserts for ``occurrences``: ``claimed``
    at store-time ``now``, due then, no attempt yet and token 0 (no leader claimed them: the
    leader sends them with its pending claims, as a manual run)."""
    name = backfill.schedule_name
    return [Execution(key=rerun_key(name, at, backfill.id, round_), schedule_name=name,
                      occurrence_at=at, due_at=now, token=0, state=ExecutionState.CLAIMED,
                      claimed_at=now, attempts=0)
            for at in occurrences]


def rerun_exists(backfill: Backfill, round_: int) -> ScheduleConflict:
    """What a store raises when re-run ``round_`` of ``backfill`` was requested already."""
    return ScheduleConflict(f"re-run {round_} of backfill {backfill.id} was requested already "
                            "(by someone else just now?); reload to see it")
