"""Backfills: run a schedule's occurrences of a past range, without moving its next run.

A backfill is a stored request (:class:`Backfill`) that the leader drains a few occurrences
at a time, after the live schedules of each tick are dispatched. Every rule is written once
here and used by the engine (which occurrences a step runs and under which key), the API (the
range check, the cap, a dry run) and the stores (what a step writes):

* the occurrences are the trigger's grid points in ``[start, end]`` (unshifted by the
  schedule's offset, as in idempotency keys);
* ``missing`` runs those with no execution; ``failed`` those whose latest execution failed
  (the worker reported ``failed``, the run was judged ``lost``, or it was never sent:
  ``expired`` or ``abandoned``), an earlier backfill's run counting as the latest; ``all``
  runs every one;
* an occurrence runs under its own key
  (:func:`~goatbeat_celery.core.types.execution.idempotency_key`) while that key is free; one
  whose key is taken runs under a key of the backfill (:func:`backfill_key`), so that the
  request, not the occurrence, is what is run once;
* a run is due when the leader claims it (``due_at`` = ``claimed_at``, as for a manual run):
  lateness figures measure how long sending took, not how old the range is.

A step is applied by the store in one transaction fenced by the lease, with a compare-and-set
on the backfill's ``examined`` count: executions keyed as above are inserted where new, and
the cursor moves on. A crash or a failover between the claim and the broker leaves the rows
``claimed``, sent again under the same keys like any other claim; a new leader goes on from
the stored cursor.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from goatbeat_celery.core.rules import validation
from goatbeat_celery.core.rules.policies import Choice
from goatbeat_celery.core.rules.runs import RunState
from goatbeat_celery.core.types.execution import (
    Execution,
    ExecutionState,
    backfill_key,
    idempotency_key,
)
from goatbeat_celery.core.types.instants import ensure_aware
from goatbeat_celery.core.types.problems import Problem, listed

#: The most occurrences one backfill may cover; a longer range is refused (split it).
MAX_BACKFILL_OCCURRENCES = 100_000
#: The most occurrences one backfill may claim in one tick (``per_tick``).
MAX_PER_TICK = 10_000
#: Active backfills the leader works on in one tick, oldest first.
BACKFILLS_PER_TICK = 10

_MICROSECOND = timedelta(microseconds=1)

#: The next grid point strictly after an instant (a trigger's ``next_after``), None: none.
NextAfter = Callable[[datetime], "datetime | None"]


class BackfillMode(Choice):
    """Which occurrences of the range a backfill runs.

    * ``missing`` those with no execution (never claimed, or pruned since);
    * ``failed`` those whose execution failed: the worker reported ``failed``, the run was
      judged ``lost``, or it was never sent (``expired``, ``abandoned``);
    * ``all`` every one.
    """

    MISSING = "missing"
    FAILED = "failed"
    ALL = "all"

    @classmethod
    def _noun(cls) -> str:
        return "mode"


class BackfillState(str, enum.Enum):
    """``active`` while the leader drains it; then ``done``, ``cancelled`` (by an operator)
    or ``failed`` (set aside: its row could not be read, or its schedule cannot run; the
    reason in ``error``)."""

    ACTIVE = "active"
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"


@dataclass(frozen=True, kw_only=True)
class BackfillRequest:
    """What :meth:`~goatbeat_celery.core.protocols.ScheduleStore.create_backfill` stores:
    the range (aware instants, checked by :func:`request_problems`) and how to drain it;
    ``total`` is the number of occurrences in the range."""

    schedule_name: str
    start: datetime
    end: datetime
    mode: BackfillMode = BackfillMode.MISSING
    newest_first: bool = False
    per_tick: int | None = None
    total: int = 0


@dataclass(frozen=True, kw_only=True)
class Backfill:
    """A stored backfill request and its progress.

    ``cursor`` is the last occurrence examined (None: none yet): the next step starts strictly
    after it, or strictly before it when ``newest_first``. ``examined`` counts the occurrences
    looked at, ``claimed`` those run. ``per_tick`` None: the ``backfill_per_tick`` setting.
    ``damage`` names the columns of the stored row that could not be read (edited by hand): the
    leader sets such a backfill aside.
    """

    id: int
    schedule_name: str
    start: datetime
    end: datetime
    mode: BackfillMode
    newest_first: bool = False
    per_tick: int | None = None
    total: int = 0
    examined: int = 0
    claimed: int = 0
    cursor: datetime | None = None
    state: BackfillState = BackfillState.ACTIVE
    created_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None
    damage: tuple[Problem, ...] = ()

    @property
    def active(self) -> bool:
        return self.state is BackfillState.ACTIVE


@dataclass(frozen=True, kw_only=True)
class BackfillRun:
    """One occurrence a backfill runs: its instant, the key it runs under, and why."""

    occurrence_at: datetime
    key: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class BackfillPreview:
    """What a backfill would run (a dry run): the ``total`` occurrences of the range, and the
    ``runs`` of them its mode runs, in the order it would run them. A key derived for an
    occurrence run again carries ``backfill-new`` in place of the id the backfill would get."""

    schedule_name: str
    start: datetime
    end: datetime
    mode: BackfillMode
    newest_first: bool
    total: int
    runs: tuple[BackfillRun, ...]


@dataclass(frozen=True, kw_only=True)
class BackfillStep:
    """What one step of backfill ``backfill_id`` writes, applied only while the stored
    ``examined`` still equals ``examined_before`` (compare-and-set: a stale leader's step, or
    one planned before a cancel, writes nothing): the ``runs`` as ``claimed`` executions,
    ``examined`` more occurrences looked at, the cursor moved to ``cursor``, and the backfill
    ``done`` when the range is exhausted."""

    backfill_id: int
    schedule_name: str
    examined_before: int
    examined: int
    cursor: datetime | None
    runs: tuple[BackfillRun, ...]
    done: bool


@dataclass(frozen=True, kw_only=True)
class BackfillProgress:
    """The values a step writes on the backfill row (:func:`progress_after`)."""

    examined: int
    claimed: int
    cursor: datetime | None
    state: BackfillState
    finished_at: datetime | None


def failed_execution(execution: Execution) -> bool:
    """Whether ``execution`` failed, as the ``failed`` mode understands it."""
    if execution.state in (ExecutionState.EXPIRED, ExecutionState.ABANDONED):
        return True
    return execution.run_state in (RunState.FAILED, RunState.LOST)


def choose_runs(backfill: Backfill, occurrences: Sequence[datetime],
                existing: Sequence[Execution], *,
                backfill_id: int | str | None = None) -> list[BackfillRun]:
    """Of ``occurrences``, those ``backfill``'s mode runs, with their keys and why, given the
    ``existing`` executions of its schedule for these occurrences (under any key: the
    occurrence's own, or one of an earlier backfill; manual runs are no occurrence's).

    An occurrence is judged by its latest execution (by claim): an occurrence that failed, and
    was run again by a backfill that succeeded, has not failed any more. ``backfill_id``: what
    derived keys carry in place of the backfill's id, for a dry run of one not stored yet."""
    name = backfill.schedule_name
    tag = backfill.id if backfill_id is None else backfill_id
    by_occurrence: dict[datetime, list[Execution]] = {}
    for execution in existing:
        if not execution.manual:
            by_occurrence.setdefault(execution.occurrence_at, []).append(execution)
    runs: list[BackfillRun] = []
    for occurrence in occurrences:
        key = idempotency_key(name, occurrence)
        found = by_occurrence.get(occurrence, [])
        if not found:
            if backfill.mode is not BackfillMode.FAILED:
                runs.append(BackfillRun(occurrence_at=occurrence, key=key,
                                        reason="no execution"))
            continue
        if backfill.mode is BackfillMode.MISSING:
            continue
        latest = max(found, key=lambda e: (e.claimed_at, e.key))
        if backfill.mode is BackfillMode.FAILED and not failed_execution(latest):
            continue
        if any(e.key == key for e in found):
            key = backfill_key(name, occurrence, tag)
        runs.append(BackfillRun(occurrence_at=occurrence, key=key, reason=_outcome(latest)))
    return runs


