"""The session path on PostgreSQL: session-level advisory locks (store.sessions).

Each lease watched has a connection of its own (opened on first use, autocommit, no statement
timeout, since a standby's lock request waits there for as long as the holder lives). The
holder keeps the lock of its token on it; a standby sends ``pg_advisory_lock`` on it without
waiting for the answer, and the store's ``wait`` selects on its socket: the server answers the
moment the holder's session ends, and nothing runs in between.

Behind a transaction-pooling proxy (pgbouncer's ``pool_mode = transaction``) a session lock
stays with a server connection the proxy hands to other clients: a standby could be granted its
leader's lock. A connection whose backend changes between statements, or that lost the server
options every connection of the store sets, is such a proxy: the path is turned off (logged
once) and takeovers wait for the clock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import pq
from psycopg.generators import execute

from goatbeat_celery.store.postgres.engine import _close
from goatbeat_celery.store.sessions import session_key

logger = logging.getLogger(__name__)

PATH = ("session: a standby waits on the leader's advisory lock and takes over when its "
        "database session ends")
#: What every connection of the store sets (store.postgres.engine.connect_args): a connection
#: without it came through something that dropped the server options.
_MARK = "force_custom_plan"
_POOLED = ("the lease connection's statements ran in different server sessions (a "
           "transaction-pooling proxy)")
#: The connection :meth:`PostgresSessions.probe` opens, under a name no lease has.
_PROBE = "\0probe"


@dataclass
class _Session:
    """One lease's connection: the lock it holds as the holder, and the lock request under
    way as a standby."""

    conn: psycopg.Connection[Any]
    pid: int
    own: int | None = None
    waiting: int | None = None


class PostgresSessions:
    """:class:`~goatbeat_celery.store.sessions.LeaseSessions` on advisory locks."""

    def __init__(self, conninfo: str, connect_kwargs: dict[str, Any]) -> None:
        self._conninfo = conninfo
        self._kwargs = connect_kwargs
        self._sessions: dict[str, _Session] = {}
        #: The keys whose session is known to have ended. A standby granted such a lock lets
        #: go of it at once, keeping only this: the other standbys waiting on it learn it too
        #: (a key names one token of one lease, never held again).
        self._ended: set[int] = set()
        #: The keys seen held by another session. Only such a lock, found free later, is
        #: evidence of its holder's end: a holder of an earlier release never takes it, and
        #: its lock is free from the start.
        self._seen_held: set[int] = set()
        self._lock = threading.RLock()
        #: Why the path was turned off (a proxy was detected), or None.
        self.off: str | None = None

    # -- LeaseSessions ------------------------------------------------------------------
    def probe(self) -> None:
        with self._lock:
            if self.off is not None:
                return
            session = self._session(_PROBE)  # turns the path off when the options were lost
            if session is None:
                return
            try:
                [(pid,)] = _rows(session.conn, "SELECT pg_backend_pid()")
                if pid != session.pid:
                    self._turn_off(_POOLED)
            finally:
                self._forget(_PROBE)

    def gone(self, name: str, token: int) -> bool:
        # A session that cannot be asked proves nothing: the clock decides (a restarting
        # server ends every session, this replica's own with them).
        try:
            return self._gone(name, token)
        except psycopg.Error:
            with self._lock:
                self._forget(name)
            return False

    def _gone(self, name: str, token: int) -> bool:
        key = session_key(name, token)
        with self._lock:
            if self.off is not None:
                return False
            if key in self._ended:
                return True
            session = self._session(name)
            if session is None or session.own == key:  # held here: by a holder alive
                return False
            self._collect(name, session)
            if key in self._ended:
                return True
            if session.waiting == key:
                return False
            self._stop_waiting(name)
            return self._try(name, key, as_evidence=True)

    def known_gone(self, name: str, token: int) -> bool:
        with self._lock:
            session = self._sessions.get(name)
            if self.off is not None:
                return False
            if session is not None:
                self._collect(name, session)
            return session_key(name, token) in self._ended

    def hold(self, name: str, token: int) -> None:
        # Not held, the lease stands as granted: a crash of this replica is then seen by the
        # clock, as when the lock is busy.
        try:
            self._hold(name, token)
        except psycopg.Error as exc:
            with self._lock:
                self._forget(name)
            logger.warning("lease %r: its session lock could not be taken (%s); a crash of this "
                           "replica is detected by the clock", name, exc,
                           extra={"action": "lease_session_busy"})

    def _hold(self, name: str, token: int) -> None:
        key = session_key(name, token)
        with self._lock:
            if self.off is not None:
                return
            self._stop_waiting(name)
            session = self._session(name)
            if session is None:
                return
            previous = session.own
            if previous != key and not self._try(name, key, as_evidence=False):
                logger.warning("lease %r: the lock of token %d is held by another session; "
                               "a crash of this replica is detected by the clock", name, token,
                               extra={"action": "lease_session_busy"})
                return
            session = self._sessions.get(name)
            if session is None:
                return
            if previous is not None and previous != key:
                self._unlock(name, previous)
            session.own = key

    def watch(self, name: str, token: int) -> None:
        key = session_key(name, token)
        with self._lock:
            if self.off is not None:
                return
            session = self._sessions.get(name)
            if session is not None:
                self._collect(name, session)
                session = self._sessions.get(name)
            if key in self._ended or (session is not None and key in (session.waiting,
                                                                       session.own)):
                return
            self._stop_waiting(name)
            session = self._session(name)
            if session is None:
                return
            if session.own is not None:
                self._unlock(name, session.own)
            session = self._sessions.get(name)
            if session is None:
                return
            session.own = None
            if key not in self._seen_held and self._try(name, key, as_evidence=True) is False \
                    and key not in self._seen_held:
                return  # free from the start: nothing to wait on (an earlier release's holder)
            session = self._sessions.get(name)
            if session is None or key in self._ended:
                return
            try:
                session.conn.pgconn.send_query(
                    f"SELECT pg_advisory_lock({key}), pg_backend_pid()".encode())
            except psycopg.Error:
                self._forget(name)
                return
            session.waiting = key

    def drop(self, name: str, token: int) -> None:
        key = session_key(name, token)
        with self._lock:
            session = self._sessions.get(name)
            if session is None or session.waiting is not None:
                return
            if session.own == key:
                self._unlock(name, key)

    def close(self) -> None:
        with self._lock:
            for name in list(self._sessions):
                self._forget(name)

    # -- waiting ------------------------------------------------------------------------
    def sockets(self) -> list[int]:
        """The sockets of the lock requests under way, for the store's select."""
        with self._lock:
            return [session.conn.pgconn.socket for session in self._sessions.values()
                    if session.waiting is not None]

    def collect(self, ready: Sequence[int]) -> None:
        """Read what arrived on the sockets ``ready`` (a grant, or a lost connection), so that
        they are not readable again."""
        with self._lock:
            for name, session in list(self._sessions.items()):
                if session.waiting is not None and session.conn.pgconn.socket in ready:
                    self._collect(name, session)

    # -- plumbing -----------------------------------------------------------------------
    def _session(self, name: str) -> _Session | None:
        session = self._sessions.get(name)
        if session is not None and not session.conn.closed:
            return session
        self._sessions.pop(name, None)
        conn = psycopg.connect(self._conninfo, autocommit=True, **self._kwargs)
        try:
            pid, mark = _rows(conn, "SELECT pg_backend_pid(), "
                                    "current_setting('plan_cache_mode', true)")[0]
        except BaseException:
            _close(conn)
            raise
        session = self._sessions[name] = _Session(conn=conn, pid=pid)
        if mark != _MARK:
            self._turn_off("the server options set on connect did not reach the server (a "
                           "connection pooler in between?)")
            return None
        return session

    def _try(self, name: str, key: int, *, as_evidence: bool) -> bool:
        # Collecting a wait may have forgotten a session the server closed: a new one asks.
        session = self._sessions.get(name) or self._session(name)
        if session is None:
            return False
        try:
            got, pid = _rows(session.conn, f"SELECT pg_try_advisory_lock({key}), "
                                           "pg_backend_pid()")[0]
        except psycopg.Error:
            self._forget(name)
            raise
        if pid != session.pid:
            self._turn_off(_POOLED)
            return False
        if got and as_evidence:
            self._unlock(name, key)
            if key not in self._seen_held:
                return False  # never seen held: a holder that takes no lock, not a dead one
            self._ended.add(key)
        elif not got:
            self._seen_held.add(key)
        elif got:
            session.own = key
        return bool(got)

    def _unlock(self, name: str, key: int) -> None:
        session = self._sessions.get(name)
        if session is None:
            return
        try:
            _rows(session.conn, f"SELECT pg_advisory_unlock({key})")
        except psycopg.Error:
            self._forget(name)  # the session is gone, and its locks with it
            return
        if session.own == key:
            session.own = None

    def _collect(self, name: str, session: _Session) -> None:
        """The answer to the lock request under way, if it has arrived."""
        if session.waiting is None:
            return
        pgconn = session.conn.pgconn
        try:
            pgconn.consume_input()
            if pgconn.is_busy():
                return
            results = []
            while (result := pgconn.get_result()) is not None:
                results.append(result)
        except psycopg.Error:
            self._forget(name)
            return
        key, session.waiting = session.waiting, None
        if not results or results[-1].status != pq.ExecStatus.TUPLES_OK:
            self._forget(name)  # refused or cancelled: the next look asks again
            return
        pid = int(results[-1].get_value(0, 1) or b"0")
        if pid != session.pid:
            self._turn_off(_POOLED)
            return
        self._ended.add(key)
        self._unlock(name, key)

    def _stop_waiting(self, name: str) -> None:
        """A lock request under way cannot be taken back on its connection: the connection is
        closed (the server drops the request with it) and the next use opens another."""
        session = self._sessions.get(name)
        if session is not None and session.waiting is not None:
            self._forget(name)

    def _forget(self, name: str) -> None:
        session = self._sessions.pop(name, None)
        if session is not None:
            _close(session.conn)

    def _turn_off(self, reason: str) -> None:
        if self.off is None:
            self.off = reason
            logger.warning("lease sessions off, takeovers after a crash wait for the lease to "
                           "expire: %s; set goatbeat_session_locks = False to say so", reason,
                           extra={"action": "lease_sessions_off"})
        for name in list(self._sessions):
            self._forget(name)

    @property
    def path(self) -> str:
        return PATH if self.off is None else f"clock: {self.off}"


def _rows(conn: psycopg.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
    """The rows of one statement run straight through libpq on ``conn``."""
    pgconn = conn.pgconn
    pgconn.send_query(sql.encode())
    results = conn.wait(execute(pgconn))
    result = results[-1]
    if result.status != pq.ExecStatus.TUPLES_OK:
        from psycopg.errors import error_from_result

        raise error_from_result(result, encoding=conn.info.encoding)
    return [tuple(_value(result, row, col) for col in range(result.nfields))
            for row in range(result.ntuples)]


def _value(result: Any, row: int, col: int) -> Any:
    raw = result.get_value(row, col)
    if raw is None:
        return None
    text = bytes(raw).decode()
    if text in ("t", "f"):
        return text == "t"
    try:
        return int(text)
    except ValueError:
        return text


__all__ = ["PATH", "PostgresSessions"]
