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
from typing import Protocol

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


__all__ = ["CLOCK_PATH", "ClockOnly", "LeaseSessions", "session_key"]
