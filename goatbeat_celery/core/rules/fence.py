"""When a lease may be taken and when a fence holds, shared by every store.

A store reads its lease row (with its own clock, PostgreSQL's ``now()`` on the database) and
asks these functions; it only writes what :func:`grant_lease` decides and raises what
:func:`check_fence` raises, so no two stores can disagree about who leads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Generic, Protocol, TypeVar

from goatbeat_celery.core.rules.shards import is_member_name
from goatbeat_celery.core.types.errors import LeaseLost
from goatbeat_celery.core.types.lease import LeaseGrant, lease_live

Instant = TypeVar("Instant")

#: Counters compared for equality only (lease tokens, set-aside versions) start again at 1
#: past this, so a value written by hand at a column's limit cannot overflow it.
COUNTER_MAX = 2 ** 62


def next_counter(value: object) -> int:
    """``value`` + 1, or 1 for a value out of range (or not an integer, written by hand): a
    fresh token or version only has to differ from the one before."""
    if type(value) is int and 0 <= value < COUNTER_MAX:
        return value + 1
    return 1


class LeaseRow(Protocol):
    """What the fence reads of a stored lease row (a store's own row type, or
    :class:`~goatbeat_celery.core.types.lease.LeaseInfo`)."""

    @property
    def holder(self) -> str | None: ...  # None: released (or a placeholder row)

    @property
    def token(self) -> int: ...

    @property
    def expires_at(self) -> datetime | None: ...


class ClockedLeaseRow(LeaseRow, Protocol):
    """A lease row read with the store's clock beside it, as SQL stores read it."""

    @property
    def now(self) -> datetime: ...


class StoredLease(LeaseRow, Protocol):
    """What a grant reads of a stored lease row."""

    @property
    def acquired_at(self) -> datetime | None: ...

    @property
    def previous_holder(self) -> str | None: ...

    @property
    def changed_at(self) -> datetime | None: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class LeaseWrite:
    """What :func:`grant_lease` decided: the grant to return, and the row to write (holder,
    token and expiry as granted, ``acquired_at``, and who held the lease before and until
    when)."""

    grant: LeaseGrant
    acquired_at: datetime
    previous_holder: str | None = None
    changed_at: datetime | None = None


def grant_lease(name: str, holder: str, ttl: timedelta, *, row: StoredLease | None,
                now: datetime,
                session_gone: Callable[[StoredLease], bool] | None = None) -> LeaseWrite | None:
    """The grant ``holder`` gets on lease ``name`` at store-time ``now``, given the stored
    ``row`` (None: never taken), or ``None`` while another holder's lease is live and its
    holder's session is not known to be gone.

    The holder renewing keeps its token and ``acquired_at``; anyone taking an absent, released
    or expired lease gets the next token (the first grant token 1: a placeholder row written
    with token 0 gives the same) and ``changed_holder``.

    **A lease may be taken before its expiry when its holder's session is gone.** A crashed
    process's database session (or file lock) ends with it, and the store knows at once:
    ``session_gone`` is the store's evidence, asked only of a live row held by another, that
    the session which held ``row`` under its token has ended (:func:`session_watched`). The
    next token fences the old holder as an expiry would. What a closed session cannot show (a
    frozen process, a partition, a dead host) still waits for the expiry: the clock path.

    The previous holder: taking an expired lease records its holder, held until its expiry;
    taking one whose holder's session is gone records it held until now; a released lease
    already recorded its last holder when it was released (:func:`released_by`), and a
    renewal changes nothing, so both keep what the row holds.
    """
    gone = False
    if row is not None and row.holder == holder:
        token, changed = row.token, False
    elif row is None or not lease_live(row.holder, row.expires_at, now):
        token, changed = next_counter(0 if row is None else row.token), True
    elif session_gone is not None and session_gone(row):
        token, changed, gone = next_counter(row.token), True, True
    else:
        return None
    grant = LeaseGrant(name=name, holder=holder, token=token, expires_at=now + ttl,
                       changed_holder=changed)
    kept = None if row is None or changed else row.acquired_at
    previous, changed_at = (None, None) if row is None else (row.previous_holder,
                                                            row.changed_at)
    if changed and row is not None and row.holder is not None:
        previous, changed_at = row.holder, now if gone else row.expires_at or now
    return LeaseWrite(grant=grant, acquired_at=now if kept is None else kept,
                      previous_holder=previous, changed_at=changed_at)


def session_watched(name: str) -> bool:
    """Whether the store watches the session of lease ``name``'s holder (:func:`grant_lease`):
    every lease a standby waits for, not the member rows each replica heartbeats for itself
    (core.rules.shards), which no one else ever takes."""
    return not is_member_name(name)


@dataclass(frozen=True, slots=True)
class Released(Generic[Instant]):
    """What a release writes besides clearing the holder and expiry."""

    previous_holder: str
    changed_at: Instant


def released_by(holder: str, now: Instant) -> Released[Instant]:
    """A release by ``holder`` at store-time ``now`` (an instant, or the SQL store's clock
    expression) makes it the previous holder, held until then."""
    return Released(previous_holder=holder, changed_at=now)


def fence_holds(lease: LeaseGrant, row: LeaseRow | None, now: datetime) -> bool:
    """Whether ``lease`` is still the current, unexpired grant of the stored ``row`` (None:
    no row) at store-time ``now``."""
    return (row is not None and row.holder == lease.holder and row.token == lease.token
            and lease_live(row.holder, row.expires_at, now))


def check_fence(lease: LeaseGrant, row: LeaseRow | None, now: datetime) -> None:
    """Raise LeaseLost unless :func:`fence_holds`: a claim, a set-aside, a config sync or a
    take-over of pending executions made under a stale lease changes nothing."""
    if not fence_holds(lease, row, now):
        raise lease_lost(lease)


def fenced_clock(lease: LeaseGrant, row: ClockedLeaseRow | None) -> datetime:
    """The store's clock read with the lease ``row`` (None: no row, so no grant), once
    :func:`check_fence` holds at that clock."""
    if row is None:
        raise lease_lost(lease)
    check_fence(lease, row, row.now)
    return row.now


def lease_lost(lease: LeaseGrant) -> LeaseLost:
    """The one LeaseLost every store raises for a stale ``lease``."""
    return LeaseLost(f"lease {lease.name!r}: token {lease.token} is no longer current")


__all__ = ["COUNTER_MAX", "ClockedLeaseRow", "LeaseRow", "LeaseWrite", "Released", "StoredLease",
           "check_fence", "fence_holds", "fenced_clock", "grant_lease", "lease_lost",
           "next_counter", "released_by", "session_watched"]
