"""An in-memory store and lease for unit tests and single-process experiments.

It runs the same contract as the database stores (the conformance suite checks it) with an
injectable clock, so tests can move time without sleeping. :class:`MemoryStore` is composed of
one class per concern, as the SQL store is, over the state of
:class:`~goatbeat_celery.store.memory.base.MemoryStoreBase`.
"""

from __future__ import annotations

from goatbeat_celery.store.memory.alerts import MemoryAlerts
from goatbeat_celery.store.memory.audit import MemoryAudit
from goatbeat_celery.store.memory.backfills import MemoryBackfills
from goatbeat_celery.store.memory.base import Clock, MemoryStoreBase, system_clock
from goatbeat_celery.store.memory.calendars import MemoryCalendars
from goatbeat_celery.store.memory.claims import MemoryClaims
from goatbeat_celery.store.memory.dispatch import MemoryDispatch
from goatbeat_celery.store.memory.history import MemoryHistory
from goatbeat_celery.store.memory.lease import MemoryLeases
from goatbeat_celery.store.memory.outbox import MemoryOutbox
from goatbeat_celery.store.memory.runs import MemoryRuns
from goatbeat_celery.store.memory.schedules import MemorySchedules
from goatbeat_celery.store.memory.settlement import MemorySettlement
from goatbeat_celery.store.memory.tokens import MemoryTokens


class MemoryStore(MemoryLeases, MemorySchedules, MemoryCalendars, MemoryClaims, MemoryDispatch,
                  MemoryBackfills, MemoryHistory, MemoryAlerts, MemoryOutbox, MemorySettlement,
                  MemoryRuns, MemoryAudit, MemoryTokens, MemoryStoreBase):
    """ScheduleStore, LeaseManager, RunLog, AlertLog, Outbox and the token store in one
    object, guarded by one lock."""


__all__ = ["Clock", "MemoryStore", "system_clock"]
