"""The engine loop with the memory store, injected clocks and a recording submitter.

Two clocks are injected: the store's (which judges lease expiry and due-ness, like PostgreSQL's
``now()``) and each replica's monotonic clock (which judges its local deadline). Moving them
separately models a replica that was frozen while the rest of the world went on.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from goatbeat_celery import cron
from goatbeat_celery.core.loop.submission import SUBMIT_TIMEOUT_MAX
from goatbeat_celery.core.rules.triggers import TriggerRegistry
from goatbeat_celery.core.types.claims import Dispatch, SubmitResult
from goatbeat_celery.core.types.errors import StoreUnavailable
from goatbeat_celery.core.types.execution import ExecutionState, idempotency_key
from goatbeat_celery.core.types.lease import LeaseGrant, LeaseInfo
from goatbeat_celery.core.types.set_aside import SET_ASIDE_RETRY
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSource, ScheduleSpec, TriggerSpec
from goatbeat_celery.testing import MemoryStore
from tests.support.fields import only_fields

from .doubles import LeaseRecordingObserver
from .engine_world import (
    EVERY_MINUTE,
    T0,
    UTC,
    RecordingSubmitter,
    World,
    minute,
    sent_allowing_no_task,
)


class FlakyLease:
    """The memory store's lease, made unreachable on demand."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.down = False
        self.releases = 0

    def acquire_many(self, names: Sequence[str], holder: str,
                     ttl: timedelta) -> list[LeaseGrant | None]:
        return [self.acquire(name, holder, ttl) for name in names]

    def acquire_watching(self, names: Sequence[str], holder: str, ttl: timedelta,
                         prefix: str, kept: Collection[str] = ()
                         ) -> tuple[list[LeaseGrant | None], bool]:
        grants = self.acquire_many(names, holder, ttl)
        return grants, self.store.acquire_watching([], holder, ttl, prefix, kept)[1]

    def acquire(self, name: str, holder: str, ttl: timedelta) -> LeaseGrant | None:
        if self.down:
            raise StoreUnavailable("connection refused")
        return self.store.acquire(name, holder, ttl)

    def release(self, grant: LeaseGrant) -> bool:
        self.releases += 1
        return self.store.release(grant)

    def inspect(self, name: str) -> Any:
        return self.store.inspect(name)

    def list_leases(self, prefix: str) -> list[LeaseInfo]:
        if self.down:
            raise StoreUnavailable("connection refused")
        return self.store.list_leases(prefix)

    def forget(self, name: str) -> bool:
        return self.store.forget(name)


@pytest.fixture
def world() -> World:
    return World()


# -- leadership and config sync ----------------------------------------------------------------

def test_the_first_replica_becomes_leader_and_syncs_its_config(world: World) -> None:
    spec = ScheduleSpec(name="cleanup", task="app.cleanup", trigger=EVERY_MINUTE)
    observer = LeaseRecordingObserver()
    engine = world.replica("a", config=[spec], observer=observer)

    engine.tick()

    assert engine.is_leader()
    assert engine.grant is not None and engine.grant.token == 1
    assert observer.of("acquired") == [1]
    assert engine.last_sync is not None and engine.last_sync.created == ("cleanup",)
    stored = world.store.get_schedule("cleanup")
    assert stored.spec.source is ScheduleSource.CONFIG
    assert stored.next_run_at == minute(1)  # the next grid point after 00:00:30


def test_a_replica_restarting_keeps_the_schedule_where_it_was(world: World) -> None:
    spec = ScheduleSpec(name="cleanup", task="app.cleanup", trigger=EVERY_MINUTE)
    first = world.replica("a", config=[spec])
    first.tick()
    first.close()
    world.advance(20)

    second = world.replica("b", config=[spec])
    second.tick()

    assert second.last_sync is not None and second.last_sync.unchanged == ("cleanup",)
    assert world.store.get_schedule("cleanup").next_run_at == minute(1)


def test_a_standby_waits_for_its_next_renewal(world: World) -> None:
    leader = world.replica("a")
    standby = world.replica("b")
    leader.tick()

    first = standby.tick()
    world.advance(4)
    second = standby.tick()

    assert not standby.is_leader()
    assert (first, second) == (10.0, 6.0)


