"""goatbeat_celery: a Celery beat scheduler that several replicas can run at once, safely.

``celery -A proj beat -S goatbeat_celery.Scheduler`` on every replica; manage database
schedules with :class:`Schedules`; inside a task, :func:`occurrence_of` tells which schedule and
which occurrence a run is for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from goatbeat_celery.core.errors import (
    ConfigurationError,
    GoatbeatError,
    LeaseLost,
    ScheduleConflict,
    ScheduleNotFound,
    SchemaOutOfDate,
    StoreError,
    StoreUnavailable,
    SubmitError,
)
from goatbeat_celery.core.model import MisfirePolicy
from goatbeat_celery.occurrence import Occurrence, occurrence_of

if TYPE_CHECKING:
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
    "SubmitError",
    "occurrence_of",
]


def __getattr__(name: str) -> Any:
    # Celery and SQLAlchemy load only when the scheduler or the API is used.
    if name == "Scheduler":
        from goatbeat_celery.scheduler import Scheduler

        return Scheduler
    if name == "Schedules":
        from goatbeat_celery.api import Schedules

        return Schedules
    raise AttributeError(f"module 'goatbeat_celery' has no attribute {name!r}")
