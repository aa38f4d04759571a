"""This replica's hold on the lease: acquire and renew it, trust it until the local deadline,
lose it or release it.

A grant is trusted for ``lease_ttl - lease_renew_interval`` after it was asked for, by the
replica's own monotonic clock (its *local deadline*): past it, the lease may have run out on the
store's clock and another replica may lead.

Holding the lease is not yet leading: a replica that takes the lease first syncs its config
schedules under it, and dispatches only once that worked. Until then it is *config pending*: it
keeps renewing the lease (so no other replica takes over a healthy holder) and syncs again after
each renewal. Observers hear of an acquisition once, when the lease is taken, and of a loss once,
when it is lost or released; a failed sync is neither.

With several shards (core.rules.shards), :class:`ShardLeadership` holds one :class:`Leadership` per
shard and decides which shards this replica asks for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence

from goatbeat_celery.core.loop.observer import EngineObserver
from goatbeat_celery.core.loop.store_errors import report_store_error
from goatbeat_celery.core.protocols import LeaseManager
from goatbeat_celery.core.rules.shards import (
    Shard,
    ShardingView,
    forgettable,
    is_member_name,
    member_lease_name,
    members_prefix,
    other_leases_problem,
    quota,
    shard_lease_name,
    sharding_prefix,
)
from goatbeat_celery.core.types.errors import GoatbeatError, StoreError, StoreUnavailable
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.settings import Settings

logger = logging.getLogger(__name__)

#: After a store error, try again this soon (bounded by the renew interval).
STORE_RETRY = 1.0
#: A standby asks for an expiring lease this long after its expiry on the store clock.
EXPIRY_MARGIN = 0.01


class Leadership:
    """Whether this replica holds the lease and may lead, and when to ask for it next."""

    def __init__(self, *, lease: LeaseManager, settings: Settings, holder: str,
                 observer: EngineObserver, monotonic: Callable[[], float],
                 name: str | None = None, member: str | None = None) -> None:
        self.lease = lease
        #: The member row this replica heartbeats before each attempt, leader or standby, so
        #: that status displays can list the standbys (core.rules.shards); None: not here (a
        #: shard's leadership, whose ShardLeadership heartbeats it).
        self.member = member
        self._member: LeaseGrant | None = None
        #: The lease row: ``settings.lease_name``, or a shard's (core.rules.shards).
        self.name = settings.lease_name if name is None else name
        self.settings = settings
        self.holder = holder
        self.observer = observer
        self._mono = monotonic
        #: The grant this replica holds, or None.
        self.grant: LeaseGrant | None = None
        #: Holding the lease, but its config schedules not synced under it yet: no dispatching.
        self.config_pending = False
        #: Monotonic instants: when the grant stops being trusted, and when to ask again.
        self.deadline = 0.0
        self.next_renew = 0.0
        #: The member rows run out that the last forgetting kept (core.rules.shards.forgettable:
        #: the lease's previous holder's, which health reads), under the grant held.
        self._kept: tuple[str, ...] = ()

    def holds(self) -> bool:
        """True while holding a grant and inside the local deadline."""
        return self.grant is not None and self._mono() < self.deadline

    def leads(self) -> bool:
        """True while holding the lease with the config synced under it: dispatching is safe."""
        return not self.config_pending and self.holds()

    def renew_due(self) -> bool:
        return self._mono() >= self.next_renew

    def time_left(self) -> float:
        """Seconds until the local deadline (negative past it)."""
        return self.deadline - self._mono()

    def renew(self) -> LeaseGrant | None:
        """Ask for the lease, a renewal when it is held. Returns the grant when the config must
        be synced under it now (just taken, or still pending), else None."""
        settings = self.settings
        renew_interval = settings.lease_renew_interval.total_seconds()
        asked = self._mono()
        stale = False
        try:
            if self.member is None:
                grant = self.lease.acquire(self.name, self.holder, settings.lease_ttl)
            elif self.grant is None:
                # The member row first, in the same call: an idle leader's renewal is one
                # round trip where the store can.
                self._member, grant = self.lease.acquire_many(
                    [self.member, self.name], self.holder, settings.lease_ttl)
            else:
                # The leader's renewal also says whether a replica's member row is to be
                # forgotten: the rows are listed only then.
                (self._member, grant), stale = self.lease.acquire_watching(
                    [self.member, self.name], self.holder, settings.lease_ttl,
                    members_prefix(settings.lease_name), self._kept)
        except StoreError as exc:
            # StoreUnavailable is an outage; any other StoreError (say a missing GRANT) is not.
            what = "unreachable" if isinstance(exc, StoreUnavailable) else "refused"
            report_store_error(logger, "lease %r: store %s: %s", self.name, what, exc,
                               exc=exc, action="lease_error")
            self.next_renew = asked + min(STORE_RETRY, renew_interval)
            if self.grant is not None and asked >= self.deadline:
                self.lose(f"store {what} past the local deadline")
            return None
        self.next_renew = asked + renew_interval
        if grant is None:
            if self.grant is not None:
                self.lose("taken by another replica")
            self._ask_again_at_expiry()
            return None
        took_over = self.grant is None or grant.changed_holder
        if took_over:
            self._kept = ()  # whose member rows are kept depends on whom the lease came from
        self.grant = grant
        self.deadline = asked + settings.local_validity.total_seconds()
        if stale:
            self._forget_gone()
        if took_over and self._refused_beside_another(grant):
            return None
        if took_over:
            logger.info("acquired lease %r with token %d", grant.name, grant.token,
                        extra={"action": "lease_acquired"})
            self.observer.lease_acquired(grant)
            self.config_pending = True
        return grant if self.config_pending else None

    def _refused_beside_another(self, grant: LeaseGrant) -> bool:
        """Whether a replica of another lease name is live on the same database, checked when
        this one takes its lease: then it gives the lease back and does not lead, saying why at
        each attempt, as two leaders would each send what the database schedules. (Checked
        only then, an idle leader's renewal stays one statement.)"""
        try:
            problem = other_leases_problem(self.lease.list_leases(""), self.settings.lease_name)
        except StoreError as exc:
            report_store_error(logger, "could not list leases: %s", exc, exc=exc,
                               action="lease_error")
            problem = None
        if problem is None:
            return False
        logger.error("not leading under lease %r: %s", self.name, problem,
                     extra={"action": "other_lease_live"})
        self.grant = None
        try:
            self.lease.release(grant)
        except GoatbeatError as exc:
            logger.warning("could not release lease %r: %s", grant.name, exc,
                           extra={"action": "lease_release_failed"})
        return True

    def config_synced(self) -> None:
        """The config is synced under the grant held: this replica leads."""
        self.config_pending = False

    def ask_soon(self) -> None:
        """A store notification woke the loop; it may be a release: a standby asks for the lease
        now rather than at its next renewal slot (up to ``lease_renew_interval`` away)."""
        if self.grant is None:
            self.next_renew = min(self.next_renew, self._mono())

    def lose(self, reason: str) -> None:
        """Stop trusting the grant (refused, taken, or past the local deadline); ask again now."""
        grant, self.grant = self.grant, None
        self.config_pending = False
        self.next_renew = self._mono()
        if grant is not None:
            logger.warning("lost lease %r (token %d): %s", grant.name, grant.token, reason,
                           extra={"action": "lease_lost"})
            self.observer.lease_lost(grant.name, self.holder, reason)

    def release(self) -> None:
        """Give the lease back, so that a standby takes over at once (and the member row, so
        that this replica is no longer shown standing by)."""
        member, self._member = self._member, None
        if member is not None:
            _release_member(self.lease, member)
        grant, self.grant = self.grant, None
        self.config_pending = False
        if grant is None:
            return
        try:
            released = self.lease.release(grant)
        except GoatbeatError as exc:
            logger.warning("could not release lease %r: %s", grant.name, exc,
                           extra={"action": "lease_release_failed"})
            return
        if released:
            logger.info("released lease %r (token %d)", grant.name, grant.token,
                        extra={"action": "lease_released"})
            self.observer.lease_lost(grant.name, self.holder, "released")

    def _forget_gone(self) -> None:
        """The leader deletes the member rows of replicas gone (of any shard count), as shard
        0's leader does with several shards: a crashed replica's row would stay, and each
        process has its own."""
        try:
            rows = self.lease.list_leases(members_prefix(self.settings.lease_name))
            held = self.lease.inspect(self.name)
        except StoreError as exc:
            logger.warning("could not list leases %r: %s", self.settings.lease_name, exc,
                           extra={"action": "lease_error"})
            return
        gone = [row.name for row in rows if not row.held]
        forgotten = forgettable(gone, [None if held is None else held.previous_holder])
        _forget(self.lease, forgotten)
        # Named at the next renewals, which then say only whether another row is to go.
        self._kept = tuple(name for name in gone if name not in forgotten)

    def _ask_again_at_expiry(self) -> None:
        """Refused: ask again when the holder's lease runs out, if that comes before the next
        renewal slot. A crashed leader is then replaced as its lease expires, not up to a
        renew interval later."""
        try:
            info = self.lease.inspect(self.name)
        except StoreError:
            return  # the regular slot will do
        if info is None or info.expires_at is None:
            return
        left = (info.expires_at - info.store_now).total_seconds() + EXPIRY_MARGIN
        self.next_renew = min(self.next_renew, self._mono() + max(0.0, left))


class ShardLeadership:
    """Which shards this replica leads, and when to look at the sharding again."""

    def __init__(self, *, lease: LeaseManager, settings: Settings, holder: str,
                 observer: EngineObserver, monotonic: Callable[[], float]) -> None:
        self.lease = lease
        self.settings = settings
        self.holder = holder
        self._mono = monotonic
        count = settings.shards
        self.shards = tuple(Shard(k, count) for k in range(count))
        self.leaderships = {
            shard.index: Leadership(lease=lease, settings=settings, holder=holder,
                                    observer=observer, monotonic=monotonic,
                                    name=shard_lease_name(settings.lease_name, shard))
            for shard in self.shards}
        self.member_name = member_lease_name(settings.lease_name, count, holder)
        self._member: LeaseGrant | None = None
        #: Monotonic instant of the next heartbeat and renewal of the shards held.
        self._next_heartbeat = 0.0
        #: Monotonic instant of the next look at the sharding.
        self.next_check = 0.0
        #: Replicas whose session the store saw end (ShardingView.crashed).
        self._crashed: frozenset[str] = frozenset()

    def renew_due(self) -> bool:
        return self._mono() >= self.next_check

    def ask_soon(self) -> None:
        """A notification woke the loop (maybe a release): look at the sharding now."""
        self.next_check = min(self.next_check, self._mono())

    def leading(self) -> Iterator[tuple[Shard, Leadership]]:
        """The shards this replica may dispatch now, in shard order."""
        for shard in self.shards:
            leadership = self.leaderships[shard.index]
            if leadership.leads():
                yield shard, leadership

    def leads_any(self) -> bool:
        return any(True for _ in self.leading())

    def held(self) -> list[int]:
        return [k for k, leadership in self.leaderships.items() if leadership.grant is not None]

    def renew(self) -> list[Leadership]:
        """Look at the sharding: every renew interval, heartbeat and renew the shards held
        first; always give back those above the quota and take free ones up to it. Returns
        the leaderships whose config must be synced now (shard 0's, just taken): the others
        lead at once."""
        settings = self.settings
        renew_interval = settings.lease_renew_interval.total_seconds()
        asked = self._mono()
        # An earlier look (a notification, another replica's row running out) only reads:
        # renewals keep their cadence, and a wake-up costs one query.
        full = asked >= self._next_heartbeat
        try:
            if full:
                # The member row first: it never outlives the shards renewed after it.
                self._member = self.lease.acquire(self.member_name, self.holder,
                                                  settings.lease_ttl)
            rows = self.lease.list_leases(sharding_prefix(settings.lease_name))
        except StoreError as exc:
            what = "unreachable" if isinstance(exc, StoreUnavailable) else "refused"
            report_store_error(logger, "shards of lease %r: store %s: %s",
                               settings.lease_name, what, exc, exc=exc, action="lease_error")
            self.next_check = asked + min(STORE_RETRY, renew_interval)
            for leadership in self.leaderships.values():
                if leadership.grant is not None and asked >= leadership.deadline:
                    leadership.lose(f"store {what} past the local deadline")
            return []
        if full:
            self._next_heartbeat = asked + renew_interval
        view = ShardingView.read(rows, lease_name=settings.lease_name,
                                 count=len(self.shards), holder=self.holder,
                                 crashed=self._crashed)
        self._crashed = view.crashed
        share = quota(view.members, self.holder, len(self.shards))
        unsynced: list[Leadership] = []
        held = self.held()
        if full:
            held = [index for index in held if self._renew(index, unsynced) is not None]
        # Above the quota: the highest shards go back, for a newcomer (or one under its quota).
        for index in sorted(held, reverse=True)[:max(0, len(held) - share)]:
            self.leaderships[index].release()
            held.remove(index)
        free = [shard.index for shard in self.shards
                if shard.index not in view.holders and shard.index not in held]
        for index in free:
            if len(held) >= share:
                break
            if self._renew(index, unsynced) is not None:
                held.append(index)
        if self.leaderships[0].grant is not None:
            # Read before this look's takeovers: a shard's holder of record may have just
            # become its previous holder.
            self._forget(forgettable(view.gone, [
                holder for row in rows if not is_member_name(row.name)
                for holder in (row.holder, row.previous_holder)]))
        self.next_check = self._next_heartbeat
        if view.next_expiry is not None:
            # Another replica's row running out may free a shard or change the quotas.
            self.next_check = min(self.next_check,
                                  self._mono() + max(0.0, view.next_expiry) + EXPIRY_MARGIN)
        return unsynced

    def _forget(self, gone: Sequence[str]) -> None:
        """Shard 0's leader deletes the member rows of replicas gone (crashed, or stopped
        under another shard count): a clean stop releases its row, a crash leaves it."""
        _forget(self.lease, gone)

    def _renew(self, index: int, unsynced: list[Leadership]) -> LeaseGrant | None:
        leadership = self.leaderships[index]
        grant = leadership.renew()
        if leadership.grant is None:
            return None
        if grant is not None:  # just taken: only shard 0 syncs the config
            if self.shards[index].does_global_work:
                unsynced.append(leadership)
            else:
                leadership.config_synced()
        return leadership.grant

    def release(self) -> None:
        """Give back the member row, then every shard, so the others take over at once: each
        release wakes them, and by the first shard's they count this replica gone."""
        member, self._member = self._member, None
        if member is not None:
            _release_member(self.lease, member)
        for leadership in self.leaderships.values():
            leadership.release()


def _forget(lease: LeaseManager, gone: Sequence[str]) -> None:
    """Delete the member rows named ``gone`` (the store deletes none that is live)."""
    for name in gone:
        try:
            lease.forget(name)
        except StoreError as exc:
            logger.warning("could not forget lease %r: %s", name, exc,
                           extra={"action": "lease_forget_failed"})
            return


def _release_member(lease: LeaseManager, member: LeaseGrant) -> None:
    try:
        lease.release(member)
    except GoatbeatError as exc:
        logger.warning("could not release lease %r: %s", member.name, exc,
                       extra={"action": "lease_release_failed"})


__all__ = ["EXPIRY_MARGIN", "STORE_RETRY", "Leadership", "ShardLeadership"]