def test_a_standby_sleeps_no_longer_than_max_interval(world: World) -> None:
    world.replica("a").tick()
    standby = world.replica("b", settings=Settings(max_interval=3))

    assert standby.tick() == 3.0


def test_a_standby_takes_over_once_the_lease_expires_on_the_store_clock(world: World) -> None:
    leader = world.replica("a")
    standby = world.replica("b")
    leader.tick()
    standby.tick()

    world.advance(30, frozen=["a"])  # the leader hangs; its lease runs out
    standby.tick()

    assert standby.is_leader()
    assert standby.grant is not None and standby.grant.token == 2


# -- dispatching -------------------------------------------------------------------------------

def test_due_occurrences_are_submitted_under_their_idempotency_keys(world: World) -> None:
    world.create("tick")
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter)
    engine.tick()
    assert submitter.calls == []

    world.advance(30)  # 00:01:00, the first occurrence
    engine.tick()

    key = idempotency_key("tick", minute(1))
    assert key == "tick:2026-01-01T00:01:00+00:00"
    assert submitter.keys == [key]
    assert submitter.calls[0][1] == 1  # the fencing token
    [execution] = world.executions("tick")
    assert (execution.key, execution.state, execution.token) == \
        (key, ExecutionState.SUBMITTED, 1)
    assert world.store.get_schedule("tick").next_run_at == minute(2)


def test_each_occurrence_is_dispatched_once(world: World) -> None:
    world.create("tick")
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter)
    for _ in range(5 * 6):
        engine.tick()
        world.advance(10)

    assert submitter.keys == [idempotency_key("tick", minute(n)) for n in range(1, 6)]


def test_the_dispatch_carries_the_task_and_its_arguments(world: World) -> None:
    world.create("tick", options={"queue": "q1"})
    world.advance(30)
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter)

    engine.tick()

    [dispatch] = submitter.dispatches
    assert (dispatch.task, dispatch.args, dict(dispatch.kwargs), dict(dispatch.options)) == \
        ("app.tick", (1,), {"k": "v"}, {"queue": "q1"})
    only_fields(dispatch.execution)


def test_observers_hear_of_claims_and_submissions(world: World) -> None:
    world.create("tick")
    world.advance(30)
    observer = LeaseRecordingObserver()
    engine = world.replica("a", observer=observer)

    engine.tick()

    key = idempotency_key("tick", minute(1))
    assert observer.of("claimed") == [(key,)]
    [[record]] = observer.of("submitted")
    assert (record.key, record.occurrence_at, record.due_at, record.token, record.attempt) == \
        (key, minute(1), minute(1), 1, 1)
    assert record.error is None and record.lateness == timedelta(0)
    only_fields(record)


def test_an_offset_delays_the_run_but_not_the_key(world: World) -> None:
    world.create("late", offset=timedelta(seconds=15), next_at=minute(1))
    store = world.store
    store.replace_schedule(store.get_schedule("late").spec, next_occurrence_at=minute(1),
                           next_run_at=minute(1) + timedelta(seconds=15))
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter)

    world.advance(30)  # 00:01:00: the point, not yet due
    engine.tick()
    assert submitter.keys == []
    world.advance(15)
    engine.tick()

    assert submitter.keys == [idempotency_key("late", minute(1))]
    [execution] = world.executions("late")
    assert execution.due_at == minute(1) + timedelta(seconds=15)


def test_a_backlog_after_downtime_runs_once_and_counts_the_missed_points(world: World) -> None:
    world.create("tick")
    observer = LeaseRecordingObserver()
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter, observer=observer)

    world.advance(60 * 60)  # 01:00:30: an hour of points, the last one on time
    engine.tick()

    assert submitter.keys == [idempotency_key("tick", minute(60))]
    assert observer.of("missed") == [("tick", 59)]
    assert world.store.get_schedule("tick").total_missed == 59
    assert world.executions("tick")[0].missed == 59


def test_tick_returns_the_seconds_until_the_next_due_instant(world: World) -> None:
    world.create("tick")
    engine = world.replica("a", settings=Settings(max_interval=60, lease_ttl=120,
                                                  lease_renew_interval=40))

    assert engine.tick() == 30.0  # due at 00:01:00, it is 00:00:30
    world.advance(23.5)
    assert engine.tick() == 6.5


