"""Rotation across clusters in every store: the rotation kept with the schedule and carried by
each dispatch (claimed, resubmitted, run now), and the queue a run was sent to recorded with
it."""

from __future__ import annotations

from dataclasses import replace

from goatbeat_celery.core.types.execution import ExecutionState

from .conftest import Backend, Store
from .support import LONG_TTL, claim_next, create_due, interval_spec

QUEUES = ("eu", "us", "ap")


def test_a_rotation_is_stored_read_back_and_removed(store: Store) -> None:
    created = create_due(store, "rotated", rotate=QUEUES, rotate_handover=True)
    read = store.get_schedule("rotated")
    assert (read.spec.rotate, read.spec.rotate_handover) == (QUEUES, True)
    assert read.spec == created.spec and read.damage == ()

    store.replace_schedule(replace(read.spec, rotate=(), rotate_handover=False),
                           next_occurrence_at=read.next_occurrence_at,
                           next_run_at=read.next_run_at)
    cleared = store.get_schedule("rotated")
    assert (cleared.spec.rotate, cleared.spec.rotate_handover) == ((), False)
    assert cleared.spec.spec_hash() == interval_spec("rotated").spec_hash()


def test_each_dispatch_carries_its_schedules_rotation(backend: Backend) -> None:
    store = backend.store
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    rotated = create_due(store, "rotated", rotate=("eu", "us"), rotate_handover=True)
    plain = create_due(store, "plain")
    result = store.claim([claim_next(rotated), claim_next(plain)], lease=grant)
    by_name = {d.execution.schedule_name: d for d in result.dispatches}
    assert (by_name["rotated"].rotate, by_name["rotated"].rotate_handover) == (("eu", "us"),
                                                                              True)
    assert (by_name["plain"].rotate, by_name["plain"].rotate_handover) == ((), False)
    assert all(d.rotation_index is None for d in result.dispatches)  # the engine's to set

    # Resubmitted by the next leader, and a run-now: the same rotation.
    backend.let_expire(grant)
    second = store.acquire("beat", "b", LONG_TTL)
    assert second is not None
    store.request_run("rotated")
    pending = [d for d in store.take_pending(lease=second, limit=10)
               if d.execution.schedule_name == "rotated"]
    assert len(pending) == 2 and {d.execution.manual for d in pending} == {False, True}
    assert all((d.rotate, d.rotate_handover) == (("eu", "us"), True) for d in pending)


def test_mark_submitted_records_the_queue_of_each_rotated_run(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    schedules = [create_due(store, name, rotate=("eu", "us")) for name in ("r1", "r2")]
    plain = create_due(store, "plain")
    keys = {d.execution.schedule_name: d.key for d in store.claim(
        [claim_next(s) for s in (*schedules, plain)], lease=grant).dispatches}

    assert store.mark_submitted(list(keys.values()),
                                {keys["r1"]: "eu", keys["r2"]: "us"}) == 3

    stored = {e.schedule_name: e for e in store.executions()}
    assert {name: (e.state, e.cluster) for name, e in stored.items()} == {
        "r1": (ExecutionState.SUBMITTED, "eu"), "r2": (ExecutionState.SUBMITTED, "us"),
        "plain": (ExecutionState.SUBMITTED, None)}
    # Marked again (a resend's acceptance): nothing changes, the queue stays.
    assert store.mark_submitted([keys["r1"]], {keys["r1"]: "us"}) == 0
    assert store.executions_by_key([keys["r1"]])[keys["r1"]].cluster == "eu"
