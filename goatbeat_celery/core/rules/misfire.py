"""Misfire planning: "due at T, it is now T + 3 h" turned into the occurrences to claim.

A pure function of its arguments, so it is tested by tables of cases and shared by every store.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeGuard

from goatbeat_celery.core.rules.runs import seconds_text
from goatbeat_celery.core.rules.triggers import SeekableTrigger, Trigger
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.execution import GIVEN_UP
from goatbeat_celery.core.types.instants import ensure_aware
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.quick import quick_init
from goatbeat_celery.core.types.spec import MisfirePolicy

#: Without a grace, how late a point may be and still be walked to rather than counted: a
#: minutely cron walks an hour in full, not the days of a long outage.
NO_GRACE_WALK = timedelta(hours=1)
#: A trigger that is not seekable (cron, other Celery schedules) is walked point by point.
#: Points past the grace are only counted, and past MAX_COUNTED the walk jumps to the end (the
#: missed count is then a lower bound); points within the grace are walked in full, and more
#: than MAX_WALK of them is refused rather than letting one schedule stall the claim path.
MAX_COUNTED = 1_000
MAX_WALK = 1_000_000


@quick_init
@dataclass(frozen=True, kw_only=True)
class MisfirePlan:
    """The outcome of planning one schedule.

    ``run`` are the occurrences (grid points, oldest first) to claim now; ``missed`` counts due
    points that will never run; ``next_occurrence`` is the first point not yet due (``None``
    when the trigger is exhausted). ``given_up`` is the newest due point when none runs: it is
    recorded (skipped, never sent), so that what was missed shows, and alerts, at once.
    """

    run: tuple[datetime, ...]
    missed: int
    next_occurrence: datetime | None
    given_up: datetime | None = None


def plan_misfires(
    *,
    trigger: Trigger,
    first: datetime,
    now: datetime,
    offset: timedelta = timedelta(0),
    policy: MisfirePolicy = MisfirePolicy.LATEST,
    grace: timedelta | None = None,
    max_catchup: int = 100,
) -> MisfirePlan:
    """Plan the due occurrences of one schedule.

    ``first`` is the schedule's next occurrence (a grid point of ``trigger``); an occurrence
    ``p`` is due when ``p + offset <= now``. The grace decides whether a due point may run at
    all: one later than ``grace`` (``now - (p + offset) > grace``) is missed under every
    policy; with no grace (None, the default) every due point may, however late. Of the points
    that may run, ``latest`` runs the most recent one (the others are coalesced into it),
    ``all`` runs each (the ``max_catchup`` most recent), and ``skip`` runs one only when it is
    the only point due (a schedule that fell behind does not catch up). Every due point that
    does not run is counted in ``missed``.

    Without a grace, the points more than :data:`NO_GRACE_WALK` late are only counted, as those
    past a grace are (a long outage must not hold the claim path), and the most recent of them
    are walked to only when too few points are newer.
    """
    first = ensure_aware(first, "first")
    now = ensure_aware(now, "now")
    if grace is not None and grace < timedelta(0):
        raise ConfigurationError([Problem("misfire_grace", f"must be >= 0, got {grace}")])
    if max_catchup < 1:
        raise ConfigurationError([Problem("max_catchup", f"must be >= 1, got {max_catchup}")])

    due_limit = now - offset  # points at or before this are due
    if first > due_limit:
        return MisfirePlan(run=(), missed=0, next_occurrence=first)

    # Points strictly before the bound are later than the grace: missed whatever the policy.
    # Without a grace they are only older than a walk in full may go, and may still run.
    bound = due_limit - (NO_GRACE_WALK if grace is None else grace)
    beyond, _, cursor = _points_before(trigger, first, bound, keep=0)
    keep = max_catchup if policy is MisfirePolicy.ALL else 1
    within: tuple[int, list[datetime], datetime | None] = (0, [], cursor)
    if cursor is not None:
        within = _points_before(trigger, cursor, due_limit + _MICROSECOND, keep=keep)
    count, tail, upcoming = within
    if grace is None and beyond and len(tail) < keep:
        older = _last_points_before(trigger, first, bound, keep - len(tail))
        count, beyond, tail = count + len(older), beyond - len(older), [*older, *tail]

    if policy is MisfirePolicy.SKIP and (beyond or count > 1):
        run: list[datetime] = []
    else:
        run = tail
    given_up = None
    if not run:  # something was due (first <= due_limit): all of it is given up
        given_up = tail[-1] if tail else _last_points_before(trigger, first, bound, 1)[-1]
    return MisfirePlan(run=tuple(run), missed=beyond + count - len(run),
                       next_occurrence=upcoming, given_up=given_up)


_MICROSECOND = timedelta(microseconds=1)
#: Whether each trigger class can seek: a runtime protocol check inspects every member of the
#: protocol, and it cost more than the rest of planning an interval schedule.
_SEEKABLE: dict[type, bool] = {}


def _seekable(trigger: Trigger) -> TypeGuard[SeekableTrigger]:
    kind = type(trigger)
    known = _SEEKABLE.get(kind)
    if known is None:
        known = _SEEKABLE[kind] = isinstance(trigger, SeekableTrigger)
    return known


def _points_before(
    trigger: Trigger, first: datetime, bound: datetime, keep: int
) -> tuple[int, list[datetime], datetime | None]:
    """Count points in ``[first, bound)``, keep the last ``keep``, and return the next point."""
    if first >= bound:
        return 0, [], first
    if _seekable(trigger):
        # ``first`` counts as it is (a row may hold an instant off the grid); seeking starts
        # from the grid point after it.
        second = trigger.next_after(first)
        if second is None or second >= bound:
            return 1, [first] if keep else [], second
        count, tail = trigger.points_before(second, bound, max(keep, 1))
        after = trigger.next_after(tail[-1])
        tail = [first, *tail] if count < keep else tail
        return count + 1, tail[-keep:] if keep else [], after
    tail_queue: deque[datetime] = deque(maxlen=keep)
    count = 0
    cursor: datetime | None = first
    while cursor is not None and cursor < bound:
        count += 1
        if keep:
            tail_queue.append(cursor)
        elif count >= MAX_COUNTED:
            # Only the count is wanted, and a long backlog (a next occurrence years behind,
            # written by hand) must not hold the claim path: jump to the first point at or
            # after the bound, and let the count stand as a lower bound.
            return count, [], trigger.next_after(bound - _MICROSECOND)
        if count > MAX_WALK:
            raise ConfigurationError(
                [Problem("trigger", f"more than {MAX_WALK} due occurrences to walk",
                         "the schedule is too frequent for its grace")]
            )
        cursor = trigger.next_after(cursor)
    return count, list(tail_queue), cursor


def _last_points_before(trigger: Trigger, first: datetime, bound: datetime,
                        keep: int) -> list[datetime]:
    """The last ``keep`` points in ``[first, bound)``: walked from ever earlier starts,
    doubling the reach back from ``bound``, so that a long backlog is walked only near its
    end."""
    reach = NO_GRACE_WALK
    while reach < bound - first:
        point = trigger.next_after(bound - reach - _MICROSECOND)
        if point is not None and point < bound:
            _, tail, _ = _points_before(trigger, point, bound, keep=keep)
            if len(tail) >= keep:
                return tail
        reach *= 2
    return _points_before(trigger, first, bound, keep=keep)[1]


def given_up_reason(missed: int, policy: MisfirePolicy, grace: timedelta | None) -> str:
    """The reason recorded on a given-up occurrence, ``missed`` due points given up with it."""
    plural = "s" if missed > 1 else ""
    return (f"{GIVEN_UP}: {missed} due occurrence{plural} given up, this the newest "
            f"(policy {policy.value}, {describe_grace(grace, seconds_text)})")


def describe_grace(grace: timedelta | None, shown: Callable[[timedelta], str]) -> str:
    """A misfire grace as the banner and ``check`` state it, ``shown`` formatting a duration."""
    return "no grace: runs however late" if grace is None else f"grace {shown(grace)}"


def first_occurrence(
    trigger: Trigger, now: datetime, offset: timedelta = timedelta(0)
) -> tuple[datetime | None, datetime | None]:
    """Where a new (or changed, or re-enabled) schedule starts: its first occurrence whose due
    instant is strictly after ``now``, as ``(occurrence, due)``; ``(None, None)`` if none."""
    occurrence = trigger.next_after(ensure_aware(now, "now") - offset)
    if occurrence is None:
        return None, None
    return occurrence, occurrence + offset
