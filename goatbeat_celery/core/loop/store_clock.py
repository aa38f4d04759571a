"""The store's clock as the loop last read it, moved on by the local monotonic time since."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta


class StoreClock:
    """The last instant read from the store and the monotonic time it was read at.

    Contract: :meth:`now` is None until :meth:`read` is first called; after, it is the last
    instant read plus the local time elapsed since (a resubmission's record needs the store's
    "now", not its old claimed_at). :meth:`spent_since` is that elapsed time when ``instant``
    is the last one read, else 0.0.
    """

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self._mono = monotonic
        self.last_read: tuple[datetime, float] | None = None

    def read(self, instant: datetime) -> datetime:
        """Record ``instant`` as the store's clock now; returns it."""
        self.last_read = (instant, self._mono())
        return instant

    def now(self) -> datetime | None:
        if self.last_read is None:
            return None
        instant, at = self.last_read
        return instant + timedelta(seconds=self._mono() - at)

    def spent_since(self, instant: datetime) -> float:
        """Local seconds gone since ``instant`` was read, if it is the last instant read."""
        if self.last_read is None or self.last_read[0] != instant:
            return 0.0
        return self._mono() - self.last_read[1]
