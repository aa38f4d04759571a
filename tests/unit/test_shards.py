"""Shards (core.rules.shards): a schedule's shard, the quotas, and replicas leading shards each
under its own lease, on the memory store with a manual clock."""

from __future__ import annotations

import threading
import zlib
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from goatbeat_celery.core.loop.engine import Engine
from goatbeat_celery.core.rules.backfill import BackfillRequest
from goatbeat_celery.core.rules.policies import ScheduleMode
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome
from goatbeat_celery.core.rules.shards import (
    Shard,
    member_lease_name,
    quota,
    shard_hash,
    shard_lease_name,
)
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.settings import MAX_SHARDS, Settings
from goatbeat_celery.core.types.spec import ScheduleSpec
from goatbeat_celery.testing import RecordingSubmitter
from tests.unit.engine_world import EVERY_MINUTE, World, minute


@pytest.fixture
def world() -> World:
    return World()


def sharded(count: int = 4, **changes: Any) -> Settings:
    return Settings(max_interval=60, shards=count, **changes)


def names_in(shard: Shard, how_many: int = 2) -> list[str]:
    """The first ``how_many`` names job-0, job-1, ... that fall in ``shard``."""
    found = [f"job-{n}" for n in range(1000) if shard.holds(f"job-{n}")]
    return found[:how_many]


def spread(world: World, count: int = 4, per_shard: int = 2) -> list[str]:
    """Schedules due at minute 1, ``per_shard`` in each of ``count`` shards."""
    names = [name for k in range(count) for name in names_in(Shard(k, count), per_shard)]
    for name in names:
        world.create(name)
    return names


def two_sharing(world: World, count: int = 4) -> tuple[Engine, Engine]:
    """Replicas ``a`` and ``b`` on ``count`` shards, past the look at which they share them."""
    a = world.replica("a", settings=sharded(count))
    b = world.replica("b", settings=sharded(count))
    a.tick()
    b.tick()
    world.advance(10)
    a.tick()
    b.tick()
    return a, b


def leading(world: World) -> dict[str, list[int]]:
    return {holder: engine.led_shards() for holder, engine in world.replicas.items()}


# -- the rules ----------------------------------------------------------------------------------

def test_a_schedules_shard_is_the_crc32_of_its_utf8_name_modulo_the_count() -> None:
    assert shard_hash("nightly-é") == zlib.crc32("nightly-é".encode())
    assert [Shard(k, 4).holds("nightly-é") for k in range(4)].count(True) == 1
    assert Shard(zlib.crc32(b"nightly") % 7, 7).holds("nightly")


def test_one_shard_is_fenced_by_the_lease_name_itself() -> None:
    assert shard_lease_name("default", Shard(0, 1)) == "default"
    assert shard_lease_name("default", Shard(2, 4)) == "default.shard-2-of-4"
    assert member_lease_name("default", 4, "h:1") == "default.replicas-of-4.h:1"


@pytest.mark.parametrize(("count", "members"), [(4, 1), (4, 2), (4, 3), (7, 3), (2, 5), (16, 6)])
def test_the_quotas_sum_to_the_shard_count_and_differ_by_at_most_one(
        count: int, members: int) -> None:
    holders = [f"r{n}" for n in range(members)]
    quotas = [quota(holders, holder, count) for holder in holders]
    assert sum(quotas) == count
    assert max(quotas) - min(quotas) <= 1


@pytest.mark.parametrize("bad", [0, -1, MAX_SHARDS + 1, "4", 2.0, True])
def test_a_shard_count_out_of_range_is_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="shards"):
        Settings(shards=bad)  # type: ignore[arg-type]


# -- one replica --------------------------------------------------------------------------------

def test_with_one_shard_the_lease_rows_are_the_lease_and_each_replicas_member_row(
        world: World) -> None:
    engine = world.replica("a")
    engine.tick()
    assert engine.shards is None
    assert [row.name for row in world.store.list_leases("")] == ["default",
                                                                 "default.replicas-of-1.a"]
    assert engine.led_shards() == [0]


def test_a_lone_replica_leads_every_shard_each_under_its_own_lease(world: World) -> None:
    names = spread(world)
    submitter = RecordingSubmitter()
    engine = world.replica("a", settings=sharded(), submitter=submitter)
    engine.tick()
    assert engine.led_shards() == [0, 1, 2, 3]
    rows = {row.name: row.holder for row in world.store.list_leases("default.")}
    assert rows == {**{f"default.shard-{k}-of-4": "a" for k in range(4)},
                    "default.replicas-of-4.a": "a"}

    world.advance(31)
    engine.tick()

    assert sorted(e.schedule_name for e in world.executions()) == sorted(names)
    assert len(submitter.sent) == len(names)


