"""Shards: the schedules split into a fixed number of parts, each led under its own lease.

A schedule's shard is ``crc32(name) % shards`` (:func:`shard_hash`, stored with the schedule so
the due query filters on it). Shard ``k`` of ``n`` is fenced by the lease row
:func:`shard_lease_name`; with one shard that is ``lease_name`` itself, and nothing else
changes: the engine then keeps its single :class:`~goatbeat_celery.core.loop.leadership.Leadership`.

Every replica heartbeats a member row, whatever the shard count: with one shard, only so that
``status`` can show the standbys (:func:`standbys`), its lease's leader forgetting those gone.
With several shards, every replica heartbeats a *member* row in the lease table
(:func:`member_lease_name`, taken by :class:`~goatbeat_celery.core.loop.leadership.ShardLeadership`
with the same ``acquire`` and ttl as a shard, renewed just before its shards, so it never
outlives them) and reads every row of the sharding in one query, each renew interval and
whenever a notification or another replica's row running out may have changed it. The live
members, sorted by holder, each get a quota (:func:`quota`: ``shards //
members``, one more for the first ``shards % members``), summing to the shard count. A replica
renews the shards it holds, releases those above its quota (a newcomer then finds them free),
and takes free ones (released or expired) up to its quota. A replica that dies stops
heartbeating: its member row and its shards expire together, and the others look again at that
instant; one that stops cleanly releases both and the others hear of it at once.

Global work (config sync, settling runs, lost runs, pruning, the executions and backfills of
a schedule since deleted) is done by the leader of shard 0 only, under shard 0's lease; a
backfill is drained by its schedule's shard's leader, which alone resends that shard's claims.
"""

from __future__ import annotations

import zlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from goatbeat_celery.core.types.lease import LeaseInfo


def shard_hash(name: str) -> int:
    """The stable hash a schedule's shard is taken from (stored as ``shard_hash``)."""
    return zlib.crc32(name.encode("utf-8"))


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard ``index`` of ``count``."""

    index: int
    count: int

    def holds(self, name: str) -> bool:
        """Whether schedule ``name`` belongs to this shard."""
        return shard_hash(name) % self.count == self.index

    @property
    def does_global_work(self) -> bool:
        """Shard 0's leader does the work that must happen once across the deployment."""
        return self.index == 0


def shard_of(name: str, count: int) -> Shard:
    """The shard of ``count`` that schedule ``name`` belongs to."""
    return Shard(shard_hash(name) % count, count)


def shard_lease_name(lease_name: str, shard: Shard) -> str:
    """The lease row fencing ``shard``: ``lease_name`` itself when there is one shard."""
    if shard.count == 1:
        return lease_name
    return f"{lease_name}.shard-{shard.index}-of-{shard.count}"


def sharding_prefix(lease_name: str) -> str:
    """What every lease row of a sharded deployment's name starts with."""
    return f"{lease_name}."


def other_leases(rows: Sequence[LeaseInfo], lease_name: str) -> list[LeaseInfo]:
    """The live rows among ``rows`` that belong to another lease name: neither ``lease_name``
    nor a row of its sharding (its shards and member rows)."""
    own = sharding_prefix(lease_name)
    return [row for row in rows
            if row.held and row.name != lease_name and not row.name.startswith(own)]


def other_leases_problem(rows: Sequence[LeaseInfo], lease_name: str) -> str | None:
    """What is wrong when replicas of another lease name are live on the same database
    (:func:`other_leases`), and how to fix it; None when there are none."""
    others = other_leases(rows, lease_name)
    if not others:
        return None
    shown = ", ".join(f"{row.name!r} (held by {row.holder})" for row in others[:5])
    more = f" and {len(others) - 5} more" if len(others) > 5 else ""
    return (f"lease {lease_name!r} is not the only one live on this database: {shown}{more}. "
            "Two lease names make two leaders: each sends the schedules of the database, and "
            "each one's config sync undoes the other's entries. Give every replica of a "
            "deployment the same goatbeat_lease_name, or each deployment its own database")


def members_prefix(lease_name: str) -> str:
    """What the member rows of every shard count start with."""
    return f"{lease_name}.replicas-of-"


def member_lease_name(lease_name: str, count: int, holder: str) -> str:
    """The row a replica heartbeats to count as a member of the sharding into ``count``."""
    return f"{members_prefix(lease_name)}{count}.{holder}"


