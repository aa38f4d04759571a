"""The MySQL / MariaDB store: the SQL store with the database's clock, without RETURNING,
ON CONFLICT, partial indexes or LISTEN/NOTIFY."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import URL

from goatbeat_celery.core.types.errors import ConfigurationError, StoreError
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.store.enclosing import enclosing_for
from goatbeat_celery.store.migrate import prepare_schema
from goatbeat_celery.store.mysql.engine import (
    connect_args,
    create_migration_engine,
    create_mysql_engine,
)
from goatbeat_celery.store.mysql.sessions import ASK_FOR, MySQLSessions
from goatbeat_celery.store.schema import UTCDateTime
from goatbeat_celery.store.sessions import CLOCK_PATH, ClockOnly
from goatbeat_celery.store.sql import Insert, SQLStore
from goatbeat_celery.store.url import mask_url, normalise_url
from goatbeat_celery.store.wake_channel import wake_channel

#: The server's error number for a duplicate key in a unique index.
DUPLICATE_KEY = 1062


def _duplicate(exc: sa.exc.IntegrityError) -> bool:
    args: tuple[Any, ...] = getattr(exc.orig, "args", ())
    return bool(args) and args[0] == DUPLICATE_KEY


class MySQLStore(SQLStore):
    """ScheduleStore and LeaseManager on MySQL 8 or MariaDB 10.6 and later (PyMySQL).

    Lease expiry and due-ness are judged by the database's ``UTC_TIMESTAMP(6)``. A session
    idle inside a transaction for ``idle_in_transaction_timeout`` seconds is ended by the
    server (None: never), so that a replica frozen there holds no takeover back. The schema
    must be at the current revision (SchemaOutOfDate otherwise); ``create_schema=True`` runs
    the migrations on open instead. :meth:`wait` hears the edits made through any store object
    of this process on the same database; edits made by other processes are seen at the next
    tick (bounded by ``max_interval``), as MySQL has no LISTEN/NOTIFY.
    """

    wakes_on_every_change = False

    def __init__(self, url: str | URL, *, create_schema: bool = False,
                 connect_timeout: float = 5.0, statement_timeout: float = 5.0,
                 idle_in_transaction_timeout: float | None = 10.0, pool_size: int = 5,
                 max_overflow: int = 5, session_locks: bool = True) -> None:
        problems = [
            Problem(name, f"must be a positive number of seconds, got {value!r}")
            for name, value in (("connect_timeout", connect_timeout),
                                ("statement_timeout", statement_timeout),
                                ("idle_in_transaction_timeout",
                                 idle_in_transaction_timeout or 1.0))
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0
        ]
        if not isinstance(session_locks, bool):
            problems.append(Problem("session_locks",
                                    f"expected True or False, got {session_locks!r}"))
        if problems:
            raise ConfigurationError(problems, subject="MySQL store options")
        sa_url = normalise_url(url)
        # Only the transactions' engine is limited: the autocommit one is never idle inside
        # a transaction, and its idle connections may stay.
        engine = create_mysql_engine(sa_url, connect_timeout=connect_timeout,
                                     statement_timeout=statement_timeout,
                                     idle_in_transaction_timeout=idle_in_transaction_timeout,
                                     pool_size=pool_size, max_overflow=max_overflow)
        self._autocommit = create_mysql_engine(
            sa_url, connect_timeout=connect_timeout, statement_timeout=statement_timeout,
            pool_size=pool_size, max_overflow=max_overflow, autocommit=True)
        super().__init__(engine, read_engine=self._autocommit,
                         single_engine=self._autocommit)
        self._enclosing = enclosing_for(sa_url)
        # MySQL has no notification channel: other processes' edits are seen at the next tick.
        self._channel = wake_channel(f"mysql:{mask_url(sa_url)}")
        if session_locks:
            # No read timeout beyond a lock request's second: a standby's waits are bounded
            # by it, a holder's connection only holds.
            self._sessions = MySQLSessions(engine, self.notify, connect_args(
                connect_timeout=connect_timeout, statement_timeout=float(ASK_FOR)))
        else:
            self._sessions = ClockOnly(f"{CLOCK_PATH} (goatbeat_session_locks is off)")
        try:
            prepare_schema(engine, create=create_schema,
                           migration_engine=lambda: create_migration_engine(sa_url))
        except BaseException:
            self._sessions.close()
            engine.dispose()
            self._autocommit.dispose()
            raise

    # -- dialect hooks -------------------------------------------------------------------
    def _now_sql(self) -> sa.ColumnElement[datetime]:
        # Read once per statement, as PostgreSQL's now() is per transaction.
        return sa.func.utc_timestamp(6, type_=UTCDateTime())

    def _insert(self, table: sa.Table) -> Insert:
        return mysql.insert(table)

    def _table_exists(self, conn: sa.Connection, name: str) -> bool:
        # MySQL refuses to describe a table its user holds nothing on, present or not (and says
        # which only to a user who may see it): a table hidden from the user is no table here.
        return conn.execute(sa.text(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = DATABASE() "
            "AND table_name = :name"), {"name": name}).first() is not None

    def _nulls_last(self, column: sa.ColumnElement[Any]) -> tuple[sa.ColumnElement[Any], ...]:
        # No NULLS LAST: NULLs sort first ascending.
        return column.is_(None), column.asc()

    def _subset(self, query: sa.Select[Any]) -> sa.ScalarSelect[Any]:
        # Neither a LIMIT in an IN subquery nor a subquery on the table changed is allowed:
        # a derived table is read (materialised) first.
        derived = query.subquery()
        return sa.select(*derived.c).scalar_subquery()

    def _insert_new(self, conn: sa.Connection, table: sa.Table,
                    rows: dict[str, Any] | Sequence[dict[str, Any]], *,
                    conflict: Sequence[sa.Column[Any]] = (), conflict_where: str | None = None,
                    returning: Sequence[sa.Column[Any]] = ()) -> list[sa.Row[Any]]:
        # No ON CONFLICT, no RETURNING (MySQL has none, MariaDB none on UPDATE): plain
        # INSERTs whose duplicate-key error rolls back that statement only, then the rows
        # inserted read again by primary key in the same transaction.
        key = list(table.primary_key.columns)
        if conflict and not returning:
            # Whether it was inserted is not asked: a no-op update of a taken key, which
            # locks that row exclusively (a duplicate-key error would share-lock it, and two
            # such transactions locking it next would deadlock).
            stmt = mysql.insert(table).on_duplicate_key_update({key[0].name: key[0]})
            if isinstance(rows, dict):
                conn.execute(stmt.values(**rows))
            elif rows:
                conn.execute(stmt, list(rows))
            return []
        if isinstance(rows, dict):
            inserted = self._insert_one(conn, table, rows, bool(conflict))
            found = [] if inserted is None else [inserted]
        else:
            found = self._insert_many(conn, table, list(rows), bool(conflict))
        if not returning or not found:
            return []
        if len(key) == 1:
            where: sa.ColumnElement[bool] = key[0].in_([values[0] for values in found])
        else:
            where = sa.or_(*(sa.and_(*(c == v for c, v in zip(key, values, strict=True)))
                             for values in found))
        return list(conn.execute(sa.select(*returning).where(where)).all())

    def _insert_one(self, conn: sa.Connection, table: sa.Table, row: dict[str, Any],
                    may_exist: bool) -> tuple[Any, ...] | None:
        """Insert ``row``; its primary key, or None when a unique key was taken."""
        try:
            result = conn.execute(sa.insert(table).values(**row))
        except sa.exc.IntegrityError as exc:
            if may_exist and _duplicate(exc):
                return None
            raise
        inserted = result.inserted_primary_key
        assert inserted is not None  # one row, inserted
        return tuple(inserted)

    def _insert_many(self, conn: sa.Connection, table: sa.Table, rows: list[dict[str, Any]],
                     may_exist: bool) -> list[tuple[Any, ...]]:
        (key,) = table.primary_key.columns
        if may_exist:
            taken: set[Any] = set()
            for chunk in self._chunks([row[key.name] for row in rows]):
                taken.update(conn.execute(sa.select(key).where(key.in_(chunk))).scalars())
            rows = [row for row in rows if row[key.name] not in taken]
        if not rows:
            return []
        try:
            conn.execute(sa.insert(table), rows)
        except sa.exc.IntegrityError as exc:
            if not (may_exist and _duplicate(exc)):
                raise
            # Inserted meanwhile by another transaction: one at a time, each taken one left.
            return [found for row in rows
                    if (found := self._insert_one(conn, table, row, True)) is not None]
        return [(row[key.name],) for row in rows]

    def _update_row(self, conn: sa.Connection, stmt: sa.Update,
                    table: sa.Table) -> sa.Row[Any] | None:
        # The row locked first, so that the UPDATE changes it as found and it is read back as
        # written, by its primary key (the UPDATE may change what selected it).
        key = list(table.primary_key.columns)
        where = stmt.whereclause
        found = conn.execute(sa.select(*key).where(sa.true() if where is None else where)
                             .with_for_update()).first()
        if found is None:
            return None
        by_key = [c == v for c, v in zip(key, found, strict=True)]
        conn.execute(stmt.where(*by_key))
        return conn.execute(sa.select(table).where(*by_key)).one()

    def _announced(self) -> None:
        self.notify()

    def close(self) -> None:
        super().close()
        self._autocommit.dispose()

    # -- waiting -------------------------------------------------------------------------
    def wait(self, timeout: float) -> bool:
        if self._closed:
            raise StoreError("wait: the store is closed")
        return self._channel.wait(timeout)

    def notify(self) -> None:
        self._channel.notify()


__all__ = ["MySQLStore"]
