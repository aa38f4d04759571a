"""The memory store's audit log: read newest first (entries are written by the changes)."""

from __future__ import annotations

from goatbeat_celery.core.protocols import AuditLog
from goatbeat_celery.core.types.audit import AuditEntry, AuditNote
from goatbeat_celery.store.memory.base import MemoryStoreBase


class MemoryAudit(MemoryStoreBase, AuditLog):
    """Reads of the audit log, and the entries of actions that change no row."""

    def record_audit(self, schedule_name: str, note: AuditNote) -> None:
        with self._lock:
            self._record(schedule_name, note, self.now())

    def audit_log(self, *, schedule_name: str | None = None, limit: int = 50,
                  before_id: int | None = None) -> list[AuditEntry]:
        with self._lock:
            found = [entry for entry_id, entry in self._audit.items()
                     if (schedule_name is None or entry.schedule_name == schedule_name)
                     and (before_id is None or entry_id < before_id)]
        found.sort(key=lambda entry: entry.id, reverse=True)
        return found[:limit]
