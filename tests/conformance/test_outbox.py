"""The outbox: events written once per id, taken under expiring claims, delivered or retried
with backoff, and pruned after the retention."""

from __future__ import annotations

from datetime import timedelta
from functools import partial

import pytest
import sqlalchemy as sa

from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.outbox import OutboxEntry, OutboxEvent, OutboxRetry
from goatbeat_celery.store.memory import MemoryStore
from goatbeat_celery.store.sql import SQLStore

from .conftest import Backend, Store, StoreClock
from .support import run_together

HOLD = timedelta(seconds=60)


def _event(n: int, **payload: object) -> OutboxEvent:
    return OutboxEvent(event_id=f"alert-{n}", kind="alert.opened",
                       payload={"schedule": "report", "n": n, **payload})


def _one(store: Store, event_id: str) -> OutboxEntry:
    (entry,) = [e for e in store.list_events(limit=1000) if e.event_id == event_id]
    return entry


def test_an_event_is_written_once_per_id_due_at_once(store: Store) -> None:
    now = store.now()
    payload = {"schedule": "report", "nested": {"b": [1, 2.5, None], "a": "é"}}
    assert store.enqueue_events([
        OutboxEvent(event_id="alert-1", kind="alert.opened", payload=payload),
        _event(2),
    ]) == 2
    # The same id again (a retried transaction, another replica) inserts nothing.
    assert store.enqueue_events([_event(1, other=True), _event(3)]) == 1

    entries = store.list_events()
    assert [e.event_id for e in entries] == ["alert-1", "alert-2", "alert-3"]
    first = entries[0]
    assert first.payload == payload
    assert list(first.payload["nested"]) == ["b", "a"]  # key order kept
    assert (first.kind, first.attempts, first.delivered, first.delivered_to,
            first.last_error, first.claimed_by) == ("alert.opened", 0, False, (), None, None)
    assert first.created_at == first.next_attempt_at >= now


def test_invalid_events_are_refused_with_every_problem_and_nothing_is_written(
        store: Store) -> None:
    with pytest.raises(ConfigurationError) as raised:
        store.enqueue_events([
            _event(1),
            OutboxEvent(event_id="", kind="alert.opened", payload={}),
            OutboxEvent(event_id="alert-3", kind=" ", payload={"when": object()}),
        ])

    fields = [p.field for p in raised.value.details]
    assert fields == ["events[1].event_id", "events[2].kind", "events[2].payload"]
    assert store.list_events() == []


def test_take_claims_due_events_oldest_first_up_to_the_limit(store: Store,
                                                               clock: StoreClock) -> None:
    store.enqueue_events([_event(1)])
    clock.advance(0.01)
    store.enqueue_events([_event(2), _event(3)])

    taken = store.take_events(holder="a", limit=2, hold_for=HOLD)

    assert [e.event_id for e in taken] == ["alert-1", "alert-2"]
    now = store.now()
    for entry in taken:
        assert entry.claimed_by == "a"
        assert entry.claimed_until is not None
        assert now < entry.claimed_until <= now + HOLD
    # Claimed events are nobody else's while the claim holds, nor the same holder's again.
    assert [e.event_id for e in store.take_events(holder="b", limit=10, hold_for=HOLD)] == [
        "alert-3"]
    assert store.take_events(holder="a", limit=10, hold_for=HOLD) == []


def test_an_expired_claim_lets_another_holder_take_the_event(backend: Backend) -> None:
    store, hold = backend.store, backend.expiring_ttl
    store.enqueue_events([_event(1)])
    (taken,) = store.take_events(holder="a", limit=10, hold_for=hold)
    assert taken.claimed_until is not None

    backend.clock.move_just_before(taken.claimed_until)
    assert store.take_events(holder="b", limit=10, hold_for=hold) == []
    backend.clock.move_to(taken.claimed_until)

    (again,) = store.take_events(holder="b", limit=10, hold_for=hold)
    assert (again.event_id, again.claimed_by) == ("alert-1", "b")
    # The first holder's failure comes too late: the event is b's to deliver now.
    assert store.retry_events([OutboxRetry(event_id="alert-1", delay=HOLD, error="late")],
                              holder="a") == 0
    assert _one(store, "alert-1").claimed_by == "b"