def is_member_name(name: str) -> bool:
    """Whether lease row ``name`` is a member row (:func:`member_lease_name`) of any lease."""
    _, found, rest = name.partition(".replicas-of-")
    return bool(found) and rest.split(".", 1)[0].isdigit()


def _is_member_row(name: str, lease_name: str) -> bool:
    prefix = members_prefix(lease_name)
    return name.startswith(prefix) and name[len(prefix):].split(".", 1)[0].isdigit()


def forgettable(gone: Sequence[str], previous_holders: Collection[str | None]) -> list[str]:
    """The member rows among ``gone`` a leader forgets: all but those of its leases' previous
    holders, which ``goatbeat health`` reads to tell a replaced leader (its member row silent)
    from one stopped cleanly (released). Each lease keeps one at most, until it changes hands
    again."""
    kept = tuple(f".{holder}" for holder in previous_holders if holder is not None)
    return [name for name in gone if not (kept and name.endswith(kept))]


def quota(members: Sequence[str], holder: str, count: int) -> int:
    """How many of ``count`` shards ``holder`` should lead among the live ``members``."""
    ordered = sorted(set(members) | {holder})
    place = ordered.index(holder)
    share, extra = divmod(count, len(ordered))
    return share + (1 if place < extra else 0)


@dataclass(frozen=True, slots=True)
class ShardingView:
    """The sharding's lease rows as read in one query: live members and shard holders."""

    members: tuple[str, ...]
    #: Member rows no longer live (any shard count's): replicas gone, to be forgotten.
    gone: tuple[str, ...]
    #: Shard index -> live holder (absent: free, released or expired).
    holders: dict[int, str]
    #: Store-clock seconds until the first live row of another replica expires (None: none).
    next_expiry: float | None
    #: Holders whose session the store saw end, their member rows still live by the clock:
    #: no members, though their rows say otherwise (remembered across looks, since the rows
    #: that showed it are taken over and then show the new holder).
    crashed: frozenset[str] = frozenset()

    @classmethod
    def read(cls, rows: Sequence[LeaseInfo], *, lease_name: str, count: int,
             holder: str, crashed: Collection[str] = ()) -> ShardingView:
        names = {shard_lease_name(lease_name, Shard(k, count)): k for k in range(count)}
        member_prefix = member_lease_name(lease_name, count, "")
        members: list[str] = []
        gone: list[str] = []
        holders: dict[int, str] = {}
        expiries: list[float] = []
        # A holder whose session is gone (a crash the store saw) is no member any more, though
        # its member row has not expired yet: its shards are shared out among the others now.
        dead = {row.holder for row in rows if row.session_gone and row.holder} | set(crashed)
        still: set[str] = set()
        for row in rows:
            if row.holder in dead and row.name.startswith(member_prefix):
                if row.held:
                    still.add(row.holder)
                continue
            if not row.held or row.holder is None or row.expires_at is None:
                if _is_member_row(row.name, lease_name):
                    gone.append(row.name)
                continue
            if row.name in names:
                holders[names[row.name]] = row.holder
            elif row.name.startswith(member_prefix):
                members.append(row.holder)
            else:
                continue
            if row.holder != holder:
                expiries.append((row.expires_at - row.store_now).total_seconds())
        return cls(members=tuple(sorted(set(members))), gone=tuple(gone), holders=holders,
                   next_expiry=min(expiries) if expiries else None, crashed=frozenset(still))


@dataclass(frozen=True, slots=True)
class Replica:
    """A replica heartbeating its member row, and when it last did by the store's clock."""

    holder: str
    seen_at: datetime


def standbys(rows: Sequence[LeaseInfo], *, lease_name: str, count: int, ttl: timedelta,
             leaders: Collection[str]) -> list[Replica]:
    """The live replicas of the sharding into ``count`` (their member row among ``rows`` seen
    within ``ttl``) leading nothing (not in ``leaders``), by holder. A heartbeat sets the row's
    expiry ``ttl`` ahead: when it was last seen is read back from it."""
    prefix = member_lease_name(lease_name, count, "")
    seen = {row.holder: row.last_renewal(ttl) for row in rows
            if row.name.startswith(prefix) and row.held and row.holder is not None}
    return [Replica(holder, at) for holder, at in sorted(seen.items())
            if at is not None and holder not in leaders]


__all__ = ["Replica", "Shard", "ShardingView", "shard_of", "forgettable", "is_member_name",
           "member_lease_name",
           "members_prefix",
           "standbys",
           "quota", "shard_hash", "shard_lease_name", "sharding_prefix"]
