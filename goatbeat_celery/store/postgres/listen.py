"""LISTEN/NOTIFY: edits wake waiting replicas at once on channel ``goatbeat``."""

from __future__ import annotations

import logging
import select
import socket
import threading
import time
from typing import Any

import psycopg
import sqlalchemy as sa

from goatbeat_celery.core.types.errors import StoreError
from goatbeat_celery.store.errors import translated
from goatbeat_celery.store.postgres.engine import _close
from goatbeat_celery.store.postgres.sessions import PostgresSessions
from goatbeat_celery.store.sql.base import SQLStoreBase

logger = logging.getLogger(__name__)

#: The NOTIFY channel edits, manual runs and lease releases are announced on.
CHANNEL = "goatbeat"


class PostgresListening(SQLStoreBase):
    """Waiting for changes on the LISTEN connection, and announcing them with NOTIFY.

    The connection is opened by the first :meth:`wait` (a store that never waits, as in a CLI
    command, never opens it), and again the same way after it is lost.
    """

    _conninfo: str
    _connect_kwargs: dict[str, Any]
    _listener: psycopg.Connection[Any] | None
    _listen_lock: threading.Lock
    _wake_ends: tuple[socket.socket, socket.socket] | None

    def _announce_in(self, conn: sa.Connection) -> None:
        # Delivered when (and only if) the transaction commits.
        conn.execute(sa.select(sa.func.pg_notify(CHANNEL, "")))

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
        _close(conn)

    def wait(self, timeout: float) -> bool:
        # One select on the LISTEN socket and the wake socket: psycopg's own wait looks at the
        # clock every 0.1 s, which an idle leader would pay for all the time it sleeps.
        deadline = time.monotonic() + max(0.0, timeout)
        with self._listen_lock:
            if self._closed or self._wake_ends is None:
                raise StoreError("wait: the store is closed")
            woken_by = self._wake_ends[1]
            reconnected = self._listener is None or self._listener.closed
            conn = self._listen()
            if reconnected:
                # Changes made while no connection listened were not heard: look again now.
                return True
            try:
                while True:
                    # What arrived already (or since the select said so) before sleeping.
                    if _notified(conn):
                        return True
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    # A standby's lock requests (store.postgres.sessions) are answered when the
                    # leader's session ends: that wakes it too.
                    sessions = self._sessions
                    granted = sessions.sockets() if isinstance(sessions, PostgresSessions) else []
                    ready, _, _ = select.select([conn.pgconn.socket, woken_by.fileno(),
                                                 *granted], [], [], remaining)
                    if not ready:  # the timeout: nothing arrived, nothing for libpq to read
                        return False
                    if woken_by.fileno() in ready:  # close() is under way; left readable for good
                        return False
                    if isinstance(sessions, PostgresSessions) and set(granted) & set(ready):
                        sessions.collect(ready)
                        return True
            except psycopg.Error as exc:
                # The server went away (a restart, a killed session): listen again at once.
                # StoreUnavailable if it is still down; otherwise report a wake, since
                # whatever was announced meanwhile went unheard.
                logger.info("LISTEN connection to %s lost (%s); listening again",
                            self._where, exc, extra={"action": "listen_reconnect"})
                self._drop_listener()
                self._listen()
                return True

    def notify(self) -> None:
        try:
            with self._write("notify") as txn:
                txn.announce = True
        except StoreError as exc:
            logger.warning("could not notify other replicas: %s", exc,
                           extra={"action": "notify_failed"})


def _notified(conn: psycopg.Connection[Any]) -> bool:
    """Whether a notification has arrived on ``conn``: libpq reads what the socket holds and
    every notification parsed is taken, so that a burst of announcements wakes one wait.
    Called on libpq directly: psycopg's ``notifies()`` generator cost an idle leader a tenth
    of each wake's CPU. Raises psycopg.OperationalError when the connection is lost."""
    pgconn = conn.pgconn
    pgconn.consume_input()
    arrived = False
    while pgconn.notifies() is not None:
        arrived = True
    return arrived
