"""The schedule store: every concern of the engine's store in one protocol."""

from __future__ import annotations

from typing import Protocol

from goatbeat_celery.core.protocols.audit import AuditLog
from goatbeat_celery.core.protocols.backfills import BackfillStore
from goatbeat_celery.core.protocols.calendars import CalendarStore
from goatbeat_celery.core.protocols.claims import Claims
from goatbeat_celery.core.protocols.connection import StoreConnection
from goatbeat_celery.core.protocols.dispatch import Dispatches
from goatbeat_celery.core.protocols.due import DueReads
from goatbeat_celery.core.protocols.history import History
from goatbeat_celery.core.protocols.schedule_reads import ScheduleReads
from goatbeat_celery.core.protocols.schedule_writes import ScheduleWrites
from goatbeat_celery.core.protocols.settlement import Settlements


class ScheduleStore(StoreConnection, ScheduleReads, ScheduleWrites, CalendarStore, DueReads,
                    Claims, Dispatches, Settlements, BackfillStore, History, AuditLog, Protocol):
    """Schedules and executions. All instants are aware and returned in UTC.

    Naive datetimes are refused with ConfigurationError before anything is written.
    Driver errors surface as StoreError (StoreUnavailable when the database is unreachable).

    What a write decides is decided in the core, so that no two stores can disagree: a claim's
    rows by :mod:`goatbeat_celery.core.rules.claims`, the lease fence and grants by
    :mod:`goatbeat_celery.core.rules.fence`, a set-aside and what clears a fault by
    :mod:`goatbeat_celery.core.rules.faults`, a config sync by
    :mod:`goatbeat_celery.core.rules.sync`.
    A store reads, asks, and writes what it is told.

    Notifications: the writes an operator makes, and a lease given up, wake the replicas
    waiting in :meth:`wait` once committed (never when they fail or change nothing):
    :meth:`create_schedule`, :meth:`replace_schedule` (an edit, a pause, a resume),
    :meth:`delete_schedule`, :meth:`request_run`, :meth:`create_calendar`,
    :meth:`replace_calendar`, :meth:`create_backfill`, and :meth:`LeaseManager.release` (a
    standby may take the lease at once). The writes of the leader's own loop (:meth:`sync_config`,
    :meth:`claim`, :meth:`set_aside`, :meth:`take_pending`, :meth:`mark_submitted`,
    :meth:`mark_expired`, :meth:`record_failures`, :meth:`prune`) notify no one: the leader
    knows what it wrote, and a standby has nothing to do until it leads.

    Audit: the writes an operator or config sync makes to a schedule take an ``audit``
    :class:`~goatbeat_celery.core.types.audit.AuditNote` (:meth:`create_schedule`,
    :meth:`replace_schedule`, :meth:`delete_schedule`, :meth:`request_run`,
    :meth:`create_backfill`, :meth:`cancel_backfill`); given one, the store writes it as an
    entry of the audit log of the schedule named, at the store's clock, in the transaction of
    the change: both are committed or neither is, and a write refused or that changes nothing
    records nothing. :meth:`sync_config` records an entry for each schedule it changes, as
    :func:`goatbeat_celery.core.rules.audit.sync_notes` says.

    ``wakes_on_every_change``: true when :meth:`wait` is woken by those writes from any
    process, and by the end of a run that a schedule's run policy waits on (a worker's report
    through :class:`goatbeat_celery.core.protocols.RunLog`). The leader then sleeps until the next
    thing it knows of (a due run, a lease renewal); when false, it also looks again every
    ``max_interval`` for what it could not hear.
    """
