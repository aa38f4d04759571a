"""``status`` and the dashboard's fleet panel: the lease and its holder's health, the
standbys, the shards and their holders, and the schedules set aside. Who leads and who stands
by is :mod:`goatbeat_celery.core.rules.fleet`'s to say; this module only shows it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from goatbeat_celery.core.rules import fleet
from goatbeat_celery.core.rules.shards import Replica
from goatbeat_celery.core.types.lease import LeaseInfo
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.display.layout import Value
from goatbeat_celery.display.scalars import (
    NONE,
    human_duration,
    human_seconds,
    iso,
    relative,
    seconds,
)

#: Most set-aside schedules ``status`` names.
SET_ASIDE_SHOWN = 10


def set_aside_json(schedules: Sequence[Schedule]) -> dict[str, Any]:
    """How many schedules are set aside, and the first :data:`SET_ASIDE_SHOWN` of them.

    ``status --json``'s ``set_aside``, a contract: ``count``, and ``schedules``, each
    ``{"name", "fault", "fault_at", "faults", "retry_at", "damage"}``."""
    return {"count": len(schedules), "schedules": [
        {"name": s.name, "fault": s.fault, "fault_at": iso(s.fault_at), "faults": s.faults,
         "retry_at": iso(s.next_run_at), "damage": [str(d) for d in s.damage]}
        for s in schedules[:SET_ASIDE_SHOWN]
    ]}


def set_aside_lines(schedules: Sequence[Schedule], list_command: str) -> Value:
    """The ``set aside`` value of ``status``: a count, then one ``name: reason`` line each."""
    if not schedules:
        return "none"
    noun = "schedule" if len(schedules) == 1 else "schedules"
    lines = [f"{len(schedules)} {noun}"]
    lines.extend(f"{s.name}: {s.fault or ', '.join(str(d) for d in s.damage)}"
                 for s in schedules[:SET_ASIDE_SHOWN])
    more = len(schedules) - SET_ASIDE_SHOWN
    if more > 0:
        lines.append(f"and {more} more: `{list_command} --set-aside` lists them all")
    return tuple(lines)


def lease_json(name: str, info: LeaseInfo | None,
               settings: Settings | None = None) -> dict[str, Any]:
    """The lease as stored; ``seconds_left`` is by the database clock (negative: expired).
    With ``settings``, also when the holder last renewed it, how long it has been silent
    since, and whether that is longer than its renewals allow (``holder_silent``).

    ``status --json``'s lease (and each shard's), a contract: ``name``, ``holder``, ``token``,
    ``acquired_at``, ``expires_at``, ``held``, ``seconds_left``, ``previous_holder`` and
    ``changed_at`` always (null, 0 and false for a lease with no row yet); with ``settings``,
    ``last_renewal_at``, ``silent_seconds``, ``holder_silent`` and ``renew_interval`` too."""
    found: dict[str, Any] = {
        "name": name, "holder": None, "token": 0, "acquired_at": None, "expires_at": None,
        "held": False, "seconds_left": None, "previous_holder": None, "changed_at": None}
    if info is not None:
        left = None if info.expires_at is None else (info.expires_at - info.store_now)
        found.update({"name": info.name, "holder": info.holder, "token": info.token,
                      "acquired_at": iso(info.acquired_at), "expires_at": iso(info.expires_at),
                      "held": info.held, "seconds_left": seconds(left),
                      "previous_holder": info.previous_holder,
                      "changed_at": iso(info.changed_at)})
    if settings is not None:
        renewed = None if info is None else info.last_renewal(settings.lease_ttl)
        found.update({
            "last_renewal_at": iso(renewed),
            "silent_seconds": (None if info is None or renewed is None
                               else seconds(info.store_now - renewed)),
            "holder_silent": info is not None and info.silent(settings.lease_ttl,
                                                              settings.lease_renew_interval),
            "renew_interval": seconds(settings.lease_renew_interval)})
    return found


def lease_health(info: LeaseInfo | None, settings: Settings) -> str:
    """``status``'s line on the holder: when it last renewed and, when it has gone silent,
    what happens next (the lease expires, then a standby takes over)."""
    renewed, rest = lease_health_parts(info, settings)
    if info is None or renewed is None:
        return rest
    return relative(renewed, info.store_now) + rest


def lease_health_parts(info: LeaseInfo | None,
                       settings: Settings) -> tuple[datetime | None, str]:
    """:func:`lease_health`'s line in two: the instant of the last renewal it opens with (None
    when it opens with none), for a face to show its own way, and the words after it."""
    renewed = None if info is None else info.last_renewal(settings.lease_ttl)
    if info is None or renewed is None:
        return None, NONE
    every = human_duration(settings.lease_renew_interval)
    if not info.held:
        return renewed, (": the holder stopped renewing and its lease expired; a standby "
                         "takes it at its next attempt")
    if info.silent(settings.lease_ttl, settings.lease_renew_interval):
        silence = human_seconds((info.store_now - renewed).total_seconds())
        left = human_seconds(((info.expires_at or info.store_now) - info.store_now)
                             .total_seconds())
        return None, (f"holder silent for {silence} (it renews every {every}): lease expires "
                      f"in {left}, then a standby takes over")
    return renewed, f"; the leader renews every {every}"


def previous_holder_line(info: LeaseInfo | None) -> str:
    """``status``'s line on who held the lease before: ``X until <instant>`` (its release, or
    the expiry its successor found)."""
    if info is None or info.previous_holder is None:
        return NONE
    return f"{info.previous_holder} until {relative(info.changed_at, info.store_now)}"


def standby_replicas(rows: Sequence[LeaseInfo], info: LeaseInfo | None,
                     settings: Settings) -> list[Replica]:
    """The live replicas leading nothing, from the sharding's lease ``rows`` (their member
    rows) and ``info``, the lease row of one shard (with several, rows holds the shards'):
    :func:`goatbeat_celery.core.rules.fleet.standing_by` under ``settings``."""
    return fleet.standing_by(rows, lease_name=settings.lease_name, count=settings.shards,
                             ttl=settings.lease_ttl, lease=info)


def _seen_ago(replica: Replica, now: datetime) -> float:
    # Whole seconds: a heartbeat's round trip makes the fraction noise.
    return float(round(max(0.0, (now - replica.seen_at).total_seconds())))


def standbys_json(replicas: Sequence[Replica], now: datetime) -> list[dict[str, Any]]:
    """``status --json``'s standbys: each live replica leading nothing, when it was last seen
    (by the database clock ``now``) and how long ago.

    A contract: each is ``{"holder", "seen_at", "seen_seconds_ago"}``, by holder, the seconds
    whole and never negative."""
    return [{"holder": replica.holder, "seen_at": iso(replica.seen_at),
             "seen_seconds_ago": _seen_ago(replica, now)} for replica in replicas]


def standbys_line(replicas: Sequence[Replica], now: datetime) -> str:
    """``status``'s standbys: ``host-a (seen 3s ago), host-b (seen 5s ago)``."""
    return ", ".join(f"{replica.holder} (seen {human_seconds(_seen_ago(replica, now))} ago)"
                     for replica in replicas) or NONE


def _members(rows: Sequence[LeaseInfo], settings: Settings) -> tuple[str, ...]:
    return fleet.members(rows, lease_name=settings.lease_name, count=settings.shards)


def shards_json(rows: Sequence[LeaseInfo], settings: Settings) -> dict[str, Any]:
    """``status --json``'s shards: each shard's lease, and the live replicas sharing them.

    A contract: ``shard_count``; ``shards``, one ``{"shard", "lease"}`` per shard in order,
    the lease as :func:`lease_json` without ``settings``; and ``replicas``, the live members'
    holders, sorted."""
    return {"shard_count": settings.shards,
            "shards": [{"shard": k, "lease": lease_json(name, info)}
                       for k, name, info in fleet.shard_leases(
                           rows, lease_name=settings.lease_name, count=settings.shards)],
            "replicas": list(_members(rows, settings))}


def shard_lines(rows: Sequence[LeaseInfo], settings: Settings) -> tuple[str, ...]:
    """``status``'s shards: one line each (holder, token, expiry), then the live replicas."""
    lines = []
    for k, info in shard_holders(rows, settings):
        if info is None or info.expires_at is None:
            lines.append(f"{k}: not held")
            continue
        lines.append(f"{k}: {info.holder}, token {info.token}, expires "
                     f"{relative(info.expires_at, info.store_now)}")
    lines.append(shard_members_line(rows, settings))
    return tuple(lines)


def shard_holders(rows: Sequence[LeaseInfo],
                  settings: Settings) -> list[tuple[int, LeaseInfo | None]]:
    """Each shard's number and its lease row while held (None: not held)."""
    return fleet.shard_holders(rows, lease_name=settings.lease_name, count=settings.shards)


def shard_members_line(rows: Sequence[LeaseInfo], settings: Settings) -> str:
    """``3 live replicas: a, b, c``: the replicas sharing the shards."""
    members = _members(rows, settings)
    return f"{len(members)} live replicas: {', '.join(members) or NONE}"
