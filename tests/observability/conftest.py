"""Fixtures of the observability tests: a memory store and a scripted broker on one clock."""

from __future__ import annotations

import pytest

from goatbeat_celery.store.memory import MemoryStore

from .support import ManualClock, Replicas, ScriptedBroker


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def replicas(clock: ManualClock) -> Replicas:
    return Replicas(clock=clock, store=MemoryStore(clock), broker=ScriptedBroker(clock))
