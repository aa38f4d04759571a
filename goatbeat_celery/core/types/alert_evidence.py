"""What a leader reads to judge alerts: which schedules a look covers, and one page of them
with their newest executions and open alerts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from goatbeat_celery.core.types.alerts import Alert
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.schedule import Schedule


@dataclass(frozen=True, kw_only=True)
class AlertScope:
    """Which schedules a look at alerts reads
    (:meth:`~goatbeat_celery.core.protocols.AlertLog.alert_evidence`): only those whose verdict
    can have changed, so that a look at schedules with nothing new costs next to nothing.

    A schedule is in scope when it has an open alert, is one of ``names``, has a silent window
    of its own and ``silent_own`` is set, or: with ``changed_since`` None, when it has any
    execution (one that never ran has nothing to judge); with ``changed_since``, when one of
    its executions is in flight, not yet settled, or claimed at or after that instant. With
    ``runs_tracked`` false a run the broker took counts as in flight no longer: without run
    tracking nothing a worker does changes a verdict."""

    changed_since: datetime | None = None
    names: frozenset[str] = frozenset()
    silent_own: bool = False
    runs_tracked: bool = True


@dataclass(frozen=True, kw_only=True)
class AlertPage:
    """One page of schedules the leader judges alerts on
    (:meth:`~goatbeat_celery.core.protocols.AlertLog.alert_evidence`): the store's clock, each
    schedule in name order with its newest executions (newest occurrence first), the alerts open
    on them, and the last name read (None once the page reached the end of the schedules)."""

    now: datetime
    schedules: tuple[tuple[Schedule, tuple[Execution, ...]], ...]
    open_alerts: tuple[Alert, ...]
    last: str | None
