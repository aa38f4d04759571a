"""Workers' run reports, heartbeats and lost runs."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from goatbeat_celery.core.rules.runs import RunEvent, RunRecord
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.lease import LeaseGrant


class RunLog(Protocol):
    """Where workers' reports land: the run columns of the executions table.

    Reports never change beat's dispatch columns (``state``, ``submitted_at``, ``attempts``,
    ``last_error``), and beat's writes never change the run columns. Instants are the store's
    clock. Driver errors surface as StoreError (StoreUnavailable when unreachable).
    """

    def record_runs(self, events: Sequence[RunEvent]) -> int:
        """Apply ``events`` in order, each as
        :func:`~goatbeat_celery.core.rules.runs.apply_event` decides on the row as it stands,
        with the store's clock at the time of writing as ``now``.

        Idempotent enough to retry: a batch replayed after its reply was lost changes nothing
        more (no attempt counted twice). Decisions are compare-and-set on the run columns they
        read, made again if another writer changed the row meanwhile. Returns how many events
        named no execution (ignored: a pruned row, or a task id that only looks like a key).
        """
        ...

    def read_runs(self, keys: Collection[str]) -> tuple[datetime, dict[str, RunRecord]]:
        """The store's now and the run columns of those of ``keys`` that name an execution, in
        one read (a worker checks a delivery sent again against them; it needs ``SELECT`` on
        ``goatbeat_execution`` only)."""
        ...

    def heartbeat(self, keys: Collection[str]) -> int:
        """In one statement, set ``heartbeat_at`` to the store's now on those of ``keys`` whose
        run is ``running``; returns how many rows that was. Other keys are left alone."""
        ...

    def resend_unstarted(self, *, lease: LeaseGrant, unstarted_for: timedelta,
                         tracked_since: datetime | None, resends: int,
                         limit: int = 1000) -> list[Execution]:
        """In one transaction fenced by ``lease``, put back to ``claimed`` up to ``limit`` runs
        that :func:`~goatbeat_celery.core.rules.runs.resend_due` says must be sent again
        (longest unsent first), with ``last_error`` saying why, and return them as written.
        Each run is judged with its schedule's own ``run_resends``; ``resends`` (the setting)
        stands in where the schedule gives none or is gone, so a setting of 0 still resends
        the runs of a schedule that asks for it.
        The leader's pending resubmission then sends each under its key, counting a send
        attempt; a failover between the two leaves them claimed for the next leader, so a
        resend is neither repeated nor lost. Raises LeaseLost when ``lease`` is not current."""
        ...

    def mark_lost(self, *, silent_for: timedelta, unstarted_for: timedelta,
                  tracked_since: datetime | None = None,
                  limit: int = 1000) -> list[Execution]:
        """Mark ``lost`` (or ``unknown``) up to ``limit`` runs that
        :func:`~goatbeat_celery.core.rules.runs.lost_verdict` ends at the store's now, given
        ``tracked_since`` (oldest news first), and return those executions as written.

        A row changed by a report or a heartbeat while it was judged is left for the next call.
        Rows past ``limit`` are left for later calls."""
        ...