def test_tick_never_sleeps_past_the_next_lease_renewal(world: World) -> None:
    world.create("tick", next_at=minute(10))
    engine = world.replica("a")

    assert engine.tick() == 10.0  # the renew interval, though the schedule is 9.5 min away
    world.advance(7)
    assert engine.tick() == 3.0


def test_with_nothing_scheduled_tick_sleeps_until_the_renewal(world: World) -> None:
    engine = world.replica("a")

    assert engine.tick() == 10.0


def test_a_leader_that_hears_every_change_sleeps_past_max_interval_until_the_renewal(
        world: World) -> None:
    world.create("tick", next_at=minute(10))
    engine = world.replica("a", settings=Settings(max_interval=5), runs=world.store)
    assert engine.tick() == 5.0  # this store hears no other process: it looks every 5 s

    world.store.wakes_on_every_change = True  # as PostgreSQL's NOTIFY does
    world.advance(5)
    assert engine.tick() == 5.0  # the renewal, 10 s after the first tick
    world.advance(5)
    assert engine.tick() == 10.0  # renewed: nothing to do before the next renewal


def test_a_leader_that_hears_every_change_still_wakes_for_its_periodic_looks(
        world: World) -> None:
    world.store.wakes_on_every_change = True
    engine = world.replica("a", settings=Settings(max_interval=5, lease_ttl=300,
                                                  lease_renew_interval=100,
                                                  heartbeat_interval=7, run_lost_after=60),
                           runs=world.store)

    assert engine.tick() == 7.0  # the next look for lost runs
    world.advance(7)
    assert engine.tick() == 7.0
    world.advance(7 * 8)  # past the minute: pruning, looked at with this wake
    assert engine.tick() == pytest.approx(7.0)


# -- the local deadline ------------------------------------------------------------------------

def test_within_the_local_deadline_a_failed_renewal_keeps_claiming(world: World) -> None:
    lease = FlakyLease(world.store)
    submitter = RecordingSubmitter()
    engine = world.replica("a", lease=lease, submitter=submitter)
    engine.tick()
    due_at = T0 + timedelta(seconds=40)
    world.create("tick", next_at=due_at)

    lease.down = True
    world.advance(15)  # renewal due (10 s) and failing; the deadline is at 20 s
    engine.tick()

    assert engine.is_leader()
    assert submitter.keys == [idempotency_key("tick", due_at)]


def test_past_the_local_deadline_nothing_is_claimed(world: World) -> None:
    lease = FlakyLease(world.store)
    submitter = RecordingSubmitter()
    observer = LeaseRecordingObserver()
    engine = world.replica("a", lease=lease, submitter=submitter, observer=observer)
    engine.tick()
    world.create("tick", next_at=minute(1))

    lease.down = True
    world.advance(21)  # past ttl - renew interval = 20 s since the lease was asked for
    sleep = engine.tick()

    assert not engine.is_leader()
    assert observer.of("lost") == ["store unreachable past the local deadline"]
    assert submitter.calls == []
    assert world.executions() == []
    assert sleep <= 1.0  # tries the lease again soon...
    assert 0 < engine.tick() <= 1.0  # ...without spinning while the store is down


def test_the_local_deadline_counts_from_when_the_lease_was_asked_for(world: World) -> None:
    engine = world.replica("a")
    engine.tick()

    world.move_monotonic("a", 19.9)
    assert engine.is_leader()
    world.move_monotonic("a", 0.1)
    assert not engine.is_leader()


def test_a_submission_is_bounded_by_the_local_deadline(world: World) -> None:
    world.create("tick")
    world.advance(30)
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter,
                           settings=Settings(lease_ttl=6, lease_renew_interval=2))

    engine.tick()

    [(_, _, timeout)] = submitter.calls
    assert 0 < timeout <= 4.0  # ttl - renew interval, less a margin for bookkeeping


def test_a_long_lease_still_caps_one_submission(world: World) -> None:
    world.create("tick")
    world.advance(30)
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter,
                           settings=Settings(lease_ttl=600, lease_renew_interval=60))

    engine.tick()

    assert submitter.calls[0][2] == SUBMIT_TIMEOUT_MAX


# -- broker failures ---------------------------------------------------------------------------

