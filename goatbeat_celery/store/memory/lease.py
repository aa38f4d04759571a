"""The memory store's leases."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import timedelta

from goatbeat_celery.core.protocols import LeaseManager
from goatbeat_celery.core.rules.fence import grant_lease, released_by, session_watched
from goatbeat_celery.core.types.lease import LeaseGrant, LeaseInfo, lease_live
from goatbeat_celery.store.memory.base import MemoryStoreBase


class MemoryLeases(MemoryStoreBase, LeaseManager):
    """The :class:`~goatbeat_celery.core.protocols.LeaseManager` part.

    Every holder shares this one process, so no session ends by itself: :meth:`end_session`
    says one did, as a crashed replica's database session ends, for the session path of
    core.rules.fence.grant_lease to be exercised as the SQL stores exercise it.
    """

    def failover_path(self) -> str:
        return "session: as told by end_session (one process)"

    def end_session(self, holder: str) -> None:
        """``holder``'s session ended (it crashed): the leases it holds may be taken before
        their expiry, and waiting replicas are woken, until it asks for a lease again."""
        with self._lock:
            self._ended_sessions.add(holder)
        self.notify()

    def acquire(self, name: str, holder: str, ttl: timedelta) -> LeaseGrant | None:
        with self._lock:
            now = self.now()
            row = self._leases.get(name)
            self._ended_sessions.discard(holder)
            write = grant_lease(
                name, holder, ttl, row=row, now=now,
                session_gone=(lambda found: found.holder in self._ended_sessions)
                if session_watched(name) else None)
            if write is None:
                return None
            grant = write.grant
            self._leases[name] = LeaseInfo(name=name, holder=holder, token=grant.token,
                                           acquired_at=write.acquired_at,
                                           expires_at=grant.expires_at, store_now=now,
                                           previous_holder=write.previous_holder,
                                           changed_at=write.changed_at)
            return grant

    def acquire_many(self, names: Sequence[str], holder: str,
                     ttl: timedelta) -> list[LeaseGrant | None]:
        return [self.acquire(name, holder, ttl) for name in names]

    def acquire_watching(self, names: Sequence[str], holder: str, ttl: timedelta,
                         prefix: str, kept: Collection[str] = ()
                         ) -> tuple[list[LeaseGrant | None], bool]:
        grants = self.acquire_many(names, holder, ttl)
        with self._lock:
            now = self.now()
            stale = any(not lease_live(row.holder, row.expires_at, now)
                        for name, row in self._leases.items()
                        if name.startswith(prefix) and name not in kept)
        return grants, stale

    def release(self, grant: LeaseGrant) -> bool:
        with self._lock:
            row = self._leases.get(grant.name)
            if row is None or row.holder != grant.holder or row.token != grant.token:
                return False
            released = released_by(grant.holder, self.now())
            self._leases[grant.name] = replace(row, holder=None, expires_at=None,
                                               previous_holder=released.previous_holder,
                                               changed_at=released.changed_at)
        self.notify()
        return True

    def inspect(self, name: str) -> LeaseInfo | None:
        with self._lock:
            row = self._leases.get(name)
            return None if row is None else self._seen(row)

    def list_leases(self, prefix: str) -> list[LeaseInfo]:
        with self._lock:
            return [self._seen(row) for name, row in sorted(self._leases.items())
                    if name.startswith(prefix)]

    def forget(self, name: str) -> bool:
        with self._lock:
            row = self._leases.get(name)
            if row is None or lease_live(row.holder, row.expires_at, self.now()):
                return False
            del self._leases[name]
            return True

    def _seen(self, row: LeaseInfo) -> LeaseInfo:
        """``row`` at the store's clock, marked as the SQL stores mark a holder known gone."""
        gone = (row.holder in self._ended_sessions and session_watched(row.name)
                and lease_live(row.holder, row.expires_at, self.now()))
        return replace(row, store_now=self.now(), session_gone=gone)
