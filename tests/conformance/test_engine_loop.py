"""The whole loop over each store: a real Engine leads and dispatches, a second one stands by
and takes over on release without sending any occurrence twice."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta

from goatbeat_celery.core.loop.engine import Engine
from goatbeat_celery.core.rules.misfire import first_occurrence
from goatbeat_celery.core.rules.shards import sharding_prefix, standbys
from goatbeat_celery.core.rules.triggers import IntervalTrigger
from goatbeat_celery.core.types.execution import ExecutionState, idempotency_key
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import MisfirePolicy
from goatbeat_celery.testing import build_engine

from .conftest import Store, StoreClock
from .support import RecordingSubmitter, interval_spec

EVERY = 1.0
#: Renewed every second, so the loop runs in seconds on the database clock. The ttl leaves
#: room for both engines' ticks between two renewals on a busy machine (on MySQL a standby's
#: tick may wait up to a second for the leader's named lock, in this one thread), so the leader
#: keeps its lease until it releases it.
SETTINGS = Settings(lease_ttl=10, lease_renew_interval=1)
#: Give up on a loop after this long on the store's clock.
LOOP_LIMIT = 30.0


def drive(engines: Sequence[Engine], clock: StoreClock, until: Callable[[], bool]) -> None:
    """Tick the engines and let the store's clock run to the earliest wake-up, until done."""
    started = clock.monotonic()
    while not until():
        assert clock.monotonic() - started < LOOP_LIMIT, "the loop made no progress"
        waits = [engine.tick() for engine in engines]
        clock.advance(max(0.01, min(waits)))


def test_an_engine_dispatches_and_a_standby_takes_over_on_release(
    store: Store, clock: StoreClock
) -> None:
    trigger = IntervalTrigger(timedelta(seconds=EVERY))
    first, _ = first_occurrence(trigger, store.now())
    # Every point is owed, however late a busy machine gets to it: a gap in the keys can only
    # be one the change of leader made (policy "latest" would drop a point a slow tick passed).
    store.create_schedule(interval_spec("heartbeat", EVERY, misfire_policy=MisfirePolicy.ALL),
                          next_occurrence_at=first, next_run_at=first)
    sent_a, sent_b = RecordingSubmitter(), RecordingSubmitter()
    leader = build_engine(store, clock=clock, submitter=sent_a, settings=SETTINGS, holder="a")
    standby = build_engine(store, clock=clock, submitter=sent_b, settings=SETTINGS, holder="b")

    drive([leader, standby], clock, until=lambda: len(sent_a.sent) >= 3)

    assert leader.is_leader() and not standby.is_leader()
    assert sent_b.sent == []
    assert {token for _, token in sent_a.sent} == {1}
    leader.close()
    drive([standby], clock, until=lambda: len(sent_b.sent) >= 3)

    assert standby.grant is not None and standby.grant.token == 2
    assert {token for _, token in sent_b.sent} == {2}
    keys = sent_a.keys + sent_b.keys
    assert len(keys) == len(set(keys)), "an occurrence was dispatched twice"
    # Nothing was lost across the change of leader: the keys follow the grid without a gap.
    assert keys == [idempotency_key("heartbeat", first + timedelta(seconds=EVERY * i))
                    for i in range(len(keys))]
    executions = store.executions(schedule_name="heartbeat", limit=100)
    assert sorted(e.key for e in executions) == sorted(keys)
    assert all(e.state is ExecutionState.SUBMITTED for e in executions)


def _standbys(store: Store, leaders: set[str]) -> list[str]:
    rows = store.list_leases(sharding_prefix(SETTINGS.lease_name))
    found = standbys(rows, lease_name=SETTINGS.lease_name, count=1, ttl=SETTINGS.lease_ttl,
                     leaders=leaders)
    now = store.now()
    for replica in found:
        # Seen by the store's clock, within the ttl that makes it live.
        assert now - SETTINGS.lease_ttl <= replica.seen_at <= now
    return [replica.holder for replica in found]


def test_every_replica_shows_its_presence_and_the_leader_forgets_those_gone(
    store: Store, clock: StoreClock
) -> None:
    leader = build_engine(store, clock=clock, settings=SETTINGS, holder="a")
    b = build_engine(store, clock=clock, settings=SETTINGS, holder="b")
    c = build_engine(store, clock=clock, settings=SETTINGS, holder="c")
    drive([leader, b, c], clock, until=leader.is_leader)
    for engine in (b, c):
        engine.tick()

    assert _standbys(store, {"a"}) == ["b", "c"]
    assert _standbys(store, set()) == ["a", "b", "c"]

    c.close()  # a clean stop gives its row back at once
    assert _standbys(store, {"a"}) == ["b"]

    # b dies: its row outlives it by the ttl at most, then the leader forgets it.
    member = f"{SETTINGS.lease_name}.replicas-of-1.b"
    drive([leader], clock, until=lambda: not any(
        row.name == member for row in store.list_leases(member)))
    assert _standbys(store, {"a"}) == []
    leader.close()
