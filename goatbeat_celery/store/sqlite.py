"""The SQLite store: the embedded default for replicas on one host.

Several processes may share the file safely: writes run in ``BEGIN IMMEDIATE`` transactions
(taking the write lock up front, so two claimers queue instead of deadlocking on an upgrade
from a read lock), the journal is in WAL mode so readers never block the writer, and a busy
timeout bounds the wait for the lock. All replicas share the host's clock, so the store's clock
is an injectable host clock. The schema is created (or brought up to date) on open.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import URL

from goatbeat_celery.core.types.errors import ConfigurationError, StoreError
from goatbeat_celery.core.types.instants import UTC, ensure_aware
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.store.migrate import prepare_schema
from goatbeat_celery.store.schema import UTCDateTime
from goatbeat_celery.store.sessions import CLOCK_PATH, ClockOnly
from goatbeat_celery.store.sql import Insert, SQLStore
from goatbeat_celery.store.sqlite_sessions import file_sessions
from goatbeat_celery.store.url import normalise_url
from goatbeat_celery.store.wake_channel import wake_channel

Clock = Callable[[], datetime]

#: Execution option marking connections that only read (they BEGIN without taking the lock).
READ_ONLY = "goatbeat_read_only"


def system_clock() -> datetime:
    return datetime.now(UTC)


def _json_or_text(text: str) -> Any:
    """A JSON column's value; text that is not JSON (SQLite does not check what it is given)
    comes back as the text itself, for the reader to name as damage, instead of failing the
    whole read."""
    try:
        return json.loads(text)
    except (RecursionError, ValueError):
        return text


def create_sqlite_engine(url: str | URL, *, busy_timeout: float = 5.0) -> sa.Engine:
    """An engine whose transactions take the write lock up front (``BEGIN IMMEDIATE``),
    unless run with the ``goatbeat_read_only`` execution option."""
    sa_url = normalise_url(url)
    database = sa_url.database
    if not database or database == ":memory:" or database.startswith("file::memory:"):
        raise ConfigurationError([Problem(
            "database_url", "an in-memory SQLite database is private to one connection",
            "use sqlite:///path/to/file.db (shared by the processes of one host) or memory:// "
            "(one process, for tests)")])
    engine = sa.create_engine(
        sa_url,
        connect_args={"timeout": busy_timeout, "check_same_thread": False},
        json_deserializer=_json_or_text,
    )

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, record: Any) -> None:
        # Let SQLAlchemy's "begin" event below issue BEGIN; the driver's own transaction
        # handling would defer it and could not take the write lock up front.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {max(0, round(busy_timeout * 1000))}")
            cursor.execute("PRAGMA journal_mode = WAL")
            # WAL with synchronous=NORMAL survives any crash of the processes; a power cut may
            # lose the last commits, whose occurrences are then claimed again under the same
            # keys (dispatch stays at least once, as after any crash before bookkeeping).
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        read_only = conn.get_execution_options().get(READ_ONLY, False)
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

    return engine


class SQLiteStore(SQLStore):
    """ScheduleStore and LeaseManager in a SQLite file.

    :meth:`wait` hears the edits made through any store object of this process on the same
    file; edits made by other processes are seen at the next tick (bounded by
    ``max_interval``), as SQLite has no notification channel between processes.
    """

    wakes_on_every_change = False

    def __init__(self, url: str | URL, *, clock: Clock | None = None,
                 create_schema: bool = True, busy_timeout: float = 5.0,
                 session_locks: bool = True) -> None:
        problems = []
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, (int, float)) \
                or busy_timeout <= 0:
            problems.append(Problem(
                "busy_timeout", f"must be a positive number of seconds, got {busy_timeout!r}"))
        if not isinstance(session_locks, bool):
            problems.append(Problem("session_locks",
                                    f"expected True or False, got {session_locks!r}"))
        if problems:
            raise ConfigurationError(problems, subject="SQLite store options")
        engine = create_sqlite_engine(url, busy_timeout=busy_timeout)
        super().__init__(engine, read_engine=engine.execution_options(**{READ_ONLY: True}))
        self._clock = clock or system_clock
        # Read from the clock each time a statement using it runs.
        self._now_param = sa.bindparam("goatbeat_now", callable_=self.now, type_=UTCDateTime())
        database = engine.url.database
        assert database is not None
        self._channel = wake_channel(f"sqlite:{os.path.realpath(database)}")
        self._sessions = file_sessions(database, self.notify) if session_locks else ClockOnly(
            f"{CLOCK_PATH} (goatbeat_session_locks is off)")
        try:
            prepare_schema(engine, create=create_schema)
        except BaseException:
            engine.dispose()
            raise

    # -- dialect hooks -------------------------------------------------------------------
    def _now_sql(self) -> sa.ColumnElement[datetime]:
        return self._now_param

    def _insert(self, table: sa.Table) -> Insert:
        return sqlite.insert(table)

    def _announced(self) -> None:
        self.notify()

    # -- clock and waiting ---------------------------------------------------------------
    def now(self) -> datetime:
        return ensure_aware(self._clock(), "clock()")

    def wait(self, timeout: float) -> bool:
        if self._closed:
            raise StoreError("wait: the store is closed")
        return self._channel.wait(timeout)

    def notify(self) -> None:
        self._channel.notify()


__all__ = ["SQLiteStore", "create_sqlite_engine", "system_clock"]
