"""The audit log."""

from __future__ import annotations

from typing import Protocol

from goatbeat_celery.core.types.audit import AuditEntry


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
