"""Each store states the concerns of the core's contract it implements, and implements every
member of each itself: none falls through to a protocol's empty body."""

from __future__ import annotations

from typing import Protocol

import pytest

from goatbeat_celery.core import protocols
from goatbeat_celery.store.memory import MemoryStore
from goatbeat_celery.store.postgres import PostgresStore
from goatbeat_celery.store.sqlite import SQLiteStore

STORES = [MemoryStore, SQLiteStore, PostgresStore]
CONCERNS = [protocols.StoreConnection, protocols.ScheduleReads, protocols.ScheduleWrites,
            protocols.CalendarStore, protocols.DueReads, protocols.Claims, protocols.Dispatches,
            protocols.Settlements, protocols.BackfillStore, protocols.History,
            protocols.AuditLog, protocols.LeaseManager, protocols.RunLog, protocols.AlertLog,
            protocols.Outbox, protocols.TokenStore]


def members(concern: type) -> list[str]:
    """The methods and attributes ``concern`` declares itself."""
    declared = [name for name, value in vars(concern).items()
                if callable(value) and not name.startswith("_")]
    return declared + list(vars(concern).get("__annotations__", {}))


def test_the_schedule_store_is_the_combination_of_its_concerns() -> None:
    bases = [base for base in protocols.ScheduleStore.__bases__ if base is not Protocol]

    assert members(protocols.ScheduleStore) == []
    assert [base.__name__ for base in bases if base not in CONCERNS] == []
    assert len({name for base in bases for name in members(base)}) == 51


@pytest.mark.parametrize("store", STORES, ids=lambda store: store.__name__)
def test_every_store_states_every_concern(store: type) -> None:
    assert [concern.__name__ for concern in CONCERNS if concern not in store.__mro__] == []


@pytest.mark.parametrize("store", STORES, ids=lambda store: store.__name__)
def test_no_member_of_a_concern_falls_through_to_the_protocol(store: type) -> None:
    unimplemented = []
    for concern in CONCERNS:
        for name in members(concern):
            owner = next(cls for cls in store.__mro__ if name in vars(cls) or (
                cls in CONCERNS and name in vars(cls).get("__annotations__", {})))
            if owner in CONCERNS:
                unimplemented.append(f"{concern.__name__}.{name}")

    assert unimplemented == []
