"""Observability seam: the engine reports what it does to an :class:`EngineObserver`.

Adapters turn these calls into Celery signals, metrics or log shipping. Observers run inline in
the scheduling loop: keep them short and never let them raise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from goatbeat_celery.core.rules.alerts import AlertEvent
from goatbeat_celery.core.types.claims import Dispatch
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.quick import quick_init


@quick_init
@dataclass(frozen=True, kw_only=True)
class OccurrenceRecord:
    """One submission attempt of one occurrence, handed to observers once the broker answered.

    ``lateness`` is ``submitted_at - due_at`` (by the store's clock as last read, plus local
    elapsed time, so a retry's lateness includes the wait); ``error`` is set when the broker
    refused it.
    """

    key: str
    schedule_name: str
    occurrence_at: datetime
    due_at: datetime
    claimed_at: datetime
    submitted_at: datetime | None
    lateness: timedelta | None
    missed: int
    token: int
    attempt: int
    manual: bool
    error: str | None = None
    #: True when this failed attempt was the last: the occurrence is abandoned, not retried.
    abandoned: bool = False
    #: Set when the record reports how the run ended (:meth:`EngineObserver.runs_ended`): the
    #: run's end state (``succeeded``, ``failed``, ``revoked``, ``rejected``, ``lost`` or
    #: ``unknown``), its runtime, the worker and the error summary; None on a submission's
    #: record.
    outcome: str | None = None
    runtime: timedelta | None = None
    worker: str | None = None
    run_error: str | None = None

    @classmethod
    def of_run(cls, execution: Execution) -> OccurrenceRecord:
        """The record of a run that ended, from its execution row."""
        submitted = execution.submitted_at
        return cls(
            key=execution.key, schedule_name=execution.schedule_name,
            occurrence_at=execution.occurrence_at, due_at=execution.due_at,
            claimed_at=execution.claimed_at, submitted_at=submitted,
            lateness=None if submitted is None else submitted - execution.due_at,
            missed=execution.missed, token=execution.token, attempt=execution.attempts,
            manual=execution.manual,
            outcome=None if execution.run_state is None else execution.run_state.value,
            runtime=execution.runtime, worker=execution.worker, run_error=execution.run_error)


class EngineObserver(Protocol):
    """Receives the engine's lifecycle events. Every method must return quickly and not raise."""

    def lease_acquired(self, grant: LeaseGrant) -> None:
        """This replica became the leader (a new token)."""
        ...

    def lease_lost(self, name: str, holder: str, reason: str) -> None:
        """This replica stopped being the leader (released, refused, expired, or unreachable)."""
        ...

    def claimed(self, dispatches: Sequence[Dispatch]) -> None:
        """Executions were claimed (inserted) and are about to be submitted."""
        ...

    def missed(self, schedule_name: str, count: int) -> None:
        """``count`` grid points of a schedule will never run (misfire policy)."""
        ...

    def submitted(self, records: Sequence[OccurrenceRecord]) -> None:
        """Submission attempts finished (``record.error`` set for a failure)."""
        ...

    def set_aside(self, schedule_name: str, reason: str) -> None:
        """A schedule was set aside: it cannot run as stored (``reason``) and is looked at
        again later; the others go on."""
        ...

    def skipped(self, executions: Sequence[Execution]) -> None:
        """Occurrences were recorded ``skipped`` by their overlap policy or an exclusion
        calendar, never to be sent
        (each one's reason in ``last_error``)."""
        ...

    def paused(self, schedule_name: str, reason: str) -> None:
        """A schedule paused itself after failed runs in a row (``reason``); ``resume``
        starts it again."""
        ...

    def runs_resent(self, executions: Sequence[Execution]) -> None:
        """Runs the broker took and no worker started in time were put back to be sent again
        under their keys (``last_error`` says why; ``attempts`` is the send before this one)."""
        ...

    def runs_ended(self, executions: Sequence[Execution]) -> None:
        """Runs ended, as workers reported them (or lost or unknown, as the leader judged): each
        reported once, by the leader that settled it (``run_state``, ``runtime``, ``worker`` and
        ``run_error`` on each row)."""
        ...

    def alerts_changed(self, events: Sequence[AlertEvent]) -> None:
        """Alerts were raised, counted again or resolved, each once, by the leader that wrote
        it (:mod:`goatbeat_celery.core.rules.alerts`)."""
        ...


class NullObserver:
    """An observer that ignores everything."""

    def lease_acquired(self, grant: LeaseGrant) -> None:
        pass

    def lease_lost(self, name: str, holder: str, reason: str) -> None:
        pass

    def claimed(self, dispatches: Sequence[Dispatch]) -> None:
        pass

    def missed(self, schedule_name: str, count: int) -> None:
        pass

    def submitted(self, records: Sequence[OccurrenceRecord]) -> None:
        pass

    def set_aside(self, schedule_name: str, reason: str) -> None:
        pass

    def skipped(self, executions: Sequence[Execution]) -> None:
        pass

    def paused(self, schedule_name: str, reason: str) -> None:
        pass

    def runs_resent(self, executions: Sequence[Execution]) -> None:
        pass

    def runs_ended(self, executions: Sequence[Execution]) -> None:
        pass

    def alerts_changed(self, events: Sequence[AlertEvent]) -> None:
        pass
