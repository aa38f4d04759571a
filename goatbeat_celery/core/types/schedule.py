"""A stored schedule: the spec plus what the store keeps about its runs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.quick import quick_init
from goatbeat_celery.core.types.spec import ScheduleSpec
from goatbeat_celery.core.types.status import Status, status


def version_after(current: Schedule, spec: ScheduleSpec) -> int:
    """The definition's version once ``spec`` is written over ``current``: one more when it
    changes what the schedule does (its :meth:`ScheduleSpec.spec_hash`), the same otherwise
    (a pause, a resume, an unchanged save)."""
    changed = spec.spec_hash() != current.spec.spec_hash()
    return current.version + 1 if changed else current.version


@quick_init
@dataclass(frozen=True, kw_only=True)
class Schedule:
    """A stored schedule: the spec plus what the store keeps about its runs."""

    spec: ScheduleSpec
    next_occurrence_at: datetime | None
    next_run_at: datetime | None
    last_occurrence_at: datetime | None = None
    total_runs: int = 0
    total_missed: int = 0
    #: The definition's version: counts the changes of what the schedule does (a write whose
    #: ``spec_hash`` differs), what a person's edit is checked against
    #: (``update(expected_version=...)``, the HTTP API's ETag, the forms; see
    #: :func:`version_after`). Runs, pauses and bookkeeping never change it, so a schedule that
    #: runs every second can still be edited.
    version: int = 1
    #: Counts every write of the row (claims, reports, faults, edits): internal, what a claim
    #: compares and sets, so that a claim planned on a row edited since is dropped.
    row_version: int = 1
    created_at: datetime | None = None
    updated_at: datetime | None = None
    #: Why the leader set this schedule aside (None while it runs normally), since when, and
    #: how many times in a row; it is looked at again at ``next_run_at``.
    fault: str | None = None
    fault_at: datetime | None = None
    faults: int = 0
    #: What the run policies keep (:mod:`goatbeat_celery.core.rules.policies`): failed runs in a row
    #: (reset by a success), why the schedule paused itself (None unless it did; ``resume``
    #: clears it) and how many occurrences the overlap policy skipped.
    consecutive_failures: int = 0
    paused_reason: str | None = None
    total_skipped: int = 0
    #: The end of a pause with an end (``Schedules.pause(until=...)``): the schedule stays
    #: enabled, its next run at or after this instant; None: no such pause. ``paused_reason``
    #: then holds the note given with the pause.
    paused_until: datetime | None = None
    #: Columns of the stored row that could not be read as they are (edited by hand): the
    #: spec holds harmless stand-ins for them, and the engine sets the schedule aside.
    damage: tuple[Problem, ...] = ()

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def set_aside(self) -> bool:
        """True while the schedule is set aside, or unreadable as stored."""
        return self.fault is not None or bool(self.damage)

    def paused_at(self, now: datetime) -> bool:
        """Whether the schedule is paused at ``now``: disabled, or within a pause with an end."""
        return not self.spec.enabled or (self.paused_until is not None
                                         and self.paused_until > now)

    def status_at(self, now: datetime) -> Status:
        """This schedule's :mod:`~goatbeat_celery.core.types.status` at ``now`` (the store's
        clock)."""
        return status(enabled=self.spec.enabled, paused_until=self.paused_until,
                      paused_reason=self.paused_reason, fault=self.fault,
                      unreadable=bool(self.damage), next_run_at=self.next_run_at,
                      runs_left=self.runs_left, end_at=self.spec.end_at, now=now)

    @property
    def runs_left(self) -> int | None:
        """Runs left before ``max_runs`` is reached (None: no limit)."""
        if self.spec.max_runs is None:
            return None
        return max(0, self.spec.max_runs - self.total_runs)


@dataclass(frozen=True, kw_only=True)
class PauseNote:
    """What a pause writes beside ``enabled``: the operator's note (``paused_reason``) and
    the instant the pause ends by itself (``paused_until``; None: until resumed)."""

    reason: str | None = None
    until: datetime | None = None
