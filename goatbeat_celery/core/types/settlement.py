"""The ends of runs as a leader settles them: a finished run with its schedule, what its end
writes on the schedule, and what one settlement pass wrote."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.schedule import Schedule


@dataclass(frozen=True, kw_only=True)
class FinishedRun:
    """A run that ended and waits to be settled (its ``settled`` is False), with its schedule
    as stored (None: deleted since)."""

    execution: Execution
    schedule: Schedule | None


@dataclass(frozen=True, kw_only=True)
class RunSettlement:
    """What the end of run ``key`` writes on its schedule
    (:func:`~goatbeat_celery.core.rules.settlement.settlement_of`), applied only while the schedule
    still has ``version`` (None: nothing to write on the schedule, which is gone, paused or
    unchanged by this end; only the run is marked settled).

    ``paused_reason`` set: the schedule pauses itself (``enabled`` false) with that reason.
    """

    key: str
    schedule_name: str
    version: int | None
    consecutive_failures: int = 0
    next_occurrence_at: datetime | None = None
    next_run_at: datetime | None = None
    paused_reason: str | None = None
    #: The pause a failure's backoff imposed from the run's end (zero: none); not written.
    backoff: timedelta = timedelta(0)


@dataclass(frozen=True, kw_only=True)
class SettleReport:
    """What :meth:`~goatbeat_celery.core.protocols.ScheduleStore.settle_runs` wrote: the runs
    marked settled, the schedules that paused themselves (name, reason), and the held claims
    released (now ``claimed``, to be sent with the pending ones)."""

    settled: tuple[str, ...] = ()
    paused: tuple[tuple[str, str], ...] = ()
    released: tuple[str, ...] = ()
