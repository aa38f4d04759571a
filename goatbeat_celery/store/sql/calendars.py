"""The exclusion calendar rows."""

from __future__ import annotations

from collections.abc import Collection

import sqlalchemy as sa

from goatbeat_celery.core.protocols import CalendarStore
from goatbeat_celery.core.rules.calendars import Calendar
from goatbeat_celery.core.types.errors import CalendarInUse, CalendarNotFound, ScheduleConflict
from goatbeat_celery.store.schema import calendar_table, schedule_table
from goatbeat_celery.store.sql.base import SQLStoreBase, refused_edit
from goatbeat_celery.store.sql.rows import _calendar

S = schedule_table
C = calendar_table


def _observing(conn: sa.Connection, name: str) -> list[str]:
    """The schedules observing calendar ``name``: JSON arrays are matched in Python, the same
    way on every backend (rows without calendars are left out by the database)."""
    rows = conn.execute(sa.select(S.c.name, S.c.calendars)
                        .where(S.c.calendars.is_not(None)).order_by(S.c.name))
    return [row.name for row in rows
            if isinstance(row.calendars, list) and name in row.calendars]


class SQLCalendars(SQLStoreBase, CalendarStore):
    """Exclusion calendars and the schedules observing them."""

    def create_calendar(self, calendar: Calendar) -> Calendar:
        with self._write("create calendar") as txn:
            now = self._now_sql()
            rows = self._insert_new(
                txn.conn, C, {"name": calendar.name, "description": calendar.description,
                                  "entries": calendar.entries(), "version": 1,
                                  "created_at": now, "updated_at": now},
                conflict=[C.c.name], returning=list(C.c))
            row = rows[0] if rows else None
            if row is None:
                raise ScheduleConflict.taken("calendar", calendar.name)
            txn.announce = True
        return _calendar(row)

    def replace_calendar(self, calendar: Calendar, *,
                         expected_version: int | None = None) -> Calendar:
        with self._write("replace calendar") as txn:
            conn = txn.conn
            stmt = sa.update(C).where(C.c.name == calendar.name)
            if expected_version is not None:
                stmt = stmt.where(C.c.version == expected_version)
            row = self._update_row(
                conn, stmt.values(description=calendar.description, entries=calendar.entries(),
                                  version=C.c.version + 1, updated_at=self._now_sql()), C)
            if row is None:
                raise refused_edit(conn, C, calendar.name, expected_version, "calendar",
                                   CalendarNotFound)
            txn.announce = True
        return _calendar(row)

    def delete_calendar(self, name: str) -> None:
        with self._write("delete calendar") as txn:
            conn = txn.conn
            # Locked first, so that the schedules read next are those observing it when it
            # goes: an edit adding it after this read finds it gone (the API refuses it).
            found = conn.execute(
                sa.select(C.c.name).where(C.c.name == name).with_for_update()
            ).scalar_one_or_none()
            if found is None:
                raise CalendarNotFound(name)
            users = _observing(conn, name)
            if users:
                raise CalendarInUse(name, users)
            conn.execute(sa.delete(C).where(C.c.name == name))

    def schedules_observing(self, name: str) -> list[str]:
        with self._read("list the schedules observing a calendar") as conn:
            return _observing(conn, name)

    def get_calendar(self, name: str) -> Calendar:
        with self._read("read calendar") as conn:
            row = conn.execute(sa.select(C).where(C.c.name == name)).one_or_none()
        if row is None:
            raise CalendarNotFound(name)
        return _calendar(row)

    def list_calendars(self) -> list[Calendar]:
        with self._read("list calendars") as conn:
            return [_calendar(row) for row in conn.execute(sa.select(C).order_by(C.c.name))]

    def find_calendars(self, names: Collection[str]) -> dict[str, Calendar]:
        if not names:
            return {}
        with self._read("read calendars") as conn:
            rows = conn.execute(sa.select(C).where(C.c.name.in_(sorted(names))))
            return {row.name: _calendar(row) for row in rows}
