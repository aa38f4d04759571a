"""Syncing this replica's config schedules (``beat_schedule``) into the store, under its lease."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from goatbeat_celery.core.loop.leadership import Leadership
from goatbeat_celery.core.loop.store_clock import StoreClock
from goatbeat_celery.core.loop.store_errors import report_store_error
from goatbeat_celery.core.loop.trigger_cache import TriggerCache
from goatbeat_celery.core.protocols import ScheduleStore
from goatbeat_celery.core.rules.controls import bounded_first
from goatbeat_celery.core.rules.misfire import first_occurrence
from goatbeat_celery.core.types.errors import ConfigurationError, LeaseLost, StoreError
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSpec, SyncEntry, SyncReport

logger = logging.getLogger(__name__)


class ConfigSync:
    """The config schedules declared here, and their sync under a grant.

    Contract: ``schedules`` is what was last declared; ``pending`` is True from
    :meth:`declare` until a sync begins. :meth:`sync` writes them under ``grant``: on success
    it tells ``leadership`` (``config_synced``), keeps the report in ``last_sync`` and calls
    ``on_synced`` (the sync may have moved what is due); a refused fencing token loses
    ``leadership``; a store error is logged and, with ``retry``, leaves the sync pending for
    the next tick. It never raises either.
    """

    def __init__(self, *, store: ScheduleStore, settings: Settings, clock: StoreClock,
                 triggers: TriggerCache, schedules: Sequence[ScheduleSpec],
                 on_synced: Callable[[], None]) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self.triggers = triggers
        self.schedules = tuple(schedules)
        self._on_synced = on_synced
        self.pending = False
        self.last_sync: SyncReport | None = None

    def declare(self, schedules: Sequence[ScheduleSpec]) -> None:
        self.schedules = tuple(schedules)
        self.pending = True

    def sync(self, leadership: Leadership, grant: LeaseGrant | None, *,
             retry: bool = False) -> None:
        if grant is None:
            return
        self.pending = False  # what is read below is synced, or synced again on failure
        settings = self.settings
        try:
            now = self.clock.read(self.store.now())
            entries = [entry for spec in self.schedules
                       if (entry := self._entry(spec, now)) is not None]
            prune = {"prune_after": settings.config_prune_grace} if settings.config_prune else {}
            report = self.store.sync_config(entries, lease=grant, **prune)
        except LeaseLost:
            leadership.lose("fencing token refused during config sync")
            return
        except StoreError as exc:
            # Still holding the lease, config pending: synced again after the next renewal.
            report_store_error(logger, "config sync failed, retrying: %s", exc, exc=exc,
                               action="config_sync_failed")
            self.pending = self.pending or retry
            return
        leadership.config_synced()
        self._on_synced()
        self.last_sync = report
        logger.info(
            "config sync: %d created, %d updated, %d unchanged, %d disabled",
            len(report.created), len(report.updated), len(report.unchanged),
            len(report.disabled), extra={"action": "config_synced"},
        )
        for name in report.deleted:
            logger.warning("config schedule %r deleted: out of beat_schedule and unchanged for "
                           "goatbeat_config_prune_grace (%s)", name,
                           settings.config_prune_grace, extra={"action": "config_pruned"})
        for name in report.conflicts:
            logger.warning("config entry %r left alone: a schedule of that name was created "
                           "through the API", name, extra={"action": "config_conflict"})

    def _entry(self, spec: ScheduleSpec, now: datetime) -> SyncEntry | None:
        try:
            trigger = self.triggers.get(spec.trigger)
        except ConfigurationError as exc:
            # Config is validated before the engine starts; this guards embedders that skip it.
            logger.error("config schedule %r skipped: %s", spec.name, exc,
                         extra={"action": "config_invalid"})
            return None
        offset = spec.effective_offset()
        occurrence, run = bounded_first(
            lambda instant: first_occurrence(trigger, instant, offset), now, spec)
        return SyncEntry(spec=spec, next_occurrence_at=occurrence, next_run_at=run)
