"""How a schedule is set aside and what clears its fault, shared by every store.

A store reads the schedule's row and asks :func:`plan_set_aside` what to write; it writes
:data:`EDIT_CLEARS` with every edit and config rewrite, and :data:`CLAIM_CLEARS` with every
claim that went through.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any

from goatbeat_celery.core.rules.fence import next_counter
from goatbeat_celery.core.types.set_aside import SetAside, retry_time

#: Set-aside counts stop here rather than overflow the column (a count written by hand).
FAULTS_MAX = 1_000_000

#: What an edit or a config rewrite writes: the operator's fix clears the fault and its count.
EDIT_CLEARS: Mapping[str, Any] = MappingProxyType({"fault": None, "fault_at": None, "faults": 0})
#: What a claim that went through writes: the fault goes, its count stays until an edit, so a
#: schedule whose messages keep being refused waits longer each time.
CLAIM_CLEARS: Mapping[str, Any] = MappingProxyType({"fault": None, "fault_at": None})


@dataclass(frozen=True, kw_only=True, slots=True)
class SetAsideWrite:
    """The columns a set-aside writes (``next_occurrence_at`` is kept)."""

    name: str
    fault: str
    fault_at: datetime
    faults: int
    next_run_at: datetime
    version: int


def plan_set_aside(entry: SetAside, *, version: object, faults: object,
                   fault_at: datetime | None, next_run_at: datetime | None,
                   now: datetime) -> SetAsideWrite | None:
    """What setting a schedule aside by ``entry`` writes, given the row's current ``version``,
    ``faults``, ``fault_at`` and ``next_run_at`` (values as read: a count written by hand may
    be anything) at store-time ``now``; ``None`` when ``entry`` carries a version the schedule
    no longer has (an edit made meanwhile may have fixed it).

    The reason is recorded, ``fault_at`` kept from a set-aside still in force, ``faults`` + 1,
    ``version`` + 1, and ``next_run_at`` moved to
    :func:`~goatbeat_celery.core.types.set_aside.retry_time` of the faults the schedule had."""
    if entry.version is not None and entry.version != version:
        return None
    had = faults if type(faults) is int else 0
    return SetAsideWrite(
        name=entry.schedule_name, fault=entry.reason,
        fault_at=now if fault_at is None else fault_at,
        faults=min(max(had, 0) + 1, FAULTS_MAX),
        next_run_at=retry_time(entry, had, next_run_at, now),
        version=next_counter(version),
    )


__all__ = ["CLAIM_CLEARS", "EDIT_CLEARS", "FAULTS_MAX", "SetAsideWrite", "plan_set_aside"]
