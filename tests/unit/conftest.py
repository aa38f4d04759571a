"""Fixtures the unit tests share: a manual clock, a memory store on it and the schedules API
over that store (a test module that needs another start or another store defines its own)."""

from __future__ import annotations

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.testing import ManualClock, MemoryStore


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(clock: ManualClock) -> MemoryStore:
    return MemoryStore(clock)


@pytest.fixture
def schedules(store: MemoryStore) -> Schedules:
    return Schedules(store)
