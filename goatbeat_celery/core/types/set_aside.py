"""Schedules the leader cannot run as stored, set aside with a reason, and when each is
looked at again."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True, kw_only=True)
class SetAside:
    """A schedule the leader cannot run as stored, to be looked at again later.

    With ``version``, applied only if the schedule still has it (an edit made meanwhile may
    have fixed it); without, applied whatever the version (a message refused at submission).
    ``retry_at`` None (the usual case) lets the store apply :func:`set_aside_delay` to the
    times the schedule was set aside already.
    """

    schedule_name: str
    version: int | None
    reason: str
    retry_at: datetime | None = None


#: A schedule set aside is looked at again after this long, doubled for each time it was set
#: aside before (since it was last edited), up to SET_ASIDE_RETRY_MAX.
SET_ASIDE_RETRY = timedelta(seconds=30)


SET_ASIDE_RETRY_MAX = timedelta(hours=1)


def set_aside_delay(faults: int) -> timedelta:
    """How long a schedule already set aside ``faults`` times waits before the next look."""
    doublings = min(max(faults, 0), 16)
    delay: timedelta = min(SET_ASIDE_RETRY * (2 ** doublings), SET_ASIDE_RETRY_MAX)
    return delay


def retry_time(entry: SetAside, faults: int, next_run_at: datetime | None,
               now: datetime) -> datetime:
    """When a schedule set aside by ``entry`` is looked at again: ``entry.retry_at``, or
    ``now`` + the delay for the ``faults`` it had; never earlier than the ``next_run_at`` it
    had (a message refused long before the schedule's next run does not bring that run
    forward)."""
    retry_at = entry.retry_at or now + set_aside_delay(faults)
    if next_run_at is not None and next_run_at > retry_at:
        return next_run_at
    return retry_at