def test_a_broker_failure_leaves_the_claim_and_resubmits_the_same_key(world: World) -> None:
    world.create("tick")
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter)
    key = idempotency_key("tick", minute(1))

    submitter.failing = True
    world.advance(30)
    sleep = engine.tick()

    [execution] = world.executions("tick")
    assert execution.state is ExecutionState.CLAIMED
    assert execution.last_error == "connection refused"
    assert sleep == 1.0  # the retry backoff

    world.advance(0.5)
    engine.tick()  # still backing off: no new attempt
    assert submitter.keys == [key]

    submitter.failing = False
    world.advance(0.5)
    engine.tick()

    assert submitter.keys == [key, key]
    [execution] = world.executions("tick")
    assert (execution.state, execution.attempts) == (ExecutionState.SUBMITTED, 2)


def test_repeated_broker_failures_back_off_exponentially_up_to_a_cap(world: World) -> None:
    world.create("tick")
    submitter = RecordingSubmitter()
    submitter.failing = True
    engine = world.replica("a", submitter=submitter,
                           settings=Settings(max_interval=60, retry_backoff=1,
                                             retry_backoff_max=4, lease_ttl=300,
                                             lease_renew_interval=100))
    world.advance(30)

    sleeps = []
    for _ in range(5):
        sleep = engine.tick()
        sleeps.append(sleep)
        world.advance(sleep)

    assert sleeps == [1.0, 2.0, 4.0, 4.0, 4.0]
    assert len(submitter.calls) == 5


class SlowBroker(RecordingSubmitter):
    """Takes only the first ``room`` messages of a batch before the batch's time runs out."""

    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = room

    def answer(self, dispatches: Sequence[Dispatch]) -> SubmitResult:
        taken, late = dispatches[:self.room], dispatches[self.room:]
        return SubmitResult(accepted=[d.key for d in taken],
                            failed={d.key: "timed out before the lease's local deadline"
                                    for d in late})


def test_a_batch_cut_short_by_its_time_sends_the_rest_at_once_without_backing_off(
        world: World) -> None:
    for name in ("a", "b", "c"):
        world.create(name)
    submitter = SlowBroker(room=2)
    engine = world.replica("r", submitter=submitter,
                           settings=Settings(max_interval=60, retry_backoff=30,
                                             retry_backoff_max=30))
    world.advance(30)

    sleep = engine.tick()

    # The broker took two of three: it is up, so the third goes at once, not in 30 s.
    assert sleep == 0.0
    assert len(submitter.sent) == 2
    engine.tick()
    assert len(submitter.calls) == 2 and len(submitter.calls[1].keys) == 1
    assert {e.state for e in world.executions()} == {ExecutionState.SUBMITTED}


def test_claims_made_during_a_broker_outage_wait_for_it_to_end(world: World) -> None:
    world.create("tick")
    world.create("other", next_at=minute(1) + timedelta(seconds=10))
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter,
                           settings=Settings(max_interval=60, retry_backoff=30,
                                             retry_backoff_max=30))
    submitter.failing = True
    world.advance(30)
    engine.tick()  # "tick" claimed, refused
    world.advance(10)
    engine.tick()  # "other" claimed during the backoff: not sent
    assert len(submitter.calls) == 1
    assert len(world.executions()) == 2

    submitter.failing = False
    world.advance(20)
    engine.tick()

    assert submitter.calls[-1][0] == (idempotency_key("tick", minute(1)),
                                      idempotency_key("other", minute(1) + timedelta(seconds=10)))
    assert {e.state for e in world.executions()} == {ExecutionState.SUBMITTED}


def test_a_new_leader_resubmits_what_its_predecessor_left_claimed(world: World) -> None:
    world.create("tick")
    first_submitter, second_submitter = RecordingSubmitter(), RecordingSubmitter()
    first = world.replica("a", submitter=first_submitter)
    second = world.replica("b", submitter=second_submitter)
    first_submitter.failing = True
    world.advance(30)
    first.tick()
    second.tick()

    world.advance(31, frozen=["a"])  # the first leader dies without releasing
    second.tick()

    key = idempotency_key("tick", minute(1))
    assert second_submitter.calls[0] == ((key,), 2, second_submitter.calls[0][2])
    execution = next(e for e in world.executions("tick") if e.key == key)
    assert (execution.state, execution.token, execution.attempts) == \
        (ExecutionState.SUBMITTED, 2, 2)


