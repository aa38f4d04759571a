"""Rotation across clusters: which queue runs an occurrence of a schedule that names N of them.

Occurrence k of the schedule's grid goes to queue ``k mod N``; its key is unchanged, so the
claim, the idempotency and the history are those of any occurrence. ``k`` depends on the
occurrence's instant and the trigger only, never on what ran before, so it survives restarts,
missed occurrences, a change of leader and a schedule that was paused:

* an interval trigger (its grid counted from the Unix epoch): ``k = (occurrence - epoch) //
  every``, the grid point's own index, so consecutive occurrences take turns exactly;
* any other trigger (cron, rrule, solar, once, a Celery schedule class): ``k = day × n + i``,
  where ``day`` is the UTC day's number since the epoch, ``n`` how many occurrences the trigger
  has that UTC day and ``i`` how many of them come before this one. Where every day holds as
  many occurrences (an hourly or a daily cron), that is the occurrence's ordinal counted from
  the epoch, and consecutive occurrences take turns exactly; a day with another count (a
  weekday cron over a weekend, a local-time cron across a DST change) keeps each occurrence's
  owner stable but may give two in a row the same one. A trigger with more than
  :data:`MAX_DAY_POINTS` occurrences in a day counts whole minutes since the epoch instead.

A run-now or a backfill run goes where the occurrence (a run-now: the instant asked for) would.

Handover (``rotate_handover``): while nobody consumes the owner's queue, the occurrence goes to
the next queue in the list that somebody does consume (owner + 1, owner + 2, ... mod N); with
nobody anywhere, or when presence is unknown, it goes to the owner's queue and waits there.
"""

from __future__ import annotations

import functools
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from goatbeat_celery.core.rules.triggers import EPOCH, IntervalTrigger, Trigger
from goatbeat_celery.core.types.instants import UTC

DAY = timedelta(days=1)
#: A day's occurrences walked at most (a minutely cron's); past it, minutes are counted.
MAX_DAY_POINTS = 1440
_MICRO = timedelta(microseconds=1)
_MINUTE = timedelta(minutes=1)


def occurrence_index(trigger: Trigger, occurrence: datetime) -> int:
    """``k``, the index of ``occurrence`` (aware, an occurrence of ``trigger`` or any instant)
    on the trigger's grid, by the rules of this module's docstring."""
    occurrence = occurrence.astimezone(UTC)
    if isinstance(trigger, IntervalTrigger):
        return ((occurrence - EPOCH) // _MICRO) // (trigger.every // _MICRO)
    day = (occurrence - EPOCH) // DAY
    # Triggers hash by identity (the engine's cache shares one per kind and parameters).
    points = day_points(trigger, EPOCH + day * DAY)  # type: ignore[arg-type]
    if points is None:
        return (occurrence - EPOCH) // _MINUTE
    return day * max(1, len(points)) + bisect_left(points, occurrence)


@functools.lru_cache(maxsize=1024)
def day_points(trigger: Trigger, start: datetime) -> tuple[datetime, ...] | None:
    """The occurrences of ``trigger`` in the UTC day beginning at ``start``; None past
    :data:`MAX_DAY_POINTS` of them. Kept for the last days asked (a trigger object is shared
    by the schedules with the same parameters), so a minutely cron walks its day once."""
    end = start + DAY
    found: list[datetime] = []
    point = trigger.next_after(start - _MICRO)
    while point is not None and point < end:
        if len(found) == MAX_DAY_POINTS:
            return None
        found.append(point)
        point = trigger.next_after(point)
    return tuple(found)


def owner_of(queues: Sequence[str], index: int) -> str:
    """The queue that owns occurrence ``index``: ``queues[index mod N]``."""
    return queues[index % len(queues)]


@dataclass(frozen=True)
class Placement:
    """Where one occurrence goes: ``queue`` (the owner's, or with a handover the next consumed
    one) and ``owner``, the queue that owns it."""

    queue: str
    owner: str

    @property
    def handed_over(self) -> bool:
        return self.queue != self.owner


def place(queues: Sequence[str], index: int, *, handover: bool,
          consumed: Callable[[str], bool | None]) -> Placement:
    """Where occurrence ``index`` goes. Without ``handover``, the owner's queue, always (a
    message waits there while nobody consumes it). With it, the first of owner, owner + 1, ...
    (mod N) that ``consumed`` does not say is unconsumed (False); ``None`` (not known) counts
    as consumed, so an unknown presence never moves an occurrence. Nobody anywhere: the
    owner's queue."""
    owner = index % len(queues)
    if handover:
        for step in range(len(queues)):
            queue = queues[(owner + step) % len(queues)]
            if consumed(queue) is not False:
                return Placement(queue, queues[owner])
    return Placement(queues[owner], queues[owner])
