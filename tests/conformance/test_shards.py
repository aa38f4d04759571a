"""Shards on every store: the due read and the pending read of one shard, the lease rows of a
sharding listed by prefix, and one shard's lease fencing only its own claims."""

from __future__ import annotations

from datetime import timedelta

import pytest

from goatbeat_celery.core.rules.backfill import BackfillRequest
from goatbeat_celery.core.rules.shards import Shard
from goatbeat_celery.core.types.errors import LeaseLost
from goatbeat_celery.core.types.execution import ExecutionState
from goatbeat_celery.core.types.spec import SyncEntry

from .conftest import Backend, Store
from .support import LONG_TTL, claim_next, create_due, grid_point_before, interval_spec

COUNT = 3


def in_shard(index: int, how_many: int = 2, count: int = COUNT) -> list[str]:
    """The first names s0, s1, ... that fall in shard ``index`` of ``count``."""
    return [f"s{n}" for n in range(500) if Shard(index, count).holds(f"s{n}")][:how_many]


def test_the_due_read_of_a_shard_has_only_its_schedules_and_its_earliest_instant(
        store: Store) -> None:
    names = {k: in_shard(k) for k in range(COUNT)}
    for k, shard_names in names.items():
        for steps_back, name in enumerate(shard_names):
            create_due(store, name, steps_back=steps_back + k)
    later = store.now() + timedelta(hours=k + 1)
    store.create_schedule(interval_spec(in_shard(1, 3)[2]), next_occurrence_at=later,
                          next_run_at=later)

    everything = store.due_schedules(100)
    for k in range(COUNT):
        batch = store.due_schedules(100, shard=Shard(k, COUNT))
        assert sorted(s.name for s in batch.schedules) == sorted(names[k])
        assert batch.next_due_at == min(s.next_run_at for s in batch.schedules
                                        if s.next_run_at is not None)
        assert batch.now >= everything.now
    assert len(everything.schedules) == sum(len(v) for v in names.values())
    assert everything.next_due_at == store.due_schedules(100, shard=Shard(COUNT - 1,
                                                                          COUNT)).next_due_at


def test_a_shard_with_nothing_due_reports_its_own_next_instant_or_none(store: Store) -> None:
    soon = store.now() + timedelta(minutes=5)
    store.create_schedule(interval_spec(in_shard(0, 1)[0]), next_occurrence_at=soon,
                          next_run_at=soon)

    assert store.due_schedules(10, shard=Shard(0, COUNT)).next_due_at == soon
    assert store.due_schedules(10, shard=Shard(1, COUNT)).next_due_at is None


def test_schedules_written_by_a_config_sync_fall_in_their_shards(store: Store) -> None:
    lease = store.acquire("beat", "a", LONG_TTL)
    assert lease is not None
    due = store.now() - timedelta(seconds=1)
    names = in_shard(0, 1) + in_shard(2, 1)
    store.sync_config([SyncEntry(spec=interval_spec(name), next_occurrence_at=due,
                                 next_run_at=due) for name in names], lease=lease)

    assert [s.name for s in store.due_schedules(10, shard=Shard(2, COUNT)).schedules] == \
        in_shard(2, 1)
    assert [s.name for s in store.due_schedules(10, shard=Shard(0, COUNT)).schedules] == \
        in_shard(0, 1)


def test_a_shards_pending_read_takes_only_its_own_executions(store: Store) -> None:
    lease = store.acquire("beat", "a", LONG_TTL)
    assert lease is not None
    mine, theirs = in_shard(1, 1)[0], in_shard(2, 1)[0]
    for name in (mine, theirs):
        store.claim([claim_next(create_due(store, name))], lease=lease)

    taken = store.take_pending(lease=lease, limit=10, shard=Shard(1, COUNT))

    assert [d.execution.schedule_name for d in taken] == [mine]
    assert [d.execution.schedule_name
            for d in store.take_pending(lease=lease, limit=10, shard=Shard(2, COUNT))] == [theirs]


def test_executions_of_a_deleted_schedule_are_abandoned_by_shard_zero_only(store: Store) -> None:
    lease = store.acquire("beat", "a", LONG_TTL)
    assert lease is not None
    gone = in_shard(2, 1)[0]
    store.claim([claim_next(create_due(store, gone))], lease=lease)
    store.delete_schedule(gone)

    assert store.take_pending(lease=lease, limit=10, shard=Shard(2, COUNT)) == []
    assert store.executions()[0].state is ExecutionState.CLAIMED
    assert store.take_pending(lease=lease, limit=10, shard=Shard(0, COUNT)) == []
    assert store.executions()[0].state is ExecutionState.ABANDONED


