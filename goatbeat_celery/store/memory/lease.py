"""The memory store's leases."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

from goatbeat_celery.core.rules.fence import grant_lease, released_by
from goatbeat_celery.core.types.lease import LeaseGrant, LeaseInfo, lease_live
from goatbeat_celery.store.memory.base import MemoryStoreBase


class MemoryLeases(MemoryStoreBase):
    """The :class:`~goatbeat_celery.core.protocols.LeaseManager` part."""

    def acquire(self, name: str, holder: str, ttl: timedelta) -> LeaseGrant | None:
        with self._lock:
            now = self.now()
            row = self._leases.get(name)
            write = grant_lease(name, holder, ttl, row=row, now=now)
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
                         prefix: str) -> tuple[list[LeaseGrant | None], bool]:
        grants = self.acquire_many(names, holder, ttl)
        with self._lock:
            now = self.now()
            stale = any(not lease_live(row.holder, row.expires_at, now)
                        for name, row in self._leases.items() if name.startswith(prefix))
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
            return None if row is None else replace(row, store_now=self.now())

    def list_leases(self, prefix: str) -> list[LeaseInfo]:
        with self._lock:
            now = self.now()
            return [replace(row, store_now=now) for name, row in sorted(self._leases.items())
                    if name.startswith(prefix)]

    def forget(self, name: str) -> bool:
        with self._lock:
            row = self._leases.get(name)
            if row is None or lease_live(row.holder, row.expires_at, self.now()):
                return False
            del self._leases[name]
            return True
