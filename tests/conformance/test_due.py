"""due_schedules: the due ones oldest first, the store's clock, and when to wake next."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from goatbeat_celery.core.types.claims import PlannedClaim

from .conftest import Store, StoreClock
from .support import LONG_TTL, create_due, interval_spec


def test_due_schedules_come_oldest_due_first_up_to_the_limit(store: Store) -> None:
    # Created in an order unlike both their names and their due order.
    for name, steps_back in (("b", 1), ("d", 3), ("a", 0), ("c", 2)):
        create_due(store, name, steps_back=steps_back)

    batch = store.due_schedules(3)

    assert [s.name for s in batch.schedules] == ["d", "c", "b"]
    assert store.due_schedules(10).next_due_at == batch.schedules[0].next_run_at


def test_the_earliest_due_instant_ignores_disabled_schedules(store: Store) -> None:
    now = store.now()
    store.create_schedule(interval_spec("paused", enabled=False),
                          next_occurrence_at=now - timedelta(hours=1),
                          next_run_at=now - timedelta(hours=1))
    soon = now + timedelta(minutes=5)
    store.create_schedule(interval_spec("later"), next_occurrence_at=now + timedelta(hours=1),
                          next_run_at=now + timedelta(hours=1))
    store.create_schedule(interval_spec("soon"), next_occurrence_at=soon, next_run_at=soon)

    batch = store.due_schedules(10)

    assert batch.schedules == ()
    assert batch.next_due_at == soon


def test_a_disabled_schedule_is_never_due(store: Store) -> None:
    schedule = create_due(store, "report")
    store.replace_schedule(replace(schedule.spec, enabled=False),
                           next_occurrence_at=schedule.next_occurrence_at,
                           next_run_at=schedule.next_run_at)

    batch = store.due_schedules(10)

    assert (batch.schedules, batch.next_due_at) == ((), None)


def test_an_exhausted_schedule_is_never_due(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    schedule = create_due(store, "once")
    occurrence = schedule.next_occurrence_at
    assert occurrence is not None
    # The trigger has no occurrence left: the claim leaves both next times empty.
    store.claim([PlannedClaim(schedule_name="once", version=schedule.row_version,
                              occurrences=((occurrence, occurrence),), missed=0,
                              next_occurrence_at=None, next_run_at=None)], lease=grant)

    batch = store.due_schedules(10)

    assert (batch.schedules, batch.next_due_at) == ((), None)
    assert store.get_schedule("once").next_run_at is None


def test_due_schedules_reports_the_store_clock(store: Store, clock: StoreClock) -> None:
    before = store.now()
    clock.advance(0.01)

    batch = store.due_schedules(10)

    assert before < batch.now <= store.now()
    assert batch.now.utcoffset() == timedelta(0)


def test_a_schedule_becomes_due_when_the_store_clock_reaches_it(
    store: Store, clock: StoreClock
) -> None:
    at = store.now() + timedelta(seconds=1)
    store.create_schedule(interval_spec("report"), next_occurrence_at=at, next_run_at=at)
    assert store.due_schedules(10).schedules == ()

    clock.move_to(at)

    assert [s.name for s in store.due_schedules(10).schedules] == ["report"]


def test_a_read_ahead_returns_those_due_by_its_instant_and_the_stores_clock(store: Store) -> None:
    now = store.now()
    soon, later = now + timedelta(seconds=2), now + timedelta(minutes=5)
    create_due(store, "due")
    for name, at in (("soon", soon), ("later", later)):
        store.create_schedule(interval_spec(name), next_occurrence_at=at, next_run_at=at)

    ahead = store.due_schedules(10, until=soon)
    today = store.due_schedules(10)

    assert [s.name for s in ahead.schedules] == ["due", "soon"]
    assert [s.name for s in today.schedules] == ["due"]
    # The clock is still the store's, not the instant read ahead to.
    assert now <= ahead.now < soon
    assert ahead.next_due_at == today.next_due_at
