"""Engines on one memory store and a manual clock: the world the engine's unit tests drive."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from goatbeat_celery import testing
from goatbeat_celery.core.loop.engine import Engine
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from goatbeat_celery.testing import ManualClock, MemoryStore, build_engine

from .doubles import LeaseRecordingObserver

UTC = timezone.utc
T0 = datetime(2026, 1, 1, tzinfo=UTC)
EVERY_MINUTE = TriggerSpec(kind="interval", params={"every": 60})


def minute(n: int) -> datetime:
    return T0 + timedelta(minutes=n)


class RecordingSubmitter(testing.RecordingSubmitter):
    """The package's recording broker; an unreachable one fails with "connection refused"."""

    failure = "connection refused"


class World:
    """One memory store, its clock, and the replicas sharing it."""

    def __init__(self) -> None:
        self.clock = ManualClock(T0 + timedelta(seconds=30))
        self.store = MemoryStore(self.clock)
        self.replicas: dict[str, Engine] = {}

    @property
    def now(self) -> datetime:
        """The store's clock."""
        return self.clock.current

    @now.setter
    def now(self, instant: datetime) -> None:
        """Move the store's clock alone to ``instant``."""
        self.clock.move_to(instant, frozen=self.replicas)

    def replica(self, holder: str = "a", *, settings: Settings | None = None,
                submitter: RecordingSubmitter | None = None,
                config: Sequence[ScheduleSpec] = (), lease: Any = None,
                observer: LeaseRecordingObserver | None = None, **kwargs: Any) -> Engine:
        engine = build_engine(
            self.store, lease=lease, submitter=submitter,
            settings=settings or Settings(max_interval=60), holder=holder,
            config_schedules=config, observer=observer,
            monotonic=self.clock.monotonic_for(holder), **kwargs,
        )
        self.replicas[holder] = engine
        return engine

    def advance(self, seconds: float, *, frozen: Sequence[str] = (),
                store_only: bool = False) -> None:
        """Move the store clock, and the monotonic clock of every replica not ``frozen``."""
        self.clock.advance(seconds, frozen=self.replicas if store_only else frozen)

    def move_monotonic(self, holder: str, seconds: float) -> None:
        self.clock.advance_replica(holder, seconds)

    def create(self, name: str = "tick", *, trigger: TriggerSpec = EVERY_MINUTE,
               next_at: datetime | None = None, **changes: Any) -> ScheduleSpec:
        spec = ScheduleSpec(name=name, task="app.tick", trigger=trigger, args=(1,),
                            kwargs={"k": "v"}, **changes)
        first = next_at or minute(1)
        self.store.create_schedule(spec, next_occurrence_at=first, next_run_at=first)
        return spec

    def executions(self, name: str | None = None) -> list[Execution]:
        return sorted(self.store.executions(schedule_name=name, limit=10_000),
                      key=lambda e: e.occurrence_at)


def sent_allowing_no_task(world: World, entry: ScheduleSpec) -> list[str]:
    """The keys a leader with the config ``entry`` and an allow-list that allows no task
    sends over its first thirty seconds."""
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter, config=[entry],
                           task_allowed=lambda task: False)
    engine.tick()
    world.advance(30)
    engine.tick()
    return submitter.keys
