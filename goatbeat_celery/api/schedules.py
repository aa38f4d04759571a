"""The public :class:`Schedules`: one class, composed of a part per concern (reads, writes,
bulk actions, backfills and their re-runs, calendars, records and alert actions, config plans,
leases, reverts of edits, revokes), each in a module of its own."""

from __future__ import annotations

from typing import Any

from goatbeat_celery import config as config_module
from goatbeat_celery.api.alert_actions import AlertActions
from goatbeat_celery.api.backfill_reruns import BackfillReruns
from goatbeat_celery.api.backfills import BackfillMethods
from goatbeat_celery.api.bulk import BulkMethods
from goatbeat_celery.api.calendars import CalendarMethods
from goatbeat_celery.api.config_plans import ConfigPlans
from goatbeat_celery.api.leases import LeaseReads
from goatbeat_celery.api.reads import ScheduleReads
from goatbeat_celery.api.reverts import AuditReverts
from goatbeat_celery.api.revokes import RunRevokes
from goatbeat_celery.tasknames import TaskSignatures


class Schedules(ScheduleReads, AuditReverts, BulkMethods, BackfillMethods, BackfillReruns,
                CalendarMethods, AlertActions, ConfigPlans, LeaseReads, RunRevokes):
    """The schedules stored in goatbeat's database, with the app's settings applied.

    ``actor`` names who makes the changes in the audit log (None: ``os:<user>`` of this
    process, :func:`os_actor`); :meth:`acting_as` gives the same schedules under another.
    ``signatures``: the app's tasks, whose signatures refuse args and kwargs that do not fit
    (:meth:`from_app` gives them; without, they are not checked)."""

    @classmethod
    def from_app(cls, app: Any, *, actor: str | None = None) -> Schedules:
        """Open the store named by ``app.conf.goatbeat_database_url``."""
        loaded = config_module.load(app, with_schedules=False)
        store = loaded.config.open_store()
        return cls(store, config=loaded.config, triggers=loaded.triggers, actor=actor,
                   default_timezone=config_module.default_timezone(app),
                   signatures=TaskSignatures(app))

    def acting_as(self, actor: str) -> Schedules:
        """The same schedules, on the same store, whose changes are recorded as made by
        ``actor`` (a token's name, ``django:<username>``, …; at most 200 printable
        characters, else ConfigurationError). Closing either closes the store."""
        return Schedules(self.store, config=self.config, triggers=self.triggers, actor=actor,
                         default_timezone=self.default_timezone, signatures=self.signatures)

    def __enter__(self) -> Schedules:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
