"""Backfills and their steps."""

from __future__ import annotations

from typing import Protocol

from goatbeat_celery.core.rules.backfill import Backfill, BackfillRequest, BackfillStep
from goatbeat_celery.core.rules.backfill_outcomes import BackfillTally
from goatbeat_celery.core.rules.shards import Shard
from goatbeat_celery.core.types.audit import AuditNote
from goatbeat_celery.core.types.claims import ClaimResult
from goatbeat_celery.core.types.lease import LeaseGrant


class BackfillStore(Protocol):
    """Backfills: created and cancelled by an operator, stepped by the leader."""

    def create_backfill(self, request: BackfillRequest, *,
                        audit: AuditNote | None = None) -> Backfill:
        """Store ``request`` (checked by the caller) as a new ``active`` backfill with the next
        id, nothing examined, ``created_at`` = store-now; notify waiting replicas. Raises
        ScheduleNotFound when its schedule does not exist. Records ``audit``, with the
        backfill's id added to its changes as ``backfill``."""
        ...

    def get_backfill(self, backfill_id: int) -> Backfill:
        """The backfill of that id (its unreadable columns named in ``damage``). Raises
        BackfillNotFound."""
        ...

    def list_backfills(self, *, schedule_name: str | None = None,
                       active: bool | None = None, limit: int = 100) -> list[Backfill]:
        """Backfills, newest first (by id), optionally of one schedule, or only active ones
        (``active=True``) or only finished ones (False). Reads only."""
        ...

    def active_backfills(self, limit: int, *, shard: Shard | None = None) -> list[Backfill]:
        """Up to ``limit`` ``active`` backfills, oldest first (by id), for the leader; with
        ``shard``, only those whose schedule is in it as :meth:`DueReads.due_schedules` says
        (and, for shard 0, those whose schedule no longer exists). A row
        that cannot be read as stored is returned with the columns at fault in ``damage``
        (and harmless stand-ins), never raised. Reads only."""
        ...

    def backfill_tally(self, backfill: Backfill) -> BackfillTally:
        """``backfill``'s runs counted by round (0: its own, n: re-run n) and outcome, and the
        occurrences whose latest run failed, as
        :func:`~goatbeat_celery.core.rules.backfill_outcomes.tally_executions` gives them from
        the executions of its schedule's occurrences in its range claimed since it was
        created. Reads only; on SQL, one grouped statement and one for the failed occurrences,
        whatever the occurrences (the history index)."""
        ...

    def cancel_backfill(self, backfill_id: int, *,
                        audit: AuditNote | None = None) -> Backfill:
        """Mark an active backfill ``cancelled`` (finished_at = store-now); its executions
        claimed already stay. A finished one is returned unchanged (nothing recorded). Raises
        BackfillNotFound. Records ``audit`` under the backfill's schedule."""
        ...

    def claim_backfill(self, step: BackfillStep, *, lease: LeaseGrant) -> ClaimResult:
        """Apply one backfill step in one transaction fenced by ``lease`` (LeaseLost if stale,
        nothing changed). Only while the backfill is ``active`` and its ``examined`` still
        equals ``step.examined_before`` (else nothing is written and nothing dispatched):
        insert :func:`goatbeat_celery.core.rules.backfill.step_executions` where their key is new,
        then write :func:`goatbeat_celery.core.rules.backfill.progress_after`. The schedule's row is
        never written. Returns the inserted executions as dispatches (those whose schedule is
        gone are not inserted) and the keys found taken as ``duplicates``."""
        ...

    def fail_backfill(self, backfill_id: int, reason: str, *, lease: LeaseGrant) -> bool:
        """Set an active backfill aside: state ``failed``, ``error`` = ``reason``,
        finished_at = store-now, fenced by ``lease``. Writes only the state columns, so that
        it works on a row whose other columns cannot be read. Returns whether it changed."""
        ...
