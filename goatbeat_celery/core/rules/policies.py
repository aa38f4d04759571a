"""Run policies: what a schedule does with a run that has not finished, and what a finished run
does to its schedule. Pure rules, decided here once; the engine and the stores only apply them.

Three policies need to know when a run finished, which only run tracking
(:mod:`goatbeat_celery.core.rules.runs`) tells:

* **overlap** (:class:`OverlapPolicy`): a due occurrence whose schedule still has a run that
  has not finished is claimed anyway (``allow``, the default), recorded as skipped with its
  reason (``skip``), or claimed and held back (``buffer_one``: at most one waits, and is sent as
  soon as the run before it ends);
* **fixed delay** (:class:`ScheduleMode`): the next run is due a fixed delay after the previous
  one *finished*, instead of on the fixed-rate grid;
* **failure backoff and pause** (:class:`FailureBackoff`, ``pause_after_failures``): after a
  failed run the next one waits at least ``base · factor^(n-1)`` (capped) from the end of the
  ``n``-th failure in a row; after ``pause_after_failures`` failures in a row the schedule
  pauses itself, with the reason recorded, until it is resumed. A success resets both.

No policy may wait forever for news that never comes. A run counts as finished when a worker
reports its end, when the leader marks it ``lost`` (its worker went silent, or it never started
within the start timeout while the workers track runs) or ``unknown`` (no worker reported on
it within the start timeout where the workers do not track runs: what happens to every run
then), and when it was never sent (abandoned, expired, skipped). Only a ``failed`` report
counts as a failure: a lost, unknown, revoked or rejected run neither resets nor extends a run
of failures, so workers without tracking never pause a schedule.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from goatbeat_celery.core.rules import validation
from goatbeat_celery.core.rules.runs import RunState
from goatbeat_celery.core.types.policies import (
    DEFAULT_BACKOFF_FACTOR,
    MAX_BACKOFF_FACTOR,
    MAX_PAUSE_AFTER,
    Choice,
    FailureBackoff,
    OverlapPolicy,
    ScheduleMode,
    backoff_problems,
)

if TYPE_CHECKING:
    from goatbeat_celery.core.types.execution import Execution

__all__ = [
    "DEFAULT_BACKOFF_FACTOR",
    "MAX_BACKOFF_FACTOR",
    "MAX_PAUSE_AFTER",
    "PENDING_STATES",
    "Choice",
    "FailureBackoff",
    "GridAfter",
    "OverlapAction",
    "OverlapDecision",
    "OverlapPolicy",
    "RunEnd",
    "ScheduleMode",
    "Settlement",
    "backoff_problems",
    "execution_end",
    "overlap_decision",
    "pause_reason",
    "run_end",
    "settle",
]


# -- overlap ---------------------------------------------------------------------------------
class OverlapAction(str, enum.Enum):
    """What becomes of one due occurrence: its execution row is ``claimed`` (sent at once),
    ``held`` (claimed, sent once the run before it finishes) or ``skipped`` (never sent)."""

    CLAIM = "claim"
    HOLD = "hold"
    SKIP = "skip"


@dataclass(frozen=True, kw_only=True, slots=True)
class OverlapDecision:
    action: OverlapAction
    #: Why it was skipped (recorded on the row), or what it waits for.
    reason: str | None = None


_CLAIM = OverlapDecision(action=OverlapAction.CLAIM)


def overlap_decision(policy: OverlapPolicy, *, unfinished: str | None,
                     waiting: str | None) -> OverlapDecision:
    """The fate of a due occurrence of a schedule with ``policy``, given the key of a run of
    it that has not finished (``unfinished``, None: none) and of a claim held back waiting for
    it (``waiting``, None: none).

    A held claim counts as a run ahead of the occurrence, so that ``buffer_one`` never holds
    two and ``skip`` never claims next to one (left from an earlier policy).
    """
    if policy is OverlapPolicy.ALLOW or (unfinished is None and waiting is None):
        return _CLAIM
    if waiting is not None:
        return OverlapDecision(action=OverlapAction.SKIP,
                               reason=f"run {waiting} is already waiting for its turn")
    if policy is OverlapPolicy.BUFFER_ONE:
        return OverlapDecision(action=OverlapAction.HOLD,
                               reason=f"waits for run {unfinished} to finish")
    return OverlapDecision(action=OverlapAction.SKIP,
                           reason=f"run {unfinished} had not finished")


# -- the end of a run ------------------------------------------------------------------------
class RunEnd(str, enum.Enum):
    """How a finished run counts for its schedule: a success resets its failures, a failure
    extends them, and a neutral end (lost, unknown, revoked, rejected, never sent) does
    neither."""

    SUCCESS = "success"
    FAILURE = "failure"
    NEUTRAL = "neutral"


_END_OF = {RunState.SUCCEEDED: RunEnd.SUCCESS, RunState.FAILED: RunEnd.FAILURE,
           RunState.REVOKED: RunEnd.NEUTRAL, RunState.REJECTED: RunEnd.NEUTRAL,
           RunState.LOST: RunEnd.NEUTRAL, RunState.UNKNOWN: RunEnd.NEUTRAL}
#: Execution states of a run that may still happen: claimed (to be sent), submitted, or held.
PENDING_STATES = frozenset({"claimed", "submitted", "held"})


def run_end(run_state: RunState | None, *, pending: bool) -> RunEnd | None:
    """How a run ended, from its ``run_state`` and whether its execution may still run
    (``pending``: claimed, submitted or held); None while it has not finished."""
    if run_state is None:
        return None if pending else RunEnd.NEUTRAL
    return _END_OF.get(run_state)


def execution_end(execution: Execution) -> RunEnd | None:
    """:func:`run_end` of an execution row."""
    return run_end(execution.run_state, pending=execution.state in PENDING_STATES)


@dataclass(frozen=True, kw_only=True, slots=True)
class Settlement:
    """What a finished run writes on its schedule: the failures in a row, the next times
    (unchanged unless a fixed delay or a backoff moves them), and ``paused_reason`` when the
    schedule pauses itself (it is then disabled)."""

    consecutive_failures: int
    next_occurrence_at: datetime | None
    next_run_at: datetime | None
    paused_reason: str | None = None
    #: The pause the backoff imposes from the run's end (zero: none), for logs.
    backoff: timedelta = timedelta(0)


#: Given an instant, the first ``(occurrence, due)`` of the schedule's grid due strictly after
#: it (:func:`~goatbeat_celery.core.rules.misfire.first_occurrence`).
GridAfter = Callable[[datetime], "tuple[datetime | None, datetime | None]"]


def settle(end: RunEnd, *, finished_at: datetime, failures: int, mode: ScheduleMode,
           delay: timedelta | None, backoff: FailureBackoff | None, pause_after: int | None,
           next_occurrence_at: datetime | None, next_run_at: datetime | None,
           grid_after: GridAfter, run_error: str | None = None) -> Settlement:
    """What a run that ended (``end``) at ``finished_at`` writes on its schedule, which had
    ``failures`` failed runs in a row before it and the next times given.

    * Failures in a row: reset by a success, + 1 for a failure, kept for a neutral end.
    * Fixed delay (``delay`` = the interval): the next run is due ``delay`` after the end, or
      later if a backoff says so: the latest of the two, as an occurrence of its own.
    * Fixed rate with a backoff: the next run is the first grid point due at or after the
      backoff's end, if that is later than the one planned; the points passed over are not
      missed (they were held back on purpose).
    * Pause: after ``pause_after`` failures in a row the schedule pauses itself with a reason.
    """
    if end is RunEnd.SUCCESS:
        count = 0
    elif end is RunEnd.FAILURE:
        count = min(max(failures, 0) + 1, MAX_PAUSE_AFTER)
    else:
        count = max(failures, 0)
    wait = backoff.delay(count) if backoff is not None and end is RunEnd.FAILURE \
        else timedelta(0)
    earliest = finished_at + wait
    occurrence, run = next_occurrence_at, next_run_at
    if mode is ScheduleMode.FIXED_DELAY and delay is not None:
        due = max(finished_at + delay, earliest)
        # Never earlier than already planned: runs settled out of order keep the latest end.
        if run is None or due > run:
            occurrence, run = due, due
    elif wait and run is not None and run < earliest:
        occurrence, run = grid_after(earliest - _MICROSECOND)
    reason = None
    if end is RunEnd.FAILURE and pause_after is not None and count >= pause_after:
        reason = pause_reason(count, run_error)
    return Settlement(consecutive_failures=count, next_occurrence_at=occurrence,
                      next_run_at=run, paused_reason=reason, backoff=wait)


_MICROSECOND = timedelta(microseconds=1)


def pause_reason(failures: int, run_error: str | None) -> str:
    """The reason a schedule records when it pauses itself."""
    last = f"; last error: {run_error}" if run_error else ""
    return validation.reason_text(
        f"paused after {failures} failed runs in a row{last}")
