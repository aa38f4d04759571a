"""The audit log, read newest first (entries are written by the changes, see
:meth:`~goatbeat_celery.store.sql.base.SQLStoreBase._record`)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from goatbeat_celery.core.protocols import AuditLog
from goatbeat_celery.core.types.audit import AuditAction, AuditEntry, AuditNote, FieldChange
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.store.schema import UNREADABLE_INSTANT, audit_table
from goatbeat_celery.store.sql.base import SQLStoreBase

A = audit_table


class SQLAudit(SQLStoreBase, AuditLog):
    """Reads of the audit log, and the entries of actions that change no row."""

    def record_audit(self, schedule_name: str, note: AuditNote) -> None:
        with self._write("record an audit entry") as txn:
            self._record(txn.conn, [(schedule_name, note)])

    def audit_log(self, *, schedule_name: str | None = None, limit: int = 50,
                  before_id: int | None = None) -> list[AuditEntry]:
        stmt = sa.select(A).order_by(A.c.id.desc()).limit(limit)
        if schedule_name is not None:
            stmt = stmt.where(A.c.schedule_name == schedule_name)
        if before_id is not None:
            stmt = stmt.where(A.c.id < before_id)
        with self._read("read the audit log") as conn:
            return [_entry(row) for row in conn.execute(stmt)]


def _entry(row: Any) -> AuditEntry:
    """An audit row as an entry; what cannot be read (a row edited by hand) is named in
    ``damage`` and read as a harmless stand-in."""
    damage: list[Problem] = []
    try:
        action: AuditAction | str = AuditAction(row.action)
    except ValueError:
        action = str(row.action)
    at = row.at
    if at is None or at is UNREADABLE_INSTANT:
        damage.append(Problem("at", "the stored instant cannot be read"))
        at = UNREADABLE_INSTANT
    changes: dict[str, FieldChange] = {}
    stored = row.changes
    if isinstance(stored, dict) and all(isinstance(pair, list) and len(pair) == 2
                                        for pair in stored.values()):
        changes = {str(key): (pair[0], pair[1]) for key, pair in stored.items()}
    else:
        damage.append(Problem("changes", "expected a JSON object of [before, after] pairs"))
    return AuditEntry(id=row.id, schedule_name=row.schedule_name, at=at, action=action,
                      actor=str(row.actor), reason=row.reason, changes=changes,
                      damage=tuple(damage))