def test_a_shard_whose_lease_is_lost_claims_nothing_while_the_others_go_on(world: World) -> None:
    spread(world)
    engine = world.replica("a", settings=sharded())
    engine.tick()
    # Shard 1's lease runs out on the store's clock and another replica takes it; this
    # replica's local deadline has not passed (its monotonic clock stands still).
    world.advance(31, frozen=["a"])
    thief = world.store.acquire("default.shard-1-of-4", "thief", timedelta(seconds=300))
    assert thief is not None
    for k in (0, 2, 3):
        assert world.store.acquire(f"default.shard-{k}-of-4", "a", timedelta(seconds=30))

    engine.tick()

    claimed = {e.schedule_name for e in world.executions()}
    assert claimed and not {n for n in claimed if Shard(1, 4).holds(n)}
    assert 1 not in engine.led_shards()
    # Each claim carries its own shard's token: the fence it was checked against.
    for execution in world.executions():
        shard = next(k for k in range(4) if Shard(k, 4).holds(execution.schedule_name))
        info = world.store.inspect(f"default.shard-{shard}-of-4")
        assert info is not None and execution.token == info.token


# -- several replicas ---------------------------------------------------------------------------

def test_two_and_three_replicas_share_four_shards_fairly(world: World) -> None:
    a = world.replica("a", settings=sharded())
    a.tick()
    assert a.led_shards() == [0, 1, 2, 3]
    b = world.replica("b", settings=sharded())
    b.tick()  # a member now, but every shard is held
    assert b.led_shards() == []
    world.advance(10)  # a's next look: above its quota of 2, it gives two back
    a.tick()
    b.tick()
    assert sorted(len(v) for v in leading(world).values()) == [2, 2]

    c = world.replica("c", settings=sharded())
    c.tick()
    world.advance(10)
    for engine in (a, b, c):
        engine.tick()
    c.tick()
    counts = leading(world)
    assert sorted(len(v) for v in counts.values()) == [1, 1, 2]
    assert sorted(k for v in counts.values() for k in v) == [0, 1, 2, 3]


def test_a_frozen_replicas_shards_are_taken_over_when_its_leases_expire(world: World) -> None:
    names = spread(world)
    a, b = two_sharing(world)
    assert sorted(len(v) for v in leading(world).values()) == [2, 2]
    lost = a.led_shards()

    world.advance(29, frozen=["a"])
    b.tick()
    assert b.led_shards() != [0, 1, 2, 3]  # a's leases still run
    world.advance(1.1, frozen=["a"])  # ...and now they have run out
    b.tick()

    assert b.led_shards() == [0, 1, 2, 3]
    assert set(lost) <= set(b.led_shards())
    # a wakes: past its local deadline it claims nothing, and finds its shards taken.
    a.tick()
    claims = Counter(e.key for e in world.executions())
    assert all(n == 1 for n in claims.values())
    assert {e.schedule_name for e in world.executions()} == set(names)


def test_a_replica_closing_releases_its_shards_for_the_others_at_once(world: World) -> None:
    a, b = two_sharing(world)

    a.close()
    assert b.shards is not None
    b.shards.ask_soon()  # what Engine.wait does when the release's announcement wakes it
    b.tick()

    assert b.led_shards() == [0, 1, 2, 3]


def test_only_shard_zeros_leader_syncs_the_config(world: World) -> None:
    spec = ScheduleSpec(name="cleanup", task="app.cleanup", trigger=EVERY_MINUTE)
    a = world.replica("a", settings=sharded(2), config=[spec])
    b = world.replica("b", settings=sharded(2), config=[spec])
    a.tick()
    b.tick()
    world.advance(10)
    a.tick()
    b.tick()
    syncer, other = (a, b) if 0 in a.led_shards() else (b, a)
    assert other.led_shards() == [1]

    assert syncer.last_sync is not None and syncer.last_sync.created == ("cleanup",)
    assert other.last_sync is None
    assert world.store.get_schedule("cleanup").next_run_at == minute(1)