def test_lease_rows_are_listed_by_a_literal_prefix_in_name_order(store: Store) -> None:
    for name in ("app.shard-1-of-2", "app.shard-0-of-2", "app.replicas-of-2.h:1", "appx",
                 "other", "a%p.shard-0-of-2", "a_p.x", "a/p.x", "a\\p.x", "a/%.x", "abp.x"):
        assert store.acquire(name, "h:1", LONG_TTL) is not None
    released = store.acquire("app.shard-9-of-9", "h:2", LONG_TTL)
    assert released is not None and store.release(released)

    rows = store.list_leases("app.")

    assert [row.name for row in rows] == ["app.replicas-of-2.h:1", "app.shard-0-of-2",
                                          "app.shard-1-of-2", "app.shard-9-of-9"]
    assert [row.held for row in rows] == [True, True, True, False]
    assert all(row.store_now <= store.now() for row in rows)
    assert [row.name for row in store.list_leases("a%p.")] == ["a%p.shard-0-of-2"]
    assert [row.name for row in store.list_leases("a_p")] == ["a_p.x"]
    # The pattern's escape character and a backslash are literal too.
    assert [row.name for row in store.list_leases("a/p")] == ["a/p.x"]
    assert [row.name for row in store.list_leases("a\\p")] == ["a\\p.x"]
    assert [row.name for row in store.list_leases("a/%")] == ["a/%.x"]
    assert store.list_leases("nothing") == []


def test_one_shards_lost_lease_refuses_its_claims_and_not_another_shards(
        backend: Backend) -> None:
    store, clock, ttl = backend.store, backend.clock, backend.expiring_ttl
    zero = store.acquire("app.shard-0-of-2", "a", ttl)
    one = store.acquire("app.shard-1-of-2", "a", LONG_TTL * 10)
    assert zero is not None and one is not None
    first, second = create_due(store, "first"), create_due(store, "second")
    clock.move_to(zero.expires_at)
    assert store.acquire("app.shard-0-of-2", "b", ttl) is not None

    with pytest.raises(LeaseLost):
        store.claim([claim_next(first)], lease=zero)
    result = store.claim([claim_next(second)], lease=one)

    assert [d.execution.schedule_name for d in result.dispatches] == ["second"]
    assert result.dispatches[0].execution.token == one.token


def test_a_released_or_expired_lease_row_is_forgotten_and_a_live_one_never(
        backend: Backend) -> None:
    store, clock, ttl = backend.store, backend.clock, backend.expiring_ttl
    live = store.acquire("app.live", "a", LONG_TTL * 10)
    released = store.acquire("app.released", "a", LONG_TTL)
    expiring = store.acquire("app.expired", "a", ttl)
    assert live is not None and released is not None and expiring is not None
    assert store.release(released)
    clock.move_to(expiring.expires_at)

    assert store.forget("app.live") is False
    assert store.forget("app.released") is True
    assert store.forget("app.expired") is True
    assert store.forget("app.never") is False

    assert [row.name for row in store.list_leases("app.")] == ["app.live"]
    # A name forgotten starts again from token 1 for whoever takes it next.
    again = store.acquire("app.released", "b", LONG_TTL)
    assert again is not None and again.token == 1


def test_a_renewal_watching_a_prefix_says_whether_a_row_there_is_to_be_forgotten(
        backend: Backend) -> None:
    store, clock, ttl = backend.store, backend.clock, backend.expiring_ttl
    held = store.acquire("app.a", "a", LONG_TTL * 10)
    other = store.acquire("app.b", "b", LONG_TTL * 10)
    assert held is not None and other is not None
    stray = store.acquire("app_x", "c", LONG_TTL)  # "_" is no wildcard: not under "app."
    assert stray is not None and store.release(stray)

    [renewed], stale = store.acquire_watching(["app.a"], "a", LONG_TTL * 10, "app.")

    assert renewed is not None and renewed.token == held.token and not renewed.changed_holder
    assert stale is False  # every row there is live; "app_x" is not there
    assert store.release(other)
    assert store.acquire_watching(["app.a"], "a", LONG_TTL * 10, "app.")[1] is True
    # A row the leader keeps, named: no other is to go.
    assert store.acquire_watching(["app.a"], "a", LONG_TTL * 10, "app.", ["app.b"])[1] is False
    assert store.forget("app.b")
    assert store.acquire_watching(["app.a"], "a", LONG_TTL * 10, "app.")[1] is False
    expiring = store.acquire("app.c", "c", ttl)
    assert expiring is not None
    clock.move_to(expiring.expires_at)
    # Asked by a replica that holds none of the names: the same answer.
    grants, stale = store.acquire_watching([], "z", LONG_TTL, "app.")
    assert (grants, stale) == ([], True)
    assert store.acquire_watching([], "z", LONG_TTL, "app.", ["app.c"]) == ([], False)
    # Another row run out beside the one kept is to go.
    assert store.release(held)
    assert store.acquire_watching([], "z", LONG_TTL, "app.", ["app.c"]) == ([], True)
    assert store.acquire_watching([], "z", LONG_TTL, "app.", ["app.c", "app.a"]) == ([], False)


def test_a_shards_active_backfills_are_those_of_its_schedules_and_shard_zero_the_orphans(
        store: Store) -> None:
    mine, theirs, gone = in_shard(1, 1)[0], in_shard(2, 1)[0], in_shard(2, 2)[1]
    end = grid_point_before(store.now(), 60, 1)
    ids = {}
    for name in (mine, theirs, gone):
        create_due(store, name)
        ids[name] = store.create_backfill(BackfillRequest(
            schedule_name=name, start=end - timedelta(minutes=2), end=end, total=3)).id
    store.delete_schedule(gone)

    def active(k: int) -> list[int]:
        return [b.id for b in store.active_backfills(10, shard=Shard(k, COUNT))]

    assert active(1) == [ids[mine]]
    assert active(2) == [ids[theirs]]
    assert active(0) == [ids[gone]]
    assert [b.id for b in store.active_backfills(10)] == sorted(ids.values())