def _outcome(execution: Execution) -> str:
    if execution.run_state is not None:
        return f"run {execution.run_state.value}"
    return f"execution {execution.state.value}"


def occurrences_between(next_after: NextAfter, start: datetime, end: datetime,
                        limit: int) -> list[datetime]:
    """The grid points in ``[start, end]``, oldest first, at most ``limit``."""
    found: list[datetime] = []
    point = next_after(start - _MICROSECOND)
    while point is not None and point <= end and len(found) < limit:
        found.append(point)
        point = next_after(point)
    return found


def count_occurrences(next_after: NextAfter, start: datetime, end: datetime,
                      cap: int = MAX_BACKFILL_OCCURRENCES) -> int:
    """How many grid points ``[start, end]`` holds, counting no further than ``cap`` + 1."""
    return len(occurrences_between(next_after, start, end, cap + 1))


def next_window(backfill: Backfill, next_after: NextAfter,
                count: int) -> tuple[list[datetime], bool]:
    """The next (up to) ``count`` occurrences of ``backfill`` from its cursor, in the order
    they run, and whether the range is exhausted after them."""
    start, end, cursor = backfill.start, backfill.end, backfill.cursor
    if not backfill.newest_first:
        after = start - _MICROSECOND if cursor is None else cursor
        found = occurrences_between(next_after, after + _MICROSECOND, end, count + 1)
        return found[:count], len(found) <= count
    # Triggers only look forward: read a window ending at the cursor, widened until it holds
    # enough points or reaches the start of the range.
    below = end if cursor is None else cursor - _MICROSECOND
    if below < start:
        return [], True
    left = max(backfill.total - backfill.examined, 1)
    width = max((below - start) * min(1.0, (count + 1) / left), timedelta(seconds=1))
    while True:
        low = max(start, below - width)
        points = occurrences_between(next_after, low, below, MAX_BACKFILL_OCCURRENCES + 1)
        if len(points) > count or low <= start:
            newest = list(reversed(points))
            return newest[:count], low <= start and len(points) <= count
        width *= 2