def test_claims_left_pending_are_each_resent_once_by_their_shards_leaders(world: World) -> None:
    names = spread(world, count=2, per_shard=1)
    failing = RecordingSubmitter(failing=True)
    a = world.replica("a", settings=sharded(2), submitter=failing)
    world.advance(31)
    a.tick()  # claims both, the broker refuses: both stay claimed
    assert {e.schedule_name for e in world.executions()} == set(names)

    submitters = {"b": RecordingSubmitter(), "c": RecordingSubmitter()}
    a.close()
    for holder, submitter in submitters.items():
        world.replica(holder, settings=sharded(2), submitter=submitter)
    for _ in range(3):
        world.advance(10)
        for holder in submitters:
            world.replicas[holder].tick()

    sent = {holder: [key.split(":")[0] for key, _ in s.sent]
            for holder, s in submitters.items()}
    # Each sent once, by whoever led its shard then: a shard's pending rows are its own.
    assert sorted(sent["b"] + sent["c"]) == sorted(names)


def test_a_replica_leading_only_other_shards_sleeps_until_its_next_due_run(world: World) -> None:
    a, b = two_sharing(world, 2)
    other = a if a.led_shards() == [1] else b
    assert other.led_shards() == [1]
    world.create(names_in(Shard(1, 2), 1)[0], next_at=world.now + timedelta(seconds=3))

    # No pruning or lost-run look of its own to wake for: only its shard's next run.
    assert other.tick() == pytest.approx(3.0)


def test_shard_zeros_leader_forgets_the_member_rows_of_replicas_gone(world: World) -> None:
    a = world.replica("a", settings=sharded(2))
    b = world.replica("b", settings=sharded(2))
    c = world.replica("c", settings=sharded(2))
    for engine in (a, b, c):
        engine.tick()
    c.close()  # released cleanly
    world.advance(31, frozen=["b"])  # b dies: its rows run out
    a.tick()

    assert a.led_shards() == [0, 1]
    assert [row.name for row in world.store.list_leases("default.")] == [
        "default.replicas-of-2.a", "default.shard-0-of-2", "default.shard-1-of-2"]


def test_replicas_of_two_shard_counts_at_once_never_claim_an_occurrence_twice(
        world: World) -> None:
    # A rolling change of the count: replicas of the old and the new count lead under
    # different leases at the same time; the unique key and the version compare-and-set
    # keep every occurrence claimed once.
    names = [f"job-{n}" for n in range(12)]
    for name in names:
        world.create(name)
    old = [world.replica(f"old-{n}", settings=sharded(2)) for n in range(2)]
    new = [world.replica(f"new-{n}", settings=sharded(3)) for n in range(2)]
    for _ in range(12):
        world.advance(10)
        for engine in (*old, *new):
            engine.tick()
    assert all(engine.led_shards() for engine in (*old, *new))

    executions = world.executions()
    assert len({e.key for e in executions}) == len(executions)
    per_schedule = Counter(e.schedule_name for e in executions)
    # Every minute point from 00:01 to 00:02 (the clock ran two minutes from 00:00:30).
    assert per_schedule == dict.fromkeys(names, 2)


def test_a_look_between_renewals_reads_the_sharding_and_renews_nothing(world: World) -> None:
    a = world.replica("a", settings=sharded(2))
    a.tick()
    before = {row.name: row.expires_at for row in world.store.list_leases("default.")}
    world.advance(3)
    assert a.shards is not None
    a.shards.ask_soon()  # say, an edit announced
    a.tick()

    assert {row.name: row.expires_at for row in world.store.list_leases("default.")} == before
    world.advance(7)  # the renew interval: everything renewed, the member row first
    a.tick()
    after = {row.name: row.expires_at for row in world.store.list_leases("default.")}
    assert all(after[name] > before[name] for name in before)


@pytest.mark.parametrize("mode", [ScheduleMode.FIXED_DELAY, ScheduleMode.FIXED_RATE])
def test_a_run_end_that_moves_its_schedule_wakes_the_other_shards_leaders(
        world: World, monkeypatch: pytest.MonkeyPatch, mode: ScheduleMode) -> None:
    name = names_in(Shard(1, 2), 1)[0]
    world.create(name, mode=mode)
    a, b = two_sharing(world, 2)
    leader0 = a if 0 in a.led_shards() else b
    world.advance(21)  # minute 1: the shard-1 schedule is claimed and sent
    for engine in (a, b):
        engine.tick()
    key = world.executions(name)[0].key
    world.advance(20)  # the run takes 20 s
    world.store.record_runs([
        RunEvent.started(key, run="r", worker="w", age=timedelta(0)),
        RunEvent.finished(key, run="r", worker="w", age=timedelta(0),
                          outcome=RunOutcome.SUCCEEDED)])
    woken: list[int] = []
    monkeypatch.setattr(world.store, "notify", lambda: woken.append(1))

    leader0.tick()

    # A fixed delay counts from the end, which the settlement writes: the leader of shard 1
    # must hear of it. A fixed-rate run's end changes nothing on its schedule: no one is woken.
    assert bool(woken) is (mode is ScheduleMode.FIXED_DELAY)


