"""Observability seam: the engine reports what it does to an :class:`EngineObserver`.

Adapters turn these calls into Celery signals, metrics or log shipping. Observers run inline in
the scheduling loop: keep them short and never let them raise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from goatbeat_celery.core.model import Dispatch, Execution, LeaseGrant


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
