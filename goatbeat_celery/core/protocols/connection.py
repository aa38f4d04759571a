"""The store's clock, the change notifications replicas wait for, and its connections."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol


class StoreConnection(Protocol):
    """The store's clock, :meth:`wait` and :meth:`notify`, :meth:`has_table` and
    :meth:`close`. Which writes wake :meth:`wait`, and what ``wakes_on_every_change``
    promises, :class:`~goatbeat_celery.core.protocols.ScheduleStore` says."""

    wakes_on_every_change: bool

    def now(self) -> datetime:
        """The store's clock: PostgreSQL's ``now()``, an injectable clock elsewhere."""
        ...

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for a change notification (a schedule edit, a manual
        run, a lease release). Returns true when woken by one. May return early spuriously."""
        ...

    def notify(self) -> None:
        """Wake every replica waiting in :meth:`wait` (best effort)."""
        ...

    def has_table(self, name: str) -> bool:
        """Whether the store's database holds a table ``name`` its user can see (another
        application's, say django-celery-beat's), found as a query naming it would find it.
        Asked on the store's own connections, without a new one or a write lock; the memory
        store holds none."""
        ...

    def close(self) -> None:
        """Release connections. Idempotent."""
        ...
