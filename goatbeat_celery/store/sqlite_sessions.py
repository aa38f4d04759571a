"""The session path on SQLite (one host): byte locks on a file beside the database
(store.sessions).

The holder of lease ``name`` under token ``T`` holds a write lock on one byte of
``<database>-leases`` (its offset from :func:`~goatbeat_celery.store.sessions.session_key`)
through a descriptor of its own; the kernel lets go of it when the process dies, however it
dies. A standby asks for the same byte from a thread blocked in ``fcntl`` (no CPU while it
waits), which wakes the store's waiters once it is granted. The locks are open-file-description
locks (Linux's ``F_OFD_SETLK``): two stores of one process exclude each other as two processes
do, and closing one descriptor never drops another's lock. Where the platform has none, the
path is off and takeovers wait for the clock.
"""

from __future__ import annotations

import fcntl
import logging
import os
import struct
import threading
from collections.abc import Callable

from goatbeat_celery.store.sessions import (
    CLOCK_PATH,
    ClockOnly,
    HeldLocks,
    LeaseSessions,
    session_key,
)

logger = logging.getLogger(__name__)

PATH = ("file lock: a standby waits on the leader's lock on a file beside the database and "
        "takes over when its process ends")
_SETLK = getattr(fcntl, "F_OFD_SETLK", None)
_SETLKW = getattr(fcntl, "F_OFD_SETLKW", None)
#: Offsets stay within what a file offset can hold.
_OFFSETS = 2 ** 62


def _flock(kind: int, offset: int) -> bytes:
    """A ``struct flock`` for one byte at ``offset`` (``l_pid`` 0, as OFD locks require)."""
    return struct.pack("hhqqixxxx", kind, os.SEEK_SET, offset, 1, 0)


def _offset(name: str, token: int) -> int:
    return abs(session_key(name, token)) % _OFFSETS


class _Waiter:
    """A thread asking for one byte. Once granted, the holder's process is known gone
    (``ended`` is told) and the byte is let go at once, for the other standbys waiting on it
    to learn it too."""

    def __init__(self, path: str, offset: int, ended: Callable[[int], None]) -> None:
        self.key = offset
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self._ended = ended
        self.abandoned = False
        threading.Thread(target=self._wait, name="goatbeat-lease-session",
                         daemon=True).start()

    def _wait(self) -> None:
        try:
            fcntl.fcntl(self._fd, _SETLKW, _flock(fcntl.F_WRLCK, self.key))  # type: ignore[arg-type]
            granted = True
        except OSError:
            granted = False
        os.close(self._fd)  # lets go of the byte, if it was granted
        if granted and not self.abandoned:
            self._ended(self.key)

    def abandon(self) -> None:
        """Stop caring (the thread ends once the byte is granted, or with the process)."""
        self.abandoned = True


class FileSessions(HeldLocks[int, int]):
    """:class:`~goatbeat_celery.store.sessions.LeaseSessions` on byte locks of one file."""

    path = PATH

    def __init__(self, path: str, wake: Callable[[], None]) -> None:
        super().__init__(wake)
        self._path = path

    def _key(self, name: str, token: int) -> int:
        return _offset(name, token)

    def _release(self, handle: int) -> None:
        os.close(handle)

    def probe(self) -> None:
        pass  # one host, no proxy: the kernel holds the locks

    def gone(self, name: str, token: int) -> bool:
        offset = _offset(name, token)
        with self._lock:
            known = self._known(name, offset)
            if known is not None:
                return known
            fd = self._try(offset)
            if fd is None:
                return False
            os.close(fd)
            self._ended.add(offset)
            return True

    def hold(self, name: str, token: int) -> None:
        offset = _offset(name, token)
        with self._lock:
            own = self._own.get(name)
            if own is not None and own[1] == offset:
                self._replace_waiter(name, None)
                return
            fd = self._try(offset)
            self._replace_waiter(name, None)
            self._let_go(name)
            if fd is None:
                logger.warning("lease %r: the lock of token %d is held by another process; a "
                               "crash of this replica is detected by the clock", name, token,
                               extra={"action": "lease_session_busy"})
                return
            self._own[name] = (fd, offset)

    def watch(self, name: str, token: int) -> None:
        offset = _offset(name, token)
        with self._lock:
            if self._known(name, offset) is not None:
                return
            self._let_go(name)
            self._replace_waiter(name, _Waiter(self._path, offset, self._learn))

    def _try(self, offset: int) -> int | None:
        """A new descriptor holding the byte at ``offset``, or None when another holds it."""
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.fcntl(fd, _SETLK, _flock(fcntl.F_WRLCK, offset))  # type: ignore[arg-type]
        except OSError:
            os.close(fd)
            return None
        return fd

def file_sessions(database: str, wake: Callable[[], None]) -> LeaseSessions:
    """The session path of the SQLite file ``database``; clock only where the platform has no
    open-file-description locks."""
    if _SETLK is None or _SETLKW is None:
        return ClockOnly(f"{CLOCK_PATH} (this platform has no per-descriptor file locks)")
    return FileSessions(os.path.realpath(database) + "-leases", wake)


__all__ = ["PATH", "FileSessions", "file_sessions"]