# -- fencing -----------------------------------------------------------------------------------

def test_a_stale_leader_is_refused_and_steps_down(world: World) -> None:
    world.create("tick")
    stale_submitter = RecordingSubmitter()
    observer = LeaseRecordingObserver()
    stale = world.replica("a", submitter=stale_submitter, observer=observer)
    successor = world.replica("b")
    stale.tick()

    # "a" is frozen (a suspended VM: its monotonic clock stood still for most of it) while
    # the lease expires on the store clock and "b" takes over.
    world.advance(31, frozen=["a"])
    successor.tick()
    world.move_monotonic("a", 5)
    assert stale.is_leader()  # by its own clock it still is

    sleep = stale.tick()

    assert not stale.is_leader() and stale.grant is None
    assert observer.of("lost") == ["fencing token refused"]
    assert sleep == 0.0
    assert stale_submitter.calls == []
    assert all(e.token == 2 for e in world.executions())


def test_a_stale_leaders_claim_inserts_nothing(world: World) -> None:
    stale_submitter = RecordingSubmitter()
    settings = Settings(max_interval=60, retry_backoff=60, retry_backoff_max=60)
    stale = world.replica("a", submitter=stale_submitter, settings=settings)
    stale.tick()
    # A broker failure puts "a" in a long backoff, so its next tick goes straight to claiming
    # (skipping the resubmission, which would be refused first).
    world.create("first", next_at=world.now)
    stale_submitter.failing = True
    stale.tick()
    assert [e.schedule_name for e in world.executions()] == ["first"]

    world.advance(31, frozen=["a"])
    world.replica("b", settings=settings).tick()
    world.create("fresh", next_at=world.now)  # due, and "b" has not looked yet
    world.move_monotonic("a", 5)
    stale.tick()

    assert not stale.is_leader()
    assert world.executions("fresh") == []
    assert world.store.get_schedule("fresh").next_run_at == world.now


def test_a_stale_leader_becomes_a_standby(world: World) -> None:
    stale = world.replica("a")
    successor = world.replica("b")
    stale.tick()
    world.advance(31, frozen=["a"])
    successor.tick()
    world.move_monotonic("a", 5)
    stale.tick()

    world.move_monotonic("a", 10)
    stale.tick()

    assert not stale.is_leader()
    assert successor.is_leader()


# -- close -------------------------------------------------------------------------------------

def test_close_releases_the_lease_so_a_standby_takes_over_at_once(world: World) -> None:
    lease = FlakyLease(world.store)
    observer = LeaseRecordingObserver()
    leader = world.replica("a", lease=lease, observer=observer)
    standby = world.replica("b")
    leader.tick()
    standby.tick()

    leader.close()
    world.advance(10)  # well before the 30 s ttl would have run out
    standby.tick()

    assert standby.is_leader()
    assert observer.of("lost") == ["released"]


def test_close_is_idempotent(world: World) -> None:
    lease = FlakyLease(world.store)
    leader = world.replica("a", lease=lease)
    leader.tick()

    leader.close()
    leader.close()

    assert lease.releases == 2  # its member row, then the lease: each once
    assert not leader.is_leader()
    info = world.store.inspect("default")
    assert info is not None and not info.held


def test_a_closed_engine_does_nothing_more(world: World) -> None:
    world.create("tick")
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter)
    engine.close()

    world.advance(60)
    engine.tick()

    assert submitter.calls == []
    assert world.store.inspect("default") is None


def test_close_survives_an_unreachable_store(world: World) -> None:
    class Unreachable(FlakyLease):
        def release(self, grant: LeaseGrant) -> bool:
            raise StoreUnavailable("gone")

    leader = world.replica("a", lease=Unreachable(world.store))
    leader.tick()

    leader.close()

    assert not leader.is_leader()


# -- schedules that cannot be planned ----------------------------------------------------------

def test_an_unplannable_trigger_postpones_its_schedule_only(world: World) -> None:
    world.create("mystery", trigger=TriggerSpec(kind="solar", params={"event": "dawn"}))
    world.create("tick")
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter)

    world.advance(30)
    engine.tick()

    assert submitter.keys == [idempotency_key("tick", minute(1))]
    postponed = world.store.get_schedule("mystery")
    assert postponed.next_run_at == world.now + SET_ASIDE_RETRY
    assert postponed.next_occurrence_at == minute(1)
    assert world.executions("mystery") == []


