"""goatbeat_celery: a Celery beat scheduler that several replicas can run at once, safely.

``celery -A proj beat -S goatbeat_celery.Scheduler`` on every replica; manage database
schedules with :class:`Schedules`; inside a task, :func:`occurrence_of` tells which schedule and
which occurrence a run is for. :mod:`goatbeat_celery.testing` has the test doubles (a manual
clock, a recording broker and observer, the in-memory store) for an application's own tests.
"""

from __future__ import annotations

import typing

from goatbeat_celery.core.errors import (
    ConfigurationError,
    GoatbeatError,
    LeaseLost,
    ScheduleConflict,
    ScheduleNotFound,
    SchemaOutOfDate,
    StoreError,
    StoreUnavailable,
)
from goatbeat_celery.core.model import MisfirePolicy
from goatbeat_celery.occurrence import Occurrence, occurrence_of

if typing.TYPE_CHECKING:
    from goatbeat_celery.api import Schedules
    from goatbeat_celery.scheduler import Scheduler

__all__ = [
    "ConfigurationError",
    "GoatbeatError",
    "LeaseLost",
    "MisfirePolicy",
    "Occurrence",
    "ScheduleConflict",
    "ScheduleNotFound",
    "Scheduler",
    "Schedules",
    "SchemaOutOfDate",
    "StoreError",
    "StoreUnavailable",
    "occurrence_of",
]


def __getattr__(name: str) -> typing.Any:
    # Celery and SQLAlchemy load only when the scheduler or the API is used.
    if name == "Scheduler":
        from goatbeat_celery.scheduler import Scheduler

        return Scheduler
    if name == "Schedules":
        from goatbeat_celery.api import Schedules

        return Schedules
    raise AttributeError(f"module 'goatbeat_celery' has no attribute {name!r}")
