"""goatbeat_celery: a Celery beat scheduler that several replicas can run at once, safely.

``celery -A proj beat -S goatbeat_celery.Scheduler`` on every replica; manage database
schedules with :class:`Schedules`; inside a task, :func:`occurrence_of` tells which schedule and
which occurrence a run is for; ``track_runs(app)`` in the app module makes every worker record
what it did with each run (:mod:`goatbeat_celery.worker.tracking`). :mod:`goatbeat_celery.testing`
has the test doubles (a manual
clock, a recording broker and observer, the in-memory store) for an application's own tests.

The layout says where code runs: :mod:`~goatbeat_celery.beat` in the beat process,
:mod:`~goatbeat_celery.worker` in Celery workers, and the faces (:mod:`~goatbeat_celery.cli`,
:mod:`~goatbeat_celery.web`, :mod:`~goatbeat_celery.contrib.django`) wherever people manage
schedules. The modules at the top level are what they share: the public API (``api``,
``occurrence``, ``signals``, ``testing``), the reading of Celery's configuration into specs
(``config``, ``specs``, ``schedules``, ``cron``), the message headers (``headers``) and what
people are shown (``display``). Under them all lie
:mod:`~goatbeat_celery.core` (types, rules and the engine; standard library only) and
:mod:`~goatbeat_celery.store` with its :mod:`~goatbeat_celery.migrations`.
"""

from __future__ import annotations

import typing

#: The release, written here only: pyproject.toml reads it, and ``celery goatbeat --version``
#: and the dashboard's footer show it.
__version__ = "0.2.0"

from goatbeat_celery.core.rules.backfill import BackfillMode
from goatbeat_celery.core.types.errors import (
    BackfillNotFound,
    CalendarInUse,
    CalendarNotFound,
    ConfigurationError,
    ErrorKind,
    GoatbeatError,
    LeaseLost,
    ScheduleConflict,
    ScheduleNotFound,
    SchemaOutOfDate,
    StoreError,
    StoreTimeout,
    StoreUnavailable,
)
from goatbeat_celery.core.types.spec import MisfirePolicy
from goatbeat_celery.occurrence import Occurrence, occurrence_of

if typing.TYPE_CHECKING:
    from goatbeat_celery.api import Schedules
    from goatbeat_celery.beat.scheduler import Scheduler
    from goatbeat_celery.worker.tracking import track_runs

__all__ = [
    "BackfillMode",
    "BackfillNotFound",
    "CalendarInUse",
    "CalendarNotFound",
    "ConfigurationError",
    "ErrorKind",
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
    "StoreTimeout",
    "StoreUnavailable",
    "occurrence_of",
    "track_runs",
]


def __getattr__(name: str) -> typing.Any:
    # Celery and SQLAlchemy load only when the scheduler, the API or tracking is used.
    if name == "Scheduler":
        from goatbeat_celery.beat.scheduler import Scheduler

        return Scheduler
    if name == "Schedules":
        from goatbeat_celery.api import Schedules

        return Schedules
    if name == "track_runs":
        from goatbeat_celery.worker.tracking import track_runs

        return track_runs
    raise AttributeError(f"module 'goatbeat_celery' has no attribute {name!r}")
