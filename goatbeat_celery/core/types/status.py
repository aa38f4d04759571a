"""A schedule's status: the state words every face gives (the API, ``list`` and its filters,
``show``, ``--json``, the dashboard, the admin and the metrics), and how a schedule's stored
fields and the store's clock give one, here and nowhere else:

* ``set aside``: the leader set it aside (its fault says why), or its row cannot be read;
* ``paused``: disabled, by a pause or (a config entry no longer configured) by the sync;
* ``paused until``: within a pause with an end; it runs again at its first occurrence after;
* ``ended``: it will not run again (its ``max_runs`` are used up, or its ``end_at`` passed);
* ``enabled``: it runs at its next run.

What a face shows of a status is :mod:`goatbeat_celery.core.rules.status`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime


class State(str, enum.Enum):
    """The status words, as every face writes them and ``--json`` gives them (``state``)."""

    ENABLED = "enabled"
    PAUSED = "paused"
    PAUSED_UNTIL = "paused until"
    SET_ASIDE = "set aside"
    ENDED = "ended"


@dataclass(frozen=True, kw_only=True)
class Status:
    """A state with what it depends on: until when a pause lasts, why it was set aside or
    paused (None when nobody said)."""

    state: State
    until: datetime | None = None
    reason: str | None = None

    @property
    def paused(self) -> bool:
        return self.state in (State.PAUSED, State.PAUSED_UNTIL)


def status(*, enabled: bool, paused_until: datetime | None, paused_reason: str | None,
           fault: str | None, unreadable: bool, next_run_at: datetime | None,
           runs_left: int | None, end_at: datetime | None, now: datetime) -> Status:
    """The status of a schedule whose stored fields are these, at ``now`` (the store's clock).

    A pause comes first (a paused schedule is not run, whatever else holds), then a fault,
    then the end of its runs."""
    if not enabled:
        return Status(state=State.PAUSED, reason=paused_reason)
    if paused_until is not None and paused_until > now:
        return Status(state=State.PAUSED_UNTIL, until=paused_until, reason=paused_reason)
    if fault is not None or unreadable:
        return Status(state=State.SET_ASIDE, reason=fault)
    if next_run_at is None and (runs_left == 0 or (end_at is not None and end_at <= now)):
        return Status(state=State.ENDED)
    return Status(state=State.ENABLED)