def test_a_backfill_is_drained_by_its_schedules_shard_leader_only(world: World) -> None:
    name = names_in(Shard(1, 2), 1)[0]
    world.create(name, next_at=minute(60))
    submitters = {"a": RecordingSubmitter(), "b": RecordingSubmitter()}
    engines = {h: world.replica(h, settings=sharded(2), submitter=s)
               for h, s in submitters.items()}
    for _ in range(2):
        for engine in engines.values():
            engine.tick()
        world.advance(10)
    owner = next(h for h, e in engines.items() if e.led_shards() == [1])
    world.store.create_backfill(BackfillRequest(
        schedule_name=name, start=minute(-3), end=minute(-1), total=3))

    for engine in engines.values():
        engine.tick()

    sent = {h: [key for key, _ in s.sent] for h, s in submitters.items()}
    assert len(sent[owner]) == 3 and all(key.startswith(f"{name}:") for key in sent[owner])
    assert [key for h, keys in sent.items() if h != owner for key in keys] == []


def test_shares_stay_fair_as_replicas_join_stop_and_die(world: World) -> None:
    count = 7
    alive: list[str] = []

    def settle_down() -> None:
        # A few renew intervals: every replica looks, gives back, takes.
        for _ in range(4):
            world.advance(10, frozen=[h for h in world.replicas if h not in alive])
            for holder in alive:
                world.replicas[holder].tick()

    def shares() -> list[int]:
        led = {h: world.replicas[h].led_shards() for h in alive}
        assert sorted(k for v in led.values() for k in v) == list(range(count)), led
        return sorted(len(v) for v in led.values())

    for n in range(5):
        holder = f"r{n}"
        world.replica(holder, settings=sharded(count))
        alive.append(holder)
        settle_down()
        assert max(shares()) - min(shares()) <= 1
    assert shares() == [1, 1, 1, 2, 2]

    world.replicas["r1"].close()
    alive.remove("r1")
    settle_down()
    assert shares() == [1, 2, 2, 2]

    alive.remove("r3")  # dies: frozen from now on, its leases run out
    settle_down()
    assert shares() == [2, 2, 3]


def test_a_crashed_replicas_shards_are_taken_over_as_its_session_ends(world: World) -> None:
    names = spread(world)
    a, b = two_sharing(world)
    lost = a.led_shards()
    assert lost and len(b.led_shards()) == 2

    # a dies while b waits; its leases and member row have ~20 s left.
    crash = threading.Timer(0.05, world.store.end_session, ("a",))
    crash.start()
    assert b.wait(10)
    crash.join()
    b.tick()

    assert b.led_shards() == [0, 1, 2, 3], "took the crashed replica's shards at once"
    # Its member row still runs for ~20 s: it stays no member, and b keeps every shard.
    world.advance(11, frozen=["a"])
    b.tick()
    assert b.led_shards() == [0, 1, 2, 3]
    world.advance(60, frozen=["a"])
    b.tick()
    claims = Counter(e.key for e in world.executions())
    assert all(n == 1 for n in claims.values())
    assert {e.schedule_name for e in world.executions()} == set(names)


def test_the_member_row_of_a_shards_previous_holder_is_kept_for_health(world: World) -> None:
    a, b = two_sharing(world)
    lost = b.led_shards()
    world.advance(31, frozen=["b"])  # b dies leading: its rows run out, a takes its shards
    a.tick()
    a.tick()

    assert a.led_shards() == [0, 1, 2, 3]
    names = [row.name for row in world.store.list_leases("default.")]
    # Kept, silent: `goatbeat health --holder b` tells a replaced leader from a clean stop.
    assert "default.replicas-of-4.b" in names
    assert {world.store.inspect(f"default.shard-{k}-of-4").previous_holder  # type: ignore[union-attr]
            for k in lost} == {"b"}
