"""Wall-clock matches → real instants, across daylight-saving transitions.

Cron and recurrence-rule triggers both find matching *wall-clock* times (naive datetimes in a
zone); this maps them to instants with :mod:`zoneinfo` and ``fold``, following Vixie cron /
cronie:

* *wildcard* jobs (those whose minute or hour runs over the clock, such as ``*/15 * * * *``)
  run at every real instant whose wall time matches: wall times skipped by a spring-forward gap
  do not occur, and wall times repeated by a fall-back overlap run on both passes;
* *fixed* jobs run once per wall-clock match: a match inside a gap runs once, at the first
  instant after the gap; a match inside an overlap runs on its first pass only.

Several matches that land on the same instant (two matches inside one gap) run once.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, tzinfo

from goatbeat_celery.core.types.instants import UTC

_SECOND = timedelta(seconds=1)

#: The first matching wall time strictly after a naive wall time, or None when there is none.
NextWall = Callable[[datetime], "datetime | None"]


class WallClock:
    """The occurrences of wall-clock matches in ``zone``.

    ``step`` is the finest resolution of the matches (a minute for cron, a second for a
    recurrence rule): ``next_wall(t - step)`` is the first match at or after ``t``.
    """

    def __init__(self, zone: tzinfo, next_wall: NextWall, *, wildcard: bool,
                 step: timedelta) -> None:
        self.zone = zone
        self.wildcard = wildcard
        self._next_wall = next_wall
        self._step = step

    def next_after(self, instant: datetime) -> datetime | None:
        """The first occurrence strictly after the aware ``instant``, in UTC."""
        local = instant.astimezone(self.zone)
        wall = local.replace(tzinfo=None, fold=0)
        second_pass = local.fold == 1
        overlap = self._overlap_containing(wall)

        # First passes (and, for fixed jobs, gap matches) map wall times to instants
        # monotonically, so the first match that lands after ``instant`` is the earliest.
        cursor = wall
        if overlap is not None and second_pass:
            # Every first pass of this overlap is already behind us.
            cursor = max(cursor, overlap[1] - self._step)
        earliest = self._first_pass_after(instant, cursor)

        # Wildcard jobs also run on second passes; only the overlap ``instant`` is in can hold
        # one earlier than every first pass still ahead.
        if self.wildcard and overlap is not None:
            start, end = overlap
            candidate = self._next_wall(start - self._step if not second_pass else wall)
            if candidate is not None and candidate < end and (second_pass or candidate <= wall):
                repeat = self._instant(candidate, fold=1)
                if repeat > instant and (earliest is None or repeat < earliest):
                    earliest = repeat
        return earliest

    def _first_pass_after(self, instant: datetime, cursor: datetime) -> datetime | None:
        while True:
            match = self._next_wall(cursor)
            if match is None:
                return None
            first = self._instant(match, fold=0)
            if self._local_wall(first) != match:
                # ``match`` falls in a spring-forward gap.
                transition = self._transition(self._instant(match, fold=1), first)
                if not self.wildcard and transition > instant:
                    return transition
                cursor = max(match, self._local_wall(transition) - self._step)
                continue
            if first > instant:
                return first
            cursor = match

    def _instant(self, wall: datetime, *, fold: int) -> datetime:
        return wall.replace(tzinfo=self.zone, fold=fold).astimezone(UTC)

    def _local_wall(self, instant: datetime) -> datetime:
        return instant.astimezone(self.zone).replace(tzinfo=None, fold=0)

    def _overlap_containing(self, wall: datetime) -> tuple[datetime, datetime] | None:
        """``(start, end)`` wall times of the fall-back overlap ``wall`` lies in, if any."""
        first, second = self._instant(wall, fold=0), self._instant(wall, fold=1)
        if first >= second:
            return None  # an ordinary wall time (or a gap, where fold=1 maps earlier)
        transition = self._transition(first, second)
        before = first.astimezone(self.zone).utcoffset()
        after = second.astimezone(self.zone).utcoffset()
        assert before is not None and after is not None
        naive = transition.replace(tzinfo=None)
        return naive + after, naive + before

    def _transition(self, low: datetime, high: datetime) -> datetime:
        """The instant in ``(low, high]`` where the zone's offset changes (one change only)."""
        # tzdata transitions fall on whole seconds: search whole seconds from a whole second.
        low = low.replace(microsecond=0)
        offset = low.astimezone(self.zone).utcoffset()
        lo, hi = 0, max(-(-(high - low) // _SECOND), 1)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if (low + mid * _SECOND).astimezone(self.zone).utcoffset() == offset:
                lo = mid
            else:
                hi = mid
        return low + hi * _SECOND
