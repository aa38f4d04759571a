"""The fleet as ``status`` reads it: which replicas lead a shard and which stand by, derived from
the sharding's lease rows (each shard's lease, and the member rows every replica heartbeats).

A replica leads while it holds a live shard lease (with one shard, the lease itself); it stands
by while its member row is live and it leads nothing. The engine's own reading of the same rows
(quotas, takeovers) is :class:`~goatbeat_celery.core.rules.shards.ShardingView`; this module only
names who is who, for the faces to show.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from goatbeat_celery.core.rules.shards import (
    Replica,
    Shard,
    ShardingView,
    shard_lease_name,
    standbys,
)
from goatbeat_celery.core.types.lease import LeaseInfo


def shard_leases(rows: Sequence[LeaseInfo], *, lease_name: str,
                 count: int) -> list[tuple[int, str, LeaseInfo | None]]:
    """Each of the ``count`` shards in order: its number, its lease row's name, and that row
    among ``rows`` (None: no row yet)."""
    by_name = {row.name: row for row in rows}
    names = [shard_lease_name(lease_name, Shard(k, count)) for k in range(count)]
    return [(k, name, by_name.get(name)) for k, name in enumerate(names)]


def shard_holders(rows: Sequence[LeaseInfo], *, lease_name: str,
                  count: int) -> list[tuple[int, LeaseInfo | None]]:
    """Each shard's number and its lease row while held (None: not held, or no row)."""
    return [(k, info if info is not None and info.held and info.expires_at is not None
             else None) for k, _name, info in shard_leases(rows, lease_name=lease_name,
                                                             count=count)]


def leaders(rows: Sequence[LeaseInfo], *, lease_name: str, count: int) -> frozenset[str]:
    """The holders of a live shard lease among ``rows``: the replicas leading now. Rows of
    other names (member rows, another sharding's shards) lead nothing."""
    names = {shard_lease_name(lease_name, Shard(k, count)) for k in range(count)}
    return frozenset(row.holder for row in rows
                     if row.name in names and row.held and row.holder is not None)


def members(rows: Sequence[LeaseInfo], *, lease_name: str, count: int) -> tuple[str, ...]:
    """The live replicas sharing the ``count`` shards (their member rows live), by holder."""
    return ShardingView.read(rows, lease_name=lease_name, count=count, holder="").members


def standing_by(rows: Sequence[LeaseInfo], *, lease_name: str, count: int, ttl: timedelta,
                lease: LeaseInfo | None = None) -> list[Replica]:
    """The live replicas leading nothing, by holder, with when each was last seen: their member
    rows among ``rows`` live within ``ttl``, their holders no shard's live leaseholder. The
    shard leases are read from ``rows`` and from ``lease``, a shard's lease row read on its
    own (with one shard, the lease; with several, ``rows`` holds the shards')."""
    leases = [*rows, *(() if lease is None else (lease,))]
    return standbys(rows, lease_name=lease_name, count=count, ttl=ttl,
                    leaders=leaders(leases, lease_name=lease_name, count=count))


__all__ = ["leaders", "members", "shard_holders", "shard_leases", "standing_by"]
