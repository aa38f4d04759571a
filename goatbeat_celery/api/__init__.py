"""Database schedules from application code or a shell: create, update, pause, resume, delete,
list, get, run now, and backfill a past range.

>>> schedules = Schedules.from_app(app)
>>> schedules.create("report", "proj.tasks.report", cron="0 7 * * mon-fri",
...                  timezone="Europe/Paris")
>>> schedules.run_now("report")

Every change is written to the audit log with who made it (``actor``: by default
``os:<user>`` of this process; :meth:`Schedules.acting_as` binds another) and why (the
``reason`` keyword of each method that changes a schedule), in the transaction of the change:
:meth:`Schedules.audit` reads it back.

Edits take effect on the leader within a second on PostgreSQL (NOTIFY wakes it); on SQLite the
leader sees them at its next wake-up (``goatbeat_max_interval``).

The class is composed of a part per concern, each in a module of this package: ``reads``
(schedules and their next runs), ``writes`` (create, update, pause, resume, delete, run now),
``backfills``, ``calendars``, ``records`` (audit log, executions, alerts), ``config_plans`` and
``leases`` (the database's clock and who leads), ``revokes`` (a run's task revoked); ``base``
holds what they share.
"""

from __future__ import annotations

from goatbeat_celery.api.base import os_actor
from goatbeat_celery.api.config_plans import ConfigPlan
from goatbeat_celery.api.schedules import Schedules
from goatbeat_celery.api.writes import REWRITE_ATTEMPTS

__all__ = ["REWRITE_ATTEMPTS", "ConfigPlan", "Schedules", "os_actor"]
