"""Run logs for the writer's tests: one that records what it is asked, and switches that make
it fail (an outage), refuse (a bad batch) or hang (a partition) on demand."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

from goatbeat_celery.core.protocols import RunLog
from goatbeat_celery.core.rules.runs import RunEvent, RunRecord
from goatbeat_celery.core.types.errors import StoreError, StoreUnavailable
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.lease import LeaseGrant

T = TypeVar("T")


class RecordingLog:
    """A RunLog that keeps every batch and heartbeat it was given, in order, and hands them on
    to ``store`` when given one (the memory store, say).

    ``down`` makes every call raise StoreUnavailable; ``refusing`` makes record_runs raise a
    plain StoreError; ``hang`` (an Event) makes calls block until it is set. Without a store,
    ``unknown`` keys are counted as naming no execution."""

    def __init__(self, *, unknown: Collection[str] = (), store: RunLog | None = None) -> None:
        self.store = store
        self.batches: list[list[RunEvent]] = []
        self.heartbeats: list[tuple[str, ...]] = []
        self.calls = 0
        self.down = False
        self.refusing = False
        self.hang: threading.Event | None = None
        self.unknown = set(unknown)
        self.closed = False
        self._lock = threading.Lock()

    def restart(self, store: RunLog | None) -> None:
        """Forget what was recorded and counted, and hand on to ``store`` from now on."""
        with self._lock:
            self.store = store
            self.batches, self.heartbeats, self.calls = [], [], 0

    def _enter(self) -> None:
        with self._lock:
            self.calls += 1
        hang = self.hang
        if hang is not None:
            hang.wait(30)
        if self.down:
            raise StoreUnavailable("record runs: database unavailable: connection refused")

    def record_runs(self, events: Sequence[RunEvent]) -> int:
        self._enter()
        if self.refusing:
            raise StoreError("record runs: database failed: value too long")
        with self._lock:
            self.batches.append(list(events))
        if self.store is not None:
            return self.store.record_runs(events)
        return sum(1 for event in events if event.key in self.unknown)

    def heartbeat(self, keys: Collection[str]) -> int:
        self._enter()
        with self._lock:
            self.heartbeats.append(tuple(keys))
        if self.store is not None:
            return self.store.heartbeat(keys)
        return len(keys)

    def read_runs(self, keys: Collection[str]) -> tuple[datetime, dict[str, RunRecord]]:
        self._enter()
        if self.store is not None:
            return self.store.read_runs(keys)
        return datetime.now(timezone.utc), {}

    def mark_lost(self, *, silent_for: timedelta, unstarted_for: timedelta,
                  tracked_since: datetime | None = None,
                  limit: int = 1000) -> list[Execution]:
        return []

    def resend_unstarted(self, *, lease: LeaseGrant, unstarted_for: timedelta,
                         tracked_since: datetime | None, resends: int,
                         limit: int = 1000) -> list[Execution]:
        return []

    def close(self) -> None:
        self.closed = True

    @property
    def events(self) -> list[RunEvent]:
        with self._lock:
            return [event for batch in self.batches for event in batch]


def constant(value: Any) -> Callable[[], Any]:
    return lambda: value
