"""Claimed executions on their way to the broker, and manual runs."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from goatbeat_celery.core.rules.backfill import Backfill
from goatbeat_celery.core.rules.shards import Shard
from goatbeat_celery.core.types.audit import AuditNote
from goatbeat_celery.core.types.claims import Dispatch
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.lease import LeaseGrant


class Dispatches(Protocol):
    """Pending executions, what the broker did with them, and manual runs."""

    def take_pending(self, *, lease: LeaseGrant, limit: int,
                     shard: Shard | None = None) -> list[Dispatch]:
        """Executions left ``claimed`` (a predecessor's, or ones whose submission failed),
        oldest first, for resubmission under the same key. With ``shard``, only those whose
        schedule is in it as :meth:`DueReads.due_schedules` says, and (for shard 0) those whose
        schedule no longer exists.

        Fenced by ``lease`` (LeaseLost if stale). Each returned execution's ``attempts`` is
        incremented and its ``token`` set to the lease's. Executions whose schedule no longer
        exists are marked ``abandoned`` and not returned.
        """
        ...

    def mark_submitted(self, keys: Sequence[str],
                       clusters: Mapping[str, str] | None = None) -> int:
        """Record that the broker accepted these executions (state ``submitted``, with the
        store's time), and for a key in ``clusters`` the queue its rotated message went to
        (``cluster``). Idempotent; returns how many rows changed state."""
        ...

    def mark_expired(self, keys: Sequence[str]) -> int:
        """Record that these executions passed their starting deadline (``expires_at``) before
        the broker took them: state ``expired``, never sent. Only executions still ``claimed``
        change; returns how many did."""
        ...

    def record_failures(self, failures: Mapping[str, str], *,
                        abandon: Collection[str] = ()) -> None:
        """Note failed submissions (key -> error) in ``last_error``; the executions stay
        ``claimed`` to be retried, except the keys in ``abandon``, which become ``abandoned``
        (given up: never resubmitted)."""
        ...

    def request_run(self, name: str, *, audit: AuditNote | None = None) -> Execution:
        """Queue an extra run of ``name`` now, under its own key (manual), as a ``claimed``
        execution the leader submits with its pending ones. Raises ScheduleNotFound.
        Notifies waiting replicas. Records ``audit``, with the run's key added to its changes
        as ``run``."""
        ...

    def request_reruns(self, backfill: Backfill, round_: int,
                       occurrences: Sequence[datetime], *,
                       audit: AuditNote | None = None) -> list[Execution]:
        """Queue re-run ``round_`` of ``backfill``'s ``occurrences`` (chosen by the caller) in
        one transaction: the executions of
        :func:`~goatbeat_celery.core.rules.backfill_outcomes.rerun_executions` at store-now,
        ``claimed``, which the leader submits with its pending ones. All or nothing: when one
        of their keys exists already (the round was requested already) nothing is written and
        ScheduleConflict is raised. Raises ScheduleNotFound when the schedule is gone.
        Notifies waiting replicas. Records ``audit`` under the schedule."""
        ...

    def oldest_pending(self) -> Execution | None:
        """The execution still ``claimed`` (not yet accepted by the broker) that is due
        earliest, or ``None``. Reads only; status displays show its lag, store-now - ``due_at``.
        """
        ...
