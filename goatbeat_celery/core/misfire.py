"""Misfire planning: "due at T, it is now T + 3 h" turned into the occurrences to claim.

A pure function of its arguments, so it is tested by tables of cases and shared by every store.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta

from goatbeat_celery.core.errors import ConfigurationError
from goatbeat_celery.core.model import MisfirePolicy, ensure_aware
from goatbeat_celery.core.triggers import SeekableTrigger, Trigger

#: A trigger that is not seekable is walked point by point; past this many points it is refused
#: rather than letting one schedule stall the claim transaction.
MAX_WALK = 1_000_000


@dataclass(frozen=True, kw_only=True)
class MisfirePlan:
    """The outcome of planning one schedule.

    ``run`` are the occurrences (grid points, oldest first) to claim now; ``missed`` counts due
    points that will never run; ``next_occurrence`` is the first point not yet due (``None``
    when the trigger is exhausted).
    """

    run: tuple[datetime, ...]
    missed: int
    next_occurrence: datetime | None


def plan_misfires(
    *,
    trigger: Trigger,
    first: datetime,
    now: datetime,
    offset: timedelta = timedelta(0),
    policy: MisfirePolicy = MisfirePolicy.LATEST,
    grace: timedelta = timedelta(seconds=60),
    max_catchup: int = 100,
) -> MisfirePlan:
    """Plan the due occurrences of one schedule.

    ``first`` is the schedule's next occurrence (a grid point of ``trigger``); an occurrence
    ``p`` is due when ``p + offset <= now`` and *late* (misfired) when ``now - (p + offset)``
    exceeds ``grace``. Occurrences within the grace always run; late ones follow ``policy``.
    """
    first = ensure_aware(first, "first")
    now = ensure_aware(now, "now")
    if grace < timedelta(0):
        raise ConfigurationError([f"misfire_grace: must be >= 0, got {grace}"])
    if max_catchup < 1:
        raise ConfigurationError([f"max_catchup: must be >= 1, got {max_catchup}"])
    policy = MisfirePolicy(policy)

    due_limit = now - offset  # points at or before this are due
    if first > due_limit:
        return MisfirePlan(run=(), missed=0, next_occurrence=first)

    late_bound = due_limit - grace  # points strictly before this are late
    keep = {MisfirePolicy.LATEST: 1, MisfirePolicy.ALL: max_catchup, MisfirePolicy.SKIP: 0}[policy]
    late_count, late_tail, cursor = _late_points(trigger, first, late_bound, keep)

    on_time: list[datetime] = []
    walked = 0
    while cursor is not None and cursor <= due_limit:
        on_time.append(cursor)
        cursor = trigger.next_after(cursor)
        walked += 1
        if walked > MAX_WALK:
            raise ConfigurationError(
                [f"misfire_grace: more than {MAX_WALK} occurrences fall within the grace; "
                 "lower the grace or lengthen the schedule"]
            )

    if policy is MisfirePolicy.ALL:
        run = [*late_tail, *on_time]
    elif policy is MisfirePolicy.LATEST and not on_time:
        run = late_tail[-1:]
    else:
        run = on_time
    ran_late = len(run) - len(on_time)
    return MisfirePlan(run=tuple(run), missed=late_count - ran_late, next_occurrence=cursor)


def _late_points(
    trigger: Trigger, first: datetime, bound: datetime, keep: int
) -> tuple[int, list[datetime], datetime | None]:
    """Count points in ``[first, bound)``, keep the last ``keep``, and return the next point."""
    if first >= bound:
        return 0, [], first
    if isinstance(trigger, SeekableTrigger):
        count, tail = trigger.points_before(first, bound, max(keep, 1))
        after = trigger.next_after(tail[-1]) if tail else first
        return count, tail[-keep:] if keep else [], after
    tail_queue: deque[datetime] = deque(maxlen=keep)
    count = 0
    cursor: datetime | None = first
    while cursor is not None and cursor < bound:
        count += 1
        if keep:
            tail_queue.append(cursor)
        if count > MAX_WALK:
            raise ConfigurationError(
                [f"trigger: more than {MAX_WALK} missed occurrences to walk; "
                 "the schedule is too frequent for its downtime"]
            )
        cursor = trigger.next_after(cursor)
    return count, list(tail_queue), cursor


def first_occurrence(
    trigger: Trigger, now: datetime, offset: timedelta = timedelta(0)
) -> tuple[datetime | None, datetime | None]:
    """Where a new (or changed, or re-enabled) schedule starts: its first occurrence whose due
    instant is strictly after ``now``, as ``(occurrence, due)``; ``(None, None)`` if none."""
    occurrence = trigger.next_after(ensure_aware(now, "now") - offset)
    if occurrence is None:
        return None, None
    return occurrence, occurrence + offset
