"""A moving clock, a scripted broker and a recording observer for driving a real Engine.

The clock and the observer are the package's own (:mod:`goatbeat_celery.testing`); the broker
is its recording one, made slow on demand.
"""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from goatbeat_celery.beat.scheduler import Scheduler
from goatbeat_celery.core.loop.engine import Engine
from goatbeat_celery.core.loop.observer import EngineObserver
from goatbeat_celery.core.types.claims import Dispatch, SubmitResult
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from goatbeat_celery.testing import ManualClock, MemoryStore, RecordingSubmitter, build_engine
from goatbeat_celery.testing import RecordingObserver as RecordingObserver

#: On a minute boundary, so interval grid points are easy to write down.
START = ManualClock.DEFAULT_START
SETTINGS = Settings(lease_ttl=30, lease_renew_interval=10, retry_backoff=1)
BROKER_DOWN = RecordingSubmitter.failure


class ScriptedBroker(RecordingSubmitter):
    """The recording broker, unreachable while ``down``, whose every call takes ``latency``
    seconds of the manual clock, as a real broker round trip would."""

    def __init__(self, clock: ManualClock, latency: float = 0.0) -> None:
        super().__init__()
        self.clock = clock
        self.latency = latency

    @property
    def down(self) -> bool:
        return self.failing

    @down.setter
    def down(self, down: bool) -> None:
        self.failing = down

    def answer(self, dispatches: Sequence[Dispatch]) -> SubmitResult:
        self.clock.advance(self.latency)
        return super().answer(dispatches)


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
        return build_engine(self.store, clock=self.clock, submitter=self.broker,
                            settings=settings, holder=holder, observer=observer)


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


def exporter_port(scheduler: Scheduler) -> int:
    watch = scheduler._observability
    assert watch is not None and watch.exporter is not None, "no exporter was started"
    return watch.exporter.port
