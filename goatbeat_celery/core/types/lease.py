"""Leases: a grant that proves holding one, and a lease row's state as status displays show it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True, kw_only=True)
class LeaseGrant:
    """Proof of holding a lease, as granted by the store.

    ``token`` is the fencing token; ``expires_at`` is judged by the store's clock only.
    ``changed_holder`` is true when this grant took the lease over (a new token).
    """

    name: str
    holder: str
    token: int
    expires_at: datetime
    changed_holder: bool = False


@dataclass(frozen=True, kw_only=True)
class LeaseInfo:
    """The current state of a lease row, for status displays."""

    name: str
    holder: str | None
    token: int
    acquired_at: datetime | None
    expires_at: datetime | None
    store_now: datetime
    #: Who held the lease before the current (or, released, the last) holder, and until when
    #: by the store's clock (its release, or the expiry its successor found); None: no one yet.
    previous_holder: str | None = None
    changed_at: datetime | None = None
    #: The store knows the holder's session ended (core.rules.fence.grant_lease): the lease
    #: is free to take though its expiry is ahead, and its holder is not running.
    session_gone: bool = False

    @property
    def held(self) -> bool:
        return not self.session_gone and lease_live(self.holder, self.expires_at,
                                                    self.store_now)

    def last_renewal(self, ttl: timedelta) -> datetime | None:
        """When the holder last took or renewed the lease: each sets the expiry ``ttl`` ahead
        of the store's clock (None when no one holds it)."""
        if self.holder is None or self.expires_at is None:
            return None
        # A holder configured with a longer ttl than ``ttl`` would seem to renew in the
        # future: it renewed at the latest now.
        return min(self.expires_at - ttl, self.store_now)

    def silent(self, ttl: timedelta, renew_interval: timedelta) -> bool:
        """Whether the holder missed its renewal: none for half a renew interval past when it
        was due (a renewal is a round trip, and a busy leader a little late). A silent holder
        may be dead or frozen; the lease then passes to a standby when it expires."""
        renewed = self.last_renewal(ttl)
        return (self.held and renewed is not None
                and self.store_now - renewed > renew_interval * 1.5)


def lease_live(holder: str | None, expires_at: datetime | None, now: datetime) -> bool:
    """Whether a lease row with ``holder`` and ``expires_at`` is held at store-time ``now``:
    someone holds it and its expiry is still ahead. A lease that is not live may be taken by
    anyone, or forgotten."""
    return holder is not None and expires_at is not None and expires_at > now
