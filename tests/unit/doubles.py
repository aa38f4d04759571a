"""Test doubles shared by the engine's unit tests, built on the package's own
(:mod:`goatbeat_celery.testing`)."""

from __future__ import annotations

from datetime import datetime

from goatbeat_celery import testing
from goatbeat_celery.core.loop.engine import Engine
from goatbeat_celery.core.types.lease import LeaseGrant


class LeaseRecordingObserver(testing.RecordingObserver):
    """The package's recording observer, keeping of a lease only what these tests compare:
    the token it was acquired with (``acquired``), the reason it was lost (``lost``)."""

    def lease_acquired(self, grant: LeaseGrant) -> None:
        self.events.append(("acquired", grant.token))

    def lease_lost(self, name: str, holder: str, reason: str) -> None:
        self.events.append(("lost", reason))

    @property
    def lease_events(self) -> list[tuple[str, object]]:
        """The lease's events alone, in order."""
        return [(kind, what) for kind, what in self.events if kind in {"acquired", "lost"}]


def run_until(engine: Engine, clock: testing.ManualClock, end: datetime) -> None:
    """Tick, sleeping as the engine asks, until ``end``: a leader that is always on time."""
    while clock() < end:
        wait = engine.tick()
        step = min(max(wait, 0.001), (end - clock()).total_seconds())
        clock.advance(max(step, 0.000001))
    engine.tick()
