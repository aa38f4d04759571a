"""The PostgreSQL store: the production backend, shared by every replica.

Lease expiry and due-ness are judged by the database's ``now()``, never a host clock. Every
blocking call is bounded (connect timeout, ``statement_timeout``, TCP keepalives) so that no
call can outlive a leader's local deadline, and a session frozen inside a transaction is ended
by the server (``idle_in_transaction_session_timeout``) so its row locks cannot block a takeover.
Edits wake waiting replicas at once through ``LISTEN/NOTIFY`` on channel ``goatbeat``.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import URL

from goatbeat_celery.core.errors import ConfigurationError, StoreError, StoreUnavailable
from goatbeat_celery.migrations import check_schema, upgrade
from goatbeat_celery.store.errors import translated
from goatbeat_celery.store.schema import UTCDateTime
from goatbeat_celery.store.sql import Insert, SQLStore
from goatbeat_celery.store.url import mask_url, normalise_url

logger = logging.getLogger(__name__)

#: The NOTIFY channel edits, manual runs and lease releases are announced on.
CHANNEL = "goatbeat"


def connect_args(*, connect_timeout: float, statement_timeout: float | None,
                 idle_in_transaction_timeout: float | None,
                 application_name: str) -> dict[str, Any]:
    """libpq parameters bounding every blocking call."""
    options = ["-c TimeZone=UTC"]
    if statement_timeout:
        options.append(f"-c statement_timeout={_millis(statement_timeout)}")
    if idle_in_transaction_timeout:
        options.append(
            f"-c idle_in_transaction_session_timeout={_millis(idle_in_transaction_timeout)}"
        )
    return {
        # libpq takes whole seconds (and treats 1 as 2).
        "connect_timeout": max(2, math.ceil(connect_timeout)),
        "options": " ".join(options),
        "application_name": application_name,
        # A server that vanishes without closing the socket is noticed in about 11 s.
        "keepalives": 1,
        "keepalives_idle": 5,
        "keepalives_interval": 2,
        "keepalives_count": 3,
        "tcp_user_timeout": _millis(max(connect_timeout, statement_timeout or 0) + 5),
    }


def _millis(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def create_postgres_engine(
    url: str | URL, *, connect_timeout: float = 5.0, statement_timeout: float | None = 5.0,
    idle_in_transaction_timeout: float | None = 10.0, pool_size: int = 5, max_overflow: int = 5,
    application_name: str = "goatbeat_celery",
) -> sa.Engine:
    """An engine on psycopg 3 whose calls are all bounded in time."""
    return sa.create_engine(
        normalise_url(url),
        # A connection killed by a server restart is replaced rather than failing a call.
        pool_pre_ping=True,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_timeout=connect_timeout,
        connect_args=connect_args(
            connect_timeout=connect_timeout, statement_timeout=statement_timeout,
            idle_in_transaction_timeout=idle_in_transaction_timeout,
            application_name=application_name,
        ),
    )


class PostgresStore(SQLStore):
    """ScheduleStore and LeaseManager on PostgreSQL (psycopg 3).

    The schema must be at the current revision (SchemaOutOfDate otherwise); pass
    ``create_schema=True`` to run the migrations on open instead.
    """

    #: Arrays carry any number of keys in one bound parameter.
    _IN_CHUNK = 10_000

    def __init__(
        self, url: str | URL, *, create_schema: bool = False, connect_timeout: float = 5.0,
        statement_timeout: float = 5.0, idle_in_transaction_timeout: float = 10.0,
        pool_size: int = 5, max_overflow: int = 5, listen: bool = True,
        application_name: str = "goatbeat_celery",
    ) -> None:
        problems = [
            f"{name}: must be a positive number of seconds, got {value!r}"
            for name, value in (("connect_timeout", connect_timeout),
                                ("statement_timeout", statement_timeout),
                                ("idle_in_transaction_timeout", idle_in_transaction_timeout))
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0
        ]
        if problems:
            raise ConfigurationError(problems, subject="PostgreSQL store options")
        sa_url = normalise_url(url)
        engine = create_postgres_engine(
            sa_url, connect_timeout=connect_timeout, statement_timeout=statement_timeout,
            idle_in_transaction_timeout=idle_in_transaction_timeout, pool_size=pool_size,
            max_overflow=max_overflow, application_name=application_name,
        )
        super().__init__(engine)
        self._connect_kwargs = connect_args(
            connect_timeout=connect_timeout, statement_timeout=statement_timeout,
            idle_in_transaction_timeout=None, application_name=f"{application_name}:listen",
        )
        self._conninfo = sa_url.set(drivername="postgresql").render_as_string(
            hide_password=False)
        self._listener: psycopg.Connection[Any] | None = None
        self._listen_lock = threading.Lock()
        try:
            if create_schema:
                upgrade(engine)
            else:
                check_schema(engine)
            if listen:
                with self._listen_lock:
                    self._listen()
        except BaseException:
            engine.dispose()
            raise

    # -- dialect hooks -------------------------------------------------------------------
    def _now_sql(self) -> sa.ColumnElement[datetime]:
        return sa.func.now(type_=UTCDateTime())

    def _insert(self, table: sa.Table) -> Insert:
        return postgresql.insert(table)

    def _in(self, column: sa.ColumnElement[str], values: Sequence[str]) -> sa.ColumnElement[bool]:
        # One array parameter: the same statement text whatever the number of keys.
        return column == sa.any_(sa.bindparam(None, list(values),
                                              type_=postgresql.ARRAY(sa.Text())))

    def _announce_in(self, conn: sa.Connection) -> None:
        # Delivered when (and only if) the transaction commits.
        conn.execute(sa.select(sa.func.pg_notify(CHANNEL, "")))

    # -- waiting -------------------------------------------------------------------------
    def _listen(self) -> psycopg.Connection[Any]:
        """The LISTENing connection, opened (again) if needed; call with the lock held."""
        if self._listener is not None and not self._listener.closed:
            return self._listener
        with translated("listen for changes", self._where):
            conn = psycopg.connect(self._conninfo, autocommit=True, **self._connect_kwargs)
            try:
                conn.execute(f"LISTEN {CHANNEL}")
            except BaseException:
                conn.close()
                raise
        self._listener = conn
        return conn

    def _drop_listener(self) -> None:
        conn, self._listener = self._listener, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:  # already broken; nothing left to release
                pass

    def wait(self, timeout: float) -> bool:
        with self._listen_lock:
            if self._closed:
                raise StoreError("wait: the store is closed")
            reconnected = self._listener is None or self._listener.closed
            conn = self._listen()
            if reconnected:
                # Changes made while no connection listened were not heard: look again now.
                return True
            try:
                for _ in conn.notifies(timeout=max(0.0, timeout), stop_after=1):
                    return True
                return False
            except psycopg.Error as exc:
                self._drop_listener()
                raise StoreUnavailable(
                    f"wait: lost the LISTEN connection to {self._where}: {exc}") from exc

    def notify(self) -> None:
        try:
            with self._write("notify") as txn:
                txn.announce = True
        except StoreError as exc:
            logger.warning("could not notify other replicas: %s", exc,
                           extra={"action": "notify_failed"})

    def close(self) -> None:
        with self._listen_lock:
            self._drop_listener()
        super().close()


__all__ = ["CHANNEL", "PostgresStore", "connect_args", "create_postgres_engine", "mask_url"]
