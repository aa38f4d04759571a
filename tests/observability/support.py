"""A moving clock, a scripted broker and a recording observer for driving a real Engine."""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from goatbeat_celery.core.engine import Engine
from goatbeat_celery.core.model import (
    UTC,
    Dispatch,
    LeaseGrant,
    Schedule,
    ScheduleSpec,
    SubmitResult,
    TriggerSpec,
)
from goatbeat_celery.core.observer import EngineObserver, OccurrenceRecord
from goatbeat_celery.core.settings import Settings
from goatbeat_celery.store.memory import MemoryStore

#: On a minute boundary, so interval grid points are easy to write down.
START = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
SETTINGS = Settings(lease_ttl=30, lease_renew_interval=10, retry_backoff=1)
BROKER_DOWN = "ConnectionRefusedError: [Errno 111] Connection refused"


class ManualClock:
    """Store clock and engine monotonic clock in one: time moves only when a test moves it."""

    def __init__(self, start: datetime = START) -> None:
        self.start = start
        self.current = start

    def __call__(self) -> datetime:
        return self.current

    def advance(self, seconds: float) -> None:
        self.current += timedelta(seconds=seconds)

    def monotonic(self) -> float:
        return (self.current - self.start).total_seconds()


@dataclass
class ScriptedBroker:
    """A TaskSubmitter: accepts everything unless ``down``, and rejects the messages of the
    schedules in ``rejecting`` for themselves; each call takes ``latency`` seconds of the
    manual clock, as a real broker round trip would."""

    clock: ManualClock
    latency: float = 0.0
    down: bool = False
    rejecting: set[str] = field(default_factory=set)
    sent: list[tuple[str, int]] = field(default_factory=list)

    def submit(self, dispatches: Sequence[Dispatch], *, token: int,
               timeout: float) -> SubmitResult:
        self.clock.advance(self.latency)
        if self.down:
            return SubmitResult(accepted=[], failed={d.key: BROKER_DOWN for d in dispatches})
        rejected = {d.key: "EncodeError: cannot serialise" for d in dispatches
                    if d.execution.schedule_name in self.rejecting}
        taken = [d for d in dispatches if d.key not in rejected]
        self.sent.extend((d.key, token) for d in taken)
        return SubmitResult(accepted=[d.key for d in taken], rejected=rejected)


@dataclass
class RecordingObserver:
    """An EngineObserver that writes down every call, in order."""

    events: list[tuple[str, Any]] = field(default_factory=list)

    def lease_acquired(self, grant: LeaseGrant) -> None:
        self.events.append(("lease_acquired", grant))

    def lease_lost(self, name: str, holder: str, reason: str) -> None:
        self.events.append(("lease_lost", (name, holder, reason)))

    def claimed(self, dispatches: Sequence[Dispatch]) -> None:
        self.events.append(("claimed", tuple(d.key for d in dispatches)))

    def missed(self, schedule_name: str, count: int) -> None:
        self.events.append(("missed", (schedule_name, count)))

    def submitted(self, records: Sequence[OccurrenceRecord]) -> None:
        self.events.append(("submitted", tuple(records)))

    def set_aside(self, schedule_name: str, reason: str) -> None:
        self.events.append(("set_aside", (schedule_name, reason)))


def interval(name: str, every: float = 60, **fields: Any) -> ScheduleSpec:
    return ScheduleSpec(name=name, task="proj.tasks.report",
                        trigger=TriggerSpec(kind="interval", params={"every": every}), **fields)


def create_due(store: MemoryStore, name: str, occurrence: datetime, every: float = 60,
               **fields: Any) -> Schedule:
    """An interval schedule whose next occurrence (a grid point) is ``occurrence``."""
    return store.create_schedule(interval(name, every, **fields),
                                 next_occurrence_at=occurrence, next_run_at=occurrence)


@dataclass
class Replicas:
    """One memory store shared by engines built on demand, all on one manual clock."""

    clock: ManualClock
    store: MemoryStore
    broker: ScriptedBroker

    def engine(self, observer: EngineObserver, holder: str = "a",
               settings: Settings = SETTINGS) -> Engine:
        return Engine(store=self.store, lease=self.store, submitter=self.broker,
                      settings=settings, holder=holder, observer=observer,
                      monotonic=self.clock.monotonic)


def scrape(port: int) -> dict[str, float]:
    """GET /metrics over HTTP; samples by name, labels written as in the exposition format."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


def refuses_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
