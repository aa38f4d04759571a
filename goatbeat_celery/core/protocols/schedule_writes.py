"""Schedules as an operator and the configuration write them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

from goatbeat_celery.core.types.audit import AuditNote
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.schedule import PauseNote, Schedule
from goatbeat_celery.core.types.spec import ScheduleSpec, SyncEntry, SyncReport


class ScheduleWrites(Protocol):
    """Writing schedules: an operator's create, replace and delete, and a config sync."""

    def create_schedule(
        self, spec: ScheduleSpec, *, next_occurrence_at: datetime | None,
        next_run_at: datetime | None, audit: AuditNote | None = None,
    ) -> Schedule:
        """Insert a new schedule with version 1. Raises ScheduleConflict if the name exists.
        Notifies waiting replicas. Records ``audit``."""
        ...

    def replace_schedule(
        self, spec: ScheduleSpec, *, next_occurrence_at: datetime | None,
        next_run_at: datetime | None, expected_version: int | None = None,
        pause: PauseNote | None = None, audit: AuditNote | None = None,
    ) -> Schedule:
        """Overwrite a schedule's spec and next times, incrementing its version.

        With ``expected_version``, only if the stored version equals it (else ScheduleConflict,
        nothing changed). The row's ``source`` is kept and its fault, fault_at and faults
        cleared (an edit is the operator's fix); a spec that is enabled also clears
        :data:`~goatbeat_celery.core.rules.settlement.RESUME_CLEARS` (the reason a schedule paused
        itself, its end, its failures in a row). With ``pause``, its reason and end are then
        written in ``paused_reason`` and ``paused_until`` (a pause, or an edit during one).
        Raises ScheduleNotFound. Notifies waiting replicas. Records ``audit``.
        """
        ...

    def delete_schedule(self, name: str, *, audit: AuditNote | None = None) -> None:
        """Delete the schedule (its executions and audit entries stay as history). Raises
        ScheduleNotFound. Notifies waiting replicas. Records ``audit``."""
        ...

    def sync_config(self, entries: Sequence[SyncEntry], *, lease: LeaseGrant,
                    prune_after: timedelta | None = None) -> SyncReport:
        """Apply config entries as :func:`goatbeat_celery.core.rules.sync.plan_config_sync`
        decides (with ``prune_after``, pruning on: ``prune_before`` = store-now minus it), in
        one transaction fenced by ``lease``
        (:func:`goatbeat_celery.core.rules.fence.check_fence`: LeaseLost if stale, nothing
        changed), with an audit entry for each schedule created, rewritten, disabled or
        deleted (:func:`goatbeat_celery.core.rules.audit.sync_notes`, actor ``config``)."""
        ...
