"""The audit log."""

from __future__ import annotations

from typing import Protocol

from goatbeat_celery.core.types.audit import AuditEntry, AuditNote


class AuditLog(Protocol):
    """The audit log the writes of operators and config syncs record (see
    :class:`~goatbeat_celery.core.protocols.ScheduleStore`)."""

    def audit_log(self, *, schedule_name: str | None = None, limit: int = 50,
                  before_id: int | None = None) -> list[AuditEntry]:
        """Audit entries, newest first (by id, which grows with each entry), of one schedule
        (existing or deleted) or of all; with ``before_id``, only those older than that entry
        (the next page). Never fails on what a row holds: what cannot be read is named in
        ``AuditEntry.damage``. Reads only; cost grows with ``limit`` (an index by schedule
        and id)."""
        ...

    def record_audit(self, schedule_name: str, note: AuditNote) -> None:
        """Write ``note`` as an entry of ``schedule_name``'s log, at the store's clock, in a
        transaction of its own: an action that changes no row of the store (a run's revoke,
        sent to the workers) is recorded so. The schedule need not exist."""
        ...
