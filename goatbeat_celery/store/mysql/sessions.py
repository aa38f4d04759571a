"""The session path on MySQL and MariaDB: named locks (``GET_LOCK``) held by a connection of
the holder's own (store.sessions).

The holder of lease ``name`` under token ``T`` holds the named lock of that pair on a
connection opened for it; the server lets go of it the moment that connection's session ends,
however the process ends. A standby asks for the same lock from a thread on a connection of its
own, one second at a time (``GET_LOCK(…, 1)``: no CPU while the server holds the request), and
wakes the store's waiters once it is granted. Lock names are server-wide: each names the
database as well, so that two databases on one server never share one.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from goatbeat_celery.store.sessions import HeldLocks, session_key

logger = logging.getLogger(__name__)

PATH = ("session: a standby waits on the leader's named lock (GET_LOCK) and takes over when "
        "its database session ends")
#: How long one lock request of a waiting standby waits before it looks whether it still
#: should (a standby that stopped watching lets go within this).
ASK_FOR = 1


def lock_name(database: str, name: str, token: int) -> str:
    """The named lock of lease ``name`` under ``token`` in ``database`` (64 characters at most,
    as the server requires)."""
    digest = hashlib.blake2b(f"{database}\0{session_key(name, token)}".encode(), digest_size=16)
    return f"goatbeat:{digest.hexdigest()}"


class _Connections:
    """Connections outside the store's pool, each holding or waiting on one lock."""

    def __init__(self, engine: sa.Engine, connect_args: dict[str, Any]) -> None:
        self._dialect = engine.dialect
        self._args = engine.dialect.create_connect_args(engine.url)
        self._extra = {**connect_args, "autocommit": True}
        self.database = engine.url.database or ""

    def open(self) -> Any:
        cargs, cparams = self._args
        return self._dialect.connect(*cargs, **{**cparams, **self._extra})


def _ask(conn: Any, lock: str, wait: int) -> bool:
    """Whether ``conn`` now holds ``lock``, waiting up to ``wait`` seconds for it."""
    with conn.cursor() as cursor:
        cursor.execute("SELECT GET_LOCK(%s, %s)", (lock, wait))
        row = cursor.fetchone()
    return bool(row and row[0] == 1)


def _close(conn: Any) -> None:
    try:
        conn.close()
    except Exception:  # noqa: BLE001  (already broken: the server lets go of its locks)
        pass


class _Waiter:
    """A thread asking for one lock on ``conn``, a connection that found it held. Once
    granted, the holder's session is known gone (``ended`` is told); the lock is let go at
    once, for the other standbys waiting on it to learn it too."""

    def __init__(self, conn: Any, lock: str, ended: Callable[[str], None]) -> None:
        self.key = lock
        self._conn = conn
        self._ended = ended
        self.abandoned = False
        threading.Thread(target=self._wait, name="goatbeat-lease-session",
                         daemon=True).start()

    def _wait(self) -> None:
        granted = False
        try:
            while not self.abandoned and not granted:
                granted = _ask(self._conn, self.key, ASK_FOR)
        except Exception:  # noqa: BLE001  (this connection lost: no evidence)
            granted = False
        finally:
            _close(self._conn)  # lets go of the lock, if it was granted
        if granted and not self.abandoned:
            self._ended(self.key)

    def abandon(self) -> None:
        """Stop caring (the thread ends within a second)."""
        self.abandoned = True


class MySQLSessions(HeldLocks[str, Any]):
    """:class:`~goatbeat_celery.store.sessions.LeaseSessions` on named locks."""

    path = PATH

    def __init__(self, engine: sa.Engine, wake: Callable[[], None],
                 connect_args: dict[str, Any]) -> None:
        super().__init__(wake)
        self._connections = _Connections(engine, connect_args)

    def _key(self, name: str, token: int) -> str:
        return lock_name(self._connections.database, name, token)

    def _release(self, handle: Any) -> None:
        _close(handle)

    def probe(self) -> None:
        pass  # MySQL's proxies keep a client's session on one server connection

    def gone(self, name: str, token: int) -> bool:
        # Not asked here without waiting: a lock free now may be one its holder never took
        # (it could not), which is no evidence; the waiter, which saw it held, decides.
        return self.known_gone(name, token)

    def hold(self, name: str, token: int) -> None:
        lock = self._key(name, token)
        with self._lock:
            own = self._own.get(name)
            self._replace_waiter(name, None)
            if own is not None and own[1] == lock:
                return
            self._let_go(name)
            conn = None
            try:
                conn = self._connections.open()
                held = _ask(conn, lock, 0)
            except Exception as exc:  # noqa: BLE001
                held = False
                logger.warning("lease %r: its session lock could not be taken (%s); a crash "
                               "of this replica is detected by the clock", name, exc,
                               extra={"action": "lease_session_busy"})
            if not held:
                if conn is not None:
                    _close(conn)
                return
            self._own[name] = (conn, lock)

    def watch(self, name: str, token: int) -> None:
        lock = self._key(name, token)
        with self._lock:
            if self._known(name, lock) is not None:
                return
            self._let_go(name)
            self._replace_waiter(name, None)
            # Seen held here first, before waiting: a lock free from the start is one its
            # holder never took (it could not), not evidence of its end.
            conn = None
            try:
                conn = self._connections.open()
                free = _ask(conn, lock, 0)
            except Exception:  # noqa: BLE001  (no evidence: the clock decides)
                free = True
            if free:
                if conn is not None:
                    _close(conn)
                return
            self._waiters[name] = _Waiter(conn, lock, self._learn)

__all__ = ["PATH", "MySQLSessions", "lock_name"]
