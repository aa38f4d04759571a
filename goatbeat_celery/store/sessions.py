"""Lease sessions: how a store learns that a lease holder's process is gone without waiting
for the clock (core.rules.fence.grant_lease's ``session_gone``).

The holder of lease ``name`` under token ``T`` holds a lock keyed by both (:func:`session_key`)
for as long as its session lives: a PostgreSQL advisory lock on a connection of its own, a
lock on a byte of a file beside a SQLite database. It takes that lock before its grant is
committed, so a standby never reads a token whose lock is not held yet. A standby waits for the
same lock without spending CPU; the database (or the kernel) grants it the moment the holder's
session ends, and that grant is the evidence :meth:`LeaseSessions.gone` reports. The key names
the token, so a lock left by an older holder never speaks for a newer one.

A store that cannot hold such locks safely (the setting is off, a transaction-pooling proxy
was detected, the platform has no per-descriptor file locks) uses :class:`ClockOnly`: every
takeover then waits for the lease to expire, as before.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

#: The path of a store that watches no session.
CLOCK_PATH = "clock: a standby takes over a crashed leader when its lease expires"


def session_key(name: str, token: int) -> int:
    """The lock key of lease ``name`` under ``token``: a signed 64-bit integer (PostgreSQL's
    advisory lock key; a SQLite file's byte offset takes its absolute value)."""
    digest = hashlib.blake2b(f"goatbeat-lease\0{name}\0{token}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


class LeaseSessions(Protocol):
    """The store's side of the session path (module docstring). Names are those of leases
    whose holder's session is watched (core.rules.fence.session_watched)."""

    @property
    def path(self) -> str:
        """How takeovers after a crash are detected, for ``goatbeat check``."""
        ...

    def probe(self) -> None:
        """Look once for what would make the path unsafe (a pooling proxy), turning it off."""
        ...

    def gone(self, name: str, token: int) -> bool:
        """Whether the session that held ``name`` under ``token`` is known to have ended (this
        store was granted its lock); may look once without waiting."""
        ...

    def known_gone(self, name: str, token: int) -> bool:
        """:meth:`gone` from what has arrived already, with no round trip."""
        ...

    def hold(self, name: str, token: int) -> None:
        """Hold the lock of ``name`` under ``token`` (before its grant is committed), letting go
        of any older one of ``name``. A lock someone else holds is left to them: standbys then
        see it held and wait for the clock, which is safe."""
        ...

    def watch(self, name: str, token: int) -> None:
        """Wait, without spending CPU, for the lock of ``name`` under ``token`` (a live lease
        held by another); the store's ``wait`` wakes when it is granted."""
        ...

    def drop(self, name: str, token: int) -> None:
        """Let go of the lock of ``name`` under ``token`` (a release), if held."""
        ...

    def close(self) -> None:
        ...


class ClockOnly:
    """No session path: a crashed holder is replaced when its lease expires."""

    def __init__(self, path: str) -> None:
        self.path = path

    def probe(self) -> None:
        pass

    def gone(self, name: str, token: int) -> bool:
        return False

    def known_gone(self, name: str, token: int) -> bool:
        return False

    def hold(self, name: str, token: int) -> None:
        pass

    def watch(self, name: str, token: int) -> None:
        pass

    def drop(self, name: str, token: int) -> None:
        pass

    def close(self) -> None:
        pass



_Key = TypeVar("_Key", bound=Hashable)
_Handle = TypeVar("_Handle")


class Waiting(Protocol):
    """A standby's request for one lock, under way on a thread of its own."""

    @property
    def key(self) -> Hashable:
        """The lock asked for."""
        ...

    def abandon(self) -> None:
        """Stop caring: a grant that comes after is not reported."""
        ...


class HeldLocks(Generic[_Key, _Handle]):
    """What a session path on locks keeps (MySQL's named locks, SQLite's byte locks): each lock
    held through a handle of this store's own (a connection, a descriptor), each waited on by a
    :class:`Waiting` on a thread of its own, and the locks whose holder's session is known
    gone. A subclass says how a lock is named (:meth:`_key`), let go of (:meth:`_release`),
    held and asked for (``gone``, ``hold``, ``watch``)."""

    path: str

    def __init__(self, wake: Callable[[], None]) -> None:
        self._wake = wake
        self._lock = threading.Lock()
        #: The locks whose holder's session is known gone (never held again: a lock names one
        #: token of one lease).
        self._ended: set[_Key] = set()
        #: Per lease: (handle, lock) held as its holder.
        self._own: dict[str, tuple[_Handle, _Key]] = {}
        #: Per lease: the standby's request (granted or under way).
        self._waiters: dict[str, Waiting] = {}

    def _key(self, name: str, token: int) -> _Key:
        raise NotImplementedError

    def _release(self, handle: _Handle) -> None:
        raise NotImplementedError

    def _known(self, name: str, key: _Key) -> bool | None:
        """Whether the holder of ``key`` is gone as far as this store knows already (granted
        to a waiter here: yes; waited on or held here: not yet), or None when it does not."""
        if key in self._ended:
            return True
        waiter = self._waiters.get(name)
        own = self._own.get(name)
        if (waiter is not None and waiter.key == key) or (own is not None and own[1] == key):
            return False
        return None

    def known_gone(self, name: str, token: int) -> bool:
        with self._lock:
            return self._key(name, token) in self._ended

    def drop(self, name: str, token: int) -> None:
        with self._lock:
            own = self._own.get(name)
            if own is not None and own[1] == self._key(name, token):
                self._release(own[0])
                del self._own[name]

    def close(self) -> None:
        with self._lock:
            for handle, _ in self._own.values():
                self._release(handle)
            self._own.clear()
            for waiter in self._waiters.values():
                waiter.abandon()
            self._waiters.clear()

    def _let_go(self, name: str) -> None:
        """Let go of the lock held as the holder of ``name``, if any."""
        own = self._own.pop(name, None)
        if own is not None:
            self._release(own[0])

    def _learn(self, key: _Key) -> None:
        """A waiter's lock was granted: its holder's session is gone; wake this process."""
        with self._lock:
            self._ended.add(key)
        self._wake()

    def _replace_waiter(self, name: str, waiter: Waiting | None) -> None:
        old = self._waiters.pop(name, None)
        if old is not None:
            old.abandon()
        if waiter is not None:
            self._waiters[name] = waiter


__all__ = ["CLOCK_PATH", "ClockOnly", "HeldLocks", "LeaseSessions", "Waiting", "session_key"]
