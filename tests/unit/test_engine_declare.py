"""Config declared anew while the engine runs (``Engine.declare``, what the scheduler's ``add``
and ``merge_inplace`` call): a leader syncs it at its next tick, before it dispatches more; a
standby keeps it until it takes the lease, and syncs it then."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from goatbeat_celery.core.loop.engine import Engine
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSource, ScheduleSpec, TriggerSpec
from goatbeat_celery.testing import ManualClock, MemoryStore, RecordingSubmitter, build_engine

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
SETTINGS = Settings(lease_ttl=10, lease_renew_interval=3, max_interval=60)


def entry(name: str, every: float = 1.0) -> ScheduleSpec:
    return ScheduleSpec(name=name, task="proj.tick", source=ScheduleSource.CONFIG,
                        trigger=TriggerSpec(kind="interval", params={"every": every}))


def replica(store: MemoryStore, clocks: ManualClock, holder: str,
            *names: str) -> Engine:
    return build_engine(store, settings=SETTINGS, holder=holder,
                        monotonic=clocks.monotonic_for(holder),
                        config_schedules=[entry(name) for name in names])


def sent(engine: Engine) -> set[str]:
    submitter = engine.submitter
    assert isinstance(submitter, RecordingSubmitter)
    return {dispatch.execution.schedule_name for dispatch in submitter.dispatches}


def enabled(store: MemoryStore) -> set[str]:
    return {row.name for row in store.list_schedules() if row.spec.enabled}


def test_a_leader_syncs_a_declared_entry_at_its_next_tick_and_sends_it() -> None:
    clocks = ManualClock(T0)
    store = MemoryStore(clocks)
    leader = replica(store, clocks, "a", "configured")
    leader.tick()
    assert enabled(store) == {"configured"}

    leader.declare([entry("configured"), entry("added")])
    leader.tick()  # synced first, within the renew interval, under the grant held
    assert enabled(store) == {"configured", "added"}
    clocks.advance(1.0)
    leader.tick()

    assert sent(leader) >= {"configured", "added"}


def test_an_entry_no_longer_declared_is_disabled_and_no_longer_sent() -> None:
    clocks = ManualClock(T0)
    store = MemoryStore(clocks)
    leader = replica(store, clocks, "a", "kept", "dropped")
    leader.tick()

    leader.declare([entry("kept")])
    leader.tick()
    submitter = leader.submitter
    assert isinstance(submitter, RecordingSubmitter)
    submitter.dispatches.clear()
    clocks.advance(2.0)
    leader.tick()

    assert enabled(store) == {"kept"}
    assert store.get_schedule("dropped").spec.source is ScheduleSource.CONFIG
    assert sent(leader) == {"kept"}


def test_a_standby_syncs_what_it_declared_when_it_takes_the_lease() -> None:
    clocks = ManualClock(T0)
    store = MemoryStore(clocks)
    leader = replica(store, clocks, "a", "configured")
    standby = replica(store, clocks, "b", "configured")
    leader.tick()
    standby.tick()
    standby.declare([entry("configured"), entry("standby's")])
    standby.tick()
    assert enabled(store) == {"configured"}  # not its to sync while it does not lead

    leader.close()
    clocks.advance(SETTINGS.lease_renew_interval.total_seconds())
    standby.tick()

    assert standby.is_leader()
    assert enabled(store) == {"configured", "standby's"}


def test_declaring_from_a_changed_registry_rebuilds_the_triggers() -> None:
    clocks = ManualClock(T0)
    store = MemoryStore(clocks)
    leader = replica(store, clocks, "a")
    leader.tick()

    leader.declare([entry("slow", every=3600.0)], leader.triggers)
    leader.tick()

    row = store.get_schedule("slow")
    assert row.next_run_at is not None
    assert row.next_run_at - T0 <= timedelta(hours=1)
