"""Who leads: the lease rows the replicas take, read with the database's clock. Nothing here
takes, renews or releases a lease: only beat does."""

from __future__ import annotations

from typing import cast

from goatbeat_celery.api.arguments import _lookup_problems
from goatbeat_celery.api.base import SchedulesBase
from goatbeat_celery.core.protocols import LeaseManager
from goatbeat_celery.core.rules.shards import Shard, shard_lease_name, shard_of, sharding_prefix
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.lease import LeaseInfo
from goatbeat_celery.core.types.spec import quoted_name


class LeaseReads(SchedulesBase):
    """Reads of the lease rows (the store opened from an app's settings is a lease manager
    too)."""

    def lease_name(self, schedule: str | None = None) -> str:
        """The name of the lease whose holder leads ``schedule`` (its shard's lease, under
        ``goatbeat_shards``), or without one, shard 0's: its leader does the global work.
        With one shard both are ``goatbeat_lease_name``. Reads nothing."""
        settings = self.config.settings
        if schedule is None:
            return shard_lease_name(settings.lease_name, Shard(0, settings.shards))
        problems = _lookup_problems(schedule)
        if problems:
            raise ConfigurationError(problems, subject=f"schedule {quoted_name(schedule)}")
        return shard_lease_name(settings.lease_name, shard_of(schedule, settings.shards))

    def lease(self, schedule: str | None = None) -> LeaseInfo | None:
        """The row of :meth:`lease_name` as it stands, with the database's clock
        (``LeaseInfo.held`` says whether a replica leads now); None when no replica ever took
        it."""
        return self._leases().inspect(self.lease_name(schedule))

    def leases(self) -> list[LeaseInfo]:
        """Every lease row of this app's lease name but its own, by name, in one read: under
        ``goatbeat_shards`` the shards' rows, and each replica's member row (from which
        :func:`goatbeat_celery.display.standby_replicas` tells the standbys). With one shard,
        :meth:`lease` is the leader's row."""
        return self._leases().list_leases(sharding_prefix(self.config.settings.lease_name))

    def _leases(self) -> LeaseManager:
        # open_store returns one object that is both the schedule store and the lease manager.
        return cast(LeaseManager, self.store)
