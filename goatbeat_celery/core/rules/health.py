"""A replica's health, judged from the lease rows alone (what ``goatbeat health`` says).

Every replica heartbeats a member row each renew interval, leader or standby
(:func:`~goatbeat_celery.core.rules.shards.member_lease_name`), and a leader renews its lease
row(s) right after. So the rows, read with the database clock, say of a replica:

* **leading** — it holds a lease row that has not expired;
* **standby** — its member row is live and it holds no lease;
* **lease lost** — it believed it led, and no longer does by the database: it is the holder
  of record of a lease row that expired unrenewed, or the lease row names it as the previous
  holder and another replica holds it now, and it has not been heard from since (its member
  row not renewed after the change, or gone: the new leader keeps the member row of its
  lease's previous holder, so a clean stop, whose member row is released, is told apart);
* **not running** — nothing of the above: no row names it, it stopped cleanly (its rows
  released), or it went silent as a standby.

One verdict comes before the rows: **cannot lead**, when the role it connects as lacks a
privilege beat needs. It may even hold the lease, and still never dispatch, and no retry
fixes that.

On a host that ran several replicas one after the other (a restarted container keeps its host
name), the one whose member row was renewed last is judged: the one running now.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum

from goatbeat_celery.core.rules.shards import Shard, shard_lease_name
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.lease import LeaseInfo

NEVER = datetime.min.replace(tzinfo=UTC)


class Health(Enum):
    LEADING = "leading"
    STANDBY = "standby"
    LEASE_LOST = "lease lost"
    NOT_RUNNING = "not running"
    CANNOT_LEAD = "cannot lead"


@dataclass(frozen=True, kw_only=True)
class ReplicaHealth:
    """The verdict on one replica: its state, which holder was judged, and why."""

    health: Health
    holder: str | None
    reason: str
    #: The lease rows it holds (leading), or the one it lost.
    leases: tuple[str, ...] = ()


def member_prefix(lease_name: str, shards: int) -> str:
    """What the member rows of a sharding into ``shards`` are named with, before the holder."""
    return f"{lease_name}.replicas-of-{shards}."


def matches(holder: str, wanted: str) -> bool:
    """Whether ``holder`` (``host:pid:suffix``) is ``wanted`` or starts with ``wanted:``: a
    host name selects its replicas, ``host:pid`` one process."""
    return holder == wanted or holder.startswith(wanted + ":")


def judge(rows: Sequence[LeaseInfo], *, wanted: str, lease_name: str, shards: int,
          ttl: timedelta) -> ReplicaHealth:
    """The health of the replica ``wanted`` names (:func:`matches`) from the lease ``rows``
    (its sharding's rows and the lease row(s), each with the database clock)."""
    names = {shard_lease_name(lease_name, Shard(k, shards)) for k in range(shards)}
    leases = sorted((row for row in rows if row.name in names), key=lambda row: row.name)
    prefix = member_prefix(lease_name, shards)
    members = {row.name[len(prefix):]: row for row in rows if row.name.startswith(prefix)
               and matches(row.name[len(prefix):], wanted)}
    holders = set(members) | {row.holder for row in leases
                              if row.holder is not None and matches(row.holder, wanted)} | {
        row.previous_holder for row in leases if row.held and row.previous_holder is not None
        and matches(row.previous_holder, wanted)}
    if not holders:
        return ReplicaHealth(health=Health.NOT_RUNNING, holder=None,
                             reason=f"no replica of {wanted!r} has run against this database "
                                    "(or its rows were forgotten after it stopped)")

    def freshness(holder: str) -> datetime:
        row = members.get(holder)
        seen = None if row is None else row.last_renewal(ttl) or row.changed_at
        held = [r.last_renewal(ttl) for r in leases if r.holder == holder]
        instants = [when for when in (seen, *held) if when is not None]
        return max(instants, default=NEVER)

    holder = max(sorted(holders), key=freshness)
    member = members.get(holder)
    held = [row for row in leases if row.holder == holder and row.held]
    if held:
        return ReplicaHealth(health=Health.LEADING, holder=holder,
                             reason=f"holds {', '.join(row.name for row in held)}",
                             leases=tuple(row.name for row in held))
    expired = [row for row in leases if row.holder == holder]
    if expired:
        row = expired[0]
        return ReplicaHealth(
            health=Health.LEASE_LOST, holder=holder, leases=(row.name,),
            reason=f"its lease {row.name} expired at {_iso(row.expires_at)} without renewal "
                   f"(database clock {_iso(row.store_now)})")
    last = None if member is None else member.last_renewal(ttl)
    if member is None or member.holder == holder:
        # Not heard from since another replica took its lease: it died or froze leading
        # (whether or not its member row is still live: a crash is seen before it expires).
        for row in leases:
            if row.previous_holder == holder and row.held and row.changed_at is not None \
                    and (last is None or last <= row.changed_at):
                heard = "" if last is None else f" (last heard from {_iso(last)})"
                return ReplicaHealth(
                    health=Health.LEASE_LOST, holder=holder, leases=(row.name,),
                    reason=f"its lease {row.name} was taken by {row.holder}, who holds it "
                           f"since {_iso(row.changed_at)}{heard}")
    if member is not None and member.held:
        return ReplicaHealth(health=Health.STANDBY, holder=holder,
                             reason="live, leading nothing")
    if member is not None and member.holder == holder:
        return ReplicaHealth(health=Health.NOT_RUNNING, holder=holder,
                             reason=f"not heard from since {_iso(last)}")
    return ReplicaHealth(health=Health.NOT_RUNNING, holder=holder,
                         reason="stopped (its rows released)")


def _iso(instant: datetime | None) -> str:
    return "never" if instant is None else instant.isoformat(timespec="seconds").replace(
        "+00:00", "Z")