def progress_after(backfill: Backfill, step: BackfillStep, inserted: int,
                   now: datetime) -> BackfillProgress:
    """What ``step`` writes on ``backfill`` once the store inserted ``inserted`` of its runs
    (a key taken already, by a live claim or an earlier attempt, ran already)."""
    done = step.done
    return BackfillProgress(
        examined=backfill.examined + step.examined, claimed=backfill.claimed + inserted,
        cursor=step.cursor if step.cursor is not None else backfill.cursor,
        state=BackfillState.DONE if done else BackfillState.ACTIVE,
        finished_at=now if done else None)


def step_executions(step: BackfillStep, *, token: int, now: datetime) -> list[Execution]:
    """The executions a step inserts: ``claimed`` at store-time ``now`` under the lease
    ``token``, first attempt, due when claimed (the occurrence is past by design: judging it
    late would only say how old the range is)."""
    return [Execution(key=run.key, schedule_name=step.schedule_name,
                      occurrence_at=run.occurrence_at, due_at=now, token=token,
                      state=ExecutionState.CLAIMED, claimed_at=now, attempts=1)
            for run in step.runs]


def request_problems(request: BackfillRequest, now: datetime) -> list[Problem]:
    """Every problem with a backfill request, judged at store-time ``now``."""
    found: list[Problem] = []
    found.extend(validation.name_problems(request.schedule_name, "schedule"))
    for label, value in (("start", request.start), ("end", request.end)):
        if not isinstance(value, datetime) or value.utcoffset() is None:
            found.append(Problem(label, f"expected an aware datetime, got {value!r}"))
        else:
            found.extend(listed(validation.instant_problem(value, label)))
    if not found:
        start, end = ensure_aware(request.start, "start"), ensure_aware(request.end, "end")
        if start > end:
            found.append(Problem("end", f"must not be before start ({end.isoformat()} < "
                                 f"{start.isoformat()})"))
        if end > now:
            found.append(Problem("end", f"must not be in the future ({end.isoformat()} > "
                                 f"{now.isoformat()})",
                                 "the schedule runs those occurrences itself"))
    if not isinstance(request.mode, BackfillMode):
        found.append(BackfillMode.unknown(request.mode, "mode"))
    if not isinstance(request.newest_first, bool):
        found.append(Problem("newest_first",
                             f"expected true or false, got {request.newest_first!r}"))
    if request.per_tick is not None:
        problem = validation.count_problem(request.per_tick, "per_tick", minimum=1,
                                           maximum=MAX_PER_TICK)
        if problem is not None:
            found.append(problem)
    return found


def stored_problems(backfill: Backfill) -> list[Problem]:
    """Every problem with a backfill as read from its row (edited by hand)."""
    found = [_unreadable(entry) for entry in backfill.damage]
    if found:
        return found
    if backfill.start > backfill.end:
        found.append(Problem("end", "before start"))
    if backfill.per_tick is not None:
        problem = validation.count_problem(backfill.per_tick, "per_tick", minimum=1,
                                           maximum=MAX_PER_TICK)
        if problem is not None:
            found.append(problem)
    if backfill.examined < 0 or backfill.claimed < 0:
        found.append(Problem("examined, claimed", "must not be negative"))
    return found


def _unreadable(damage: Problem) -> Problem:
    return Problem(damage.field, "cannot be read as stored"
                   + (f" ({damage.message})" if damage.message else ""))


__all__ = ["BACKFILLS_PER_TICK", "MAX_BACKFILL_OCCURRENCES", "MAX_PER_TICK", "Backfill",
           "BackfillMode", "BackfillPreview", "BackfillProgress", "BackfillRequest", "BackfillRun",
           "BackfillState", "BackfillStep", "NextAfter", "backfill_key", "choose_runs",
           "count_occurrences", "failed_execution", "next_window", "occurrences_between",
           "progress_after", "request_problems", "step_executions", "stored_problems"]