def test_an_api_schedule_sending_a_task_outside_the_allow_list_is_postponed(
    world: World,
) -> None:
    world.create("rogue")
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter,
                           task_allowed=lambda task: task.startswith("reports."))

    world.advance(30)
    engine.tick()

    assert submitter.calls == []
    assert world.store.get_schedule("rogue").next_run_at == world.now + SET_ASIDE_RETRY


def test_config_schedules_are_not_subject_to_the_allow_list(world: World) -> None:
    spec = ScheduleSpec(name="cleanup", task="app.cleanup", trigger=EVERY_MINUTE)

    assert sent_allowing_no_task(world, spec) == [idempotency_key("cleanup", minute(1))]


# -- store errors and pruning ------------------------------------------------------------------

def test_a_store_error_while_dispatching_is_retried_soon(world: World,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    engine = world.replica("a")
    engine.tick()

    def unreachable(limit: int) -> Any:
        raise StoreUnavailable("connection reset")

    monkeypatch.setattr(world.store, "due_schedules", unreachable)
    sleep = engine.tick()

    assert 0 < sleep <= 1.0
    assert engine.is_leader()


def test_old_executions_are_pruned(world: World) -> None:
    world.create("tick")
    engine = world.replica("a", settings=Settings(retention=timedelta(days=1)))
    world.advance(30)
    engine.tick()
    old_key = idempotency_key("tick", minute(1))
    assert [e.key for e in world.executions()] == [old_key]

    world.advance(2 * 24 * 3600)
    engine.tick()

    remaining = world.executions()
    assert old_key not in [e.key for e in remaining]
    assert remaining and all(e.claimed_at == world.now for e in remaining)


def test_executions_still_claimed_are_never_pruned(world: World) -> None:
    world.create("tick")
    submitter = RecordingSubmitter()
    submitter.failing = True
    engine = world.replica("a", submitter=submitter,
                           settings=Settings(retention=timedelta(days=1)))
    world.advance(30)
    engine.tick()

    world.advance(2 * 24 * 3600)
    engine.tick()

    assert idempotency_key("tick", minute(1)) in [e.key for e in world.executions()]


def test_manual_runs_are_submitted_with_pending_ones(world: World) -> None:
    world.create("tick", next_at=minute(30))
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter)
    engine.tick()

    manual = world.store.request_run("tick")
    world.advance(1)
    engine.tick()

    assert submitter.keys == [manual.key]
    assert manual.key.startswith("tick:") and manual.key.endswith(":manual")



# -- with cron triggers ------------------------------------------------------------------------

def test_a_cron_schedule_runs_every_real_quarter_hour_through_the_autumn_overlap(
    world: World,
) -> None:
    trigger = TriggerSpec(kind="cron", params={"expression": "*/15 * * * *",
                                               "timezone": "Europe/Paris", "day_or": True})
    world.now = datetime.fromisoformat("2026-10-25T01:50:00+02:00").astimezone(UTC)
    world.create("quarter", trigger=trigger,
                 next_at=datetime.fromisoformat("2026-10-25T02:00:00+02:00"))
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter,
                           triggers=cron.register(TriggerRegistry.default()))

    end = datetime.fromisoformat("2026-10-25T03:05:00+01:00")
    while world.now < end:
        world.advance(max(engine.tick(), 0.001))

    local = [datetime.fromisoformat(key.split(":", 1)[1]).astimezone(ZoneInfo("Europe/Paris"))
             for key in submitter.keys]
    assert [stamp.isoformat() for stamp in local] == [
        "2026-10-25T02:00:00+02:00", "2026-10-25T02:15:00+02:00",
        "2026-10-25T02:30:00+02:00", "2026-10-25T02:45:00+02:00",
        "2026-10-25T02:00:00+01:00", "2026-10-25T02:15:00+01:00",
        "2026-10-25T02:30:00+01:00", "2026-10-25T02:45:00+01:00",
        "2026-10-25T03:00:00+01:00",
    ]
    assert len(set(submitter.keys)) == 9