def test_delivered_events_are_never_taken_again(store: Store, clock: StoreClock) -> None:
    store.enqueue_events([_event(1), _event(2)])
    store.take_events(holder="a", limit=10, hold_for=HOLD)

    assert store.mark_events_delivered(["alert-1", "alert-1", "unknown"]) == 1
    assert store.mark_events_delivered(["alert-1"]) == 0  # idempotent

    delivered = _one(store, "alert-1")
    assert delivered.delivered_at is not None and delivered.delivered_at <= store.now()
    assert (delivered.attempts, delivered.claimed_by, delivered.claimed_until) == (1, None, None)
    assert [e.event_id for e in store.list_events(delivered=True)] == ["alert-1"]
    assert [e.event_id for e in store.list_events(delivered=False)] == ["alert-2"]
    store.retry_events([OutboxRetry(event_id="alert-2", delay=timedelta(0), error="503")],
                       holder="a")
    clock.advance(0.01)
    assert [e.event_id for e in store.take_events(holder="a", limit=10, hold_for=HOLD)] == [
        "alert-2"]


def test_a_failed_delivery_waits_its_delay_and_keeps_who_took_it(backend: Backend) -> None:
    store, clock = backend.store, backend.clock
    delay = backend.expiring_ttl
    store.enqueue_events([_event(1)])
    store.take_events(holder="a", limit=10, hold_for=HOLD)

    before = store.now()
    assert store.retry_events([OutboxRetry(event_id="alert-1", delay=delay,
                                           error="HTTP 503 from https://hooks.example/…",
                                           delivered_to=("hook-b",))], holder="a") == 1
    failed = _one(store, "alert-1")
    assert (failed.attempts, failed.last_error, failed.delivered_to, failed.claimed_by) == (
        1, "HTTP 503 from https://hooks.example/…", ("hook-b",), None)
    assert before + delay <= failed.next_attempt_at <= store.now() + delay
    assert store.take_events(holder="a", limit=10, hold_for=HOLD) == []

    clock.move_to(failed.next_attempt_at)
    (again,) = store.take_events(holder="a", limit=10, hold_for=HOLD)
    assert again.attempts == 1
    store.retry_events([OutboxRetry(event_id="alert-1", delay=timedelta(0), error="timed out",
                                    delivered_to=("hook-a",))], holder="a")
    retried = _one(store, "alert-1")
    assert (retried.attempts, retried.delivered_to) == (2, ("hook-a", "hook-b"))


def test_a_long_error_is_cut(store: Store) -> None:
    store.enqueue_events([_event(1)])
    store.take_events(holder="a", limit=10, hold_for=HOLD)
    store.retry_events([OutboxRetry(event_id="alert-1", delay=HOLD, error="x" * 10_000)],
                       holder="a")
    error = _one(store, "alert-1").last_error
    assert error is not None and len(error) == 2000 and error.endswith("...")


def test_two_replicas_taking_at_once_never_take_the_same_event(backend: Backend) -> None:
    backend.store.enqueue_events([_event(n) for n in range(40)])
    first, second = backend.open_peer(), backend.open_peer()

    results = run_together(partial(first.take_events, holder="a", limit=25, hold_for=HOLD),
                           partial(second.take_events, holder="b", limit=25, hold_for=HOLD))

    taken = [[e.event_id for e in result] for result in results
             if not isinstance(result, BaseException)]
    assert len(taken) == 2, results
    assert not set(taken[0]) & set(taken[1])
    assert len(taken[0]) + len(taken[1]) == 40


def test_prune_deletes_delivered_events_and_those_never_delivered_after_the_retention(
        store: Store, clock: StoreClock) -> None:
    store.enqueue_events([_event(1), _event(2)])
    store.take_events(holder="a", limit=10, hold_for=HOLD)
    store.mark_events_delivered(["alert-1"])
    delivered_at = _one(store, "alert-1").delivered_at
    assert delivered_at is not None
    clock.advance(0.01)
    store.enqueue_events([_event(3)])
    created_3 = _one(store, "alert-3").created_at

    # Strictly before the cut-off; an event enqueued later stays.
    assert store.prune(before=_one(store, "alert-2").created_at, limit=10) == 0
    assert store.prune(before=created_3, limit=10) == 2
    assert [e.event_id for e in store.list_events()] == ["alert-3"]


def test_enqueueing_inside_a_transaction_writes_with_it(backend: Backend) -> None:
    store = backend.store
    if isinstance(store, MemoryStore):
        with store._lock:
            assert store._enqueue_events_locked([_event(1)]) == 1
        assert [e.event_id for e in store.list_events()] == ["alert-1"]
        return
    assert isinstance(store, SQLStore)
    with pytest.raises(RuntimeError), store._write("test") as txn:
        assert store._enqueue_events(txn.conn, [_event(1)]) == 1
        # What the event reports fails to be written: the event goes with it.
        raise RuntimeError("rolled back")
    assert store.list_events() == []
    with store._write("test") as txn:
        store._enqueue_events(txn.conn, [_event(2)])
        assert txn.conn.execute(sa.text("SELECT count(*) FROM goatbeat_outbox")).scalar() == 1
    assert [e.event_id for e in store.list_events()] == ["alert-2"]
