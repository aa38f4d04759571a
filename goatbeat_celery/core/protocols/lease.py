"""The lease, its fencing token, and the replicas' rows."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import timedelta
from typing import Protocol

from goatbeat_celery.core.types.lease import LeaseGrant, LeaseInfo


class LeaseManager(Protocol):
    """Elects the one replica allowed to claim, and hands it a fencing token.

    Expiry is judged by the store's clock (PostgreSQL's ``now()``), never the caller's.
    """

    def acquire(self, name: str, holder: str, ttl: timedelta) -> LeaseGrant | None:
        """Take or renew lease ``name`` for ``holder`` until store-now + ``ttl``.

        Succeeds when the row is absent, released, expired, or already held by ``holder``,
        and before its expiry when the store knows its holder's session is gone
        (core.rules.fence.grant_lease; the store watches it from the refusal on and wakes
        :meth:`ScheduleStore.wait` when it ends). A lease taken by a new holder wakes the
        waiting replicas where the store can, so that they watch the new holder at once. The
        token is kept when ``holder`` already held the lease (renewal) and incremented
        otherwise (``changed_holder`` is then true); the first grant has token 1. Returns
        ``None``, changing nothing, while another holder's lease is live. Raises
        StoreUnavailable when the store cannot be reached.
        """
        ...

    def failover_path(self) -> str:
        """How a crashed holder is detected: ``session: ...`` (its ended session, at once),
        ``file lock: ...`` or ``clock: ...`` (when its lease expires), and why. On PostgreSQL
        a connection is opened once to look for a transaction-pooling proxy in between."""
        ...

    def acquire_many(self, names: Sequence[str], holder: str,
                     ttl: timedelta) -> list[LeaseGrant | None]:
        """:meth:`acquire` each of ``names``, as calls one after the other would: the grants
        (or None) in the same order. A store may renew the leases ``holder`` holds in one
        round trip (an idle leader's lease and its member row)."""
        ...

    def acquire_watching(self, names: Sequence[str], holder: str, ttl: timedelta,
                         prefix: str, kept: Collection[str] = ()
                         ) -> tuple[list[LeaseGrant | None], bool]:
        """:meth:`acquire_many`, and whether a lease row whose name starts with ``prefix``
        (taken literally, as :meth:`list_leases` takes it), other than those named in
        ``kept``, is released or expired by the store's clock once they are renewed: a row
        :meth:`forget` would delete. A store may answer both in one round trip; the leader
        then lists the member rows only when one is to be forgotten, and names in ``kept``
        those it chose to keep (a replaced leader's), which would otherwise have it list them
        at every renewal."""
        ...

    def release(self, grant: LeaseGrant) -> bool:
        """Give the lease up so a standby can take it at once (with token + 1).

        Only releases if ``grant`` is still the current holder and token; returns whether it
        did. Wakes waiting standbys where the store can (NOTIFY on PostgreSQL).
        """
        ...

    def inspect(self, name: str) -> LeaseInfo | None:
        """The lease row as it stands, with the store's clock; ``None`` if never taken."""
        ...

    def list_leases(self, prefix: str) -> list[LeaseInfo]:
        """Every lease row whose name starts with ``prefix`` (taken literally: ``%`` and ``_``
        are no wildcards), by name, each with the store's clock, in one read. A sharded
        replica reads its sharding's shard and member rows with it (core.rules.shards)."""
        ...

    def forget(self, name: str) -> bool:
        """Delete lease row ``name`` if it is released or expired by the store's clock, never
        a live one; returns whether it did. The leader of shard 0 forgets the member rows of
        replicas gone (core.rules.shards), so that they do not pile up."""
        ...
