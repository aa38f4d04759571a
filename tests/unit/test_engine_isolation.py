"""A schedule is its own failure domain: whatever one schedule holds, the others run.

The memory store accepts any spec through ``create_schedule`` (it trusts its caller), which is
how a row written by hand reaches the engine; the SQL stores' own readings of broken rows are
covered in tests/conformance/test_bad_rows.py.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

import pytest

from goatbeat_celery.core.loop.submission import MAX_SEND_ATTEMPTS
from goatbeat_celery.core.rules.triggers import TriggerRegistry
from goatbeat_celery.core.types.claims import ClaimResult, PlannedClaim
from goatbeat_celery.core.types.errors import StoreError
from goatbeat_celery.core.types.execution import ExecutionState, idempotency_key
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.set_aside import (
    SET_ASIDE_RETRY,
    SET_ASIDE_RETRY_MAX,
    set_aside_delay,
)
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSource, ScheduleSpec, TriggerSpec
from goatbeat_celery.testing import build_engine
from tests.unit.doubles import LeaseRecordingObserver
from tests.unit.engine_world import (
    EVERY_MINUTE,
    T0,
    RecordingSubmitter,
    World,
    minute,
    sent_allowing_no_task,
)


@pytest.fixture
def world() -> World:
    return World()


def create(world: World, name: str, **changes: Any) -> None:
    """Store a spec as a hand-written row would hold it: no validation on the way in."""
    values: dict[str, Any] = {"task": "app.tick", "trigger": EVERY_MINUTE, **changes}
    world.store.create_schedule(ScheduleSpec(name=name, **values),
                                next_occurrence_at=minute(1), next_run_at=minute(1))


def canary_keys(submitter: RecordingSubmitter) -> list[str]:
    return [key for key in submitter.keys if key.startswith("canary:")]


BROKEN_SPECS: dict[str, dict[str, Any]] = {
    "tiny-interval": {"trigger": TriggerSpec(kind="interval", params={"every": 1e-6})},
    "nan-interval": {"trigger": TriggerSpec(kind="interval", params={"every": float("nan")})},
    "text-interval": {"trigger": TriggerSpec(kind="interval", params={"every": "soon"})},
    "empty-trigger": {"trigger": TriggerSpec(kind="invalid", params={})},
    "huge-grace": {"misfire_grace": timedelta(days=10_000)},
    "negative-catchup": {"max_catchup": -5},
    "retry-option": {"options": {"retry": False}},
    "countdown-text": {"options": {"countdown": "soon"}},
    "queue-number": {"options": {"queue": 5}},
    "task-id-option": {"options": {"task_id": "mine"}},
    "headers-list": {"options": {"headers": [1]}},
    "kwargs-list": {"kwargs": [1]},
    "args-text": {"args": "abc"},
    "bad-policy": {"misfire_policy": "sometimes"},
    "empty-task": {"task": ""},
}


@pytest.mark.parametrize("name", sorted(BROKEN_SPECS))
def test_a_broken_schedule_is_set_aside_and_the_others_run(world: World, name: str) -> None:
    world.create("canary")
    create(world, name, **BROKEN_SPECS[name])
    submitter = RecordingSubmitter()
    observer = LeaseRecordingObserver()
    engine = world.replica("a", submitter=submitter, observer=observer)

    world.advance(30)
    engine.tick()

    assert canary_keys(submitter) == [idempotency_key("canary", minute(1))]
    assert not [key for key in submitter.keys if key.startswith(f"{name}:")]
    broken = world.store.get_schedule(name)
    assert broken.fault, "the reason is recorded on the row"
    assert broken.faults == 1 and broken.fault_at == world.now
    assert broken.next_run_at == world.now + SET_ASIDE_RETRY
    assert [n for n, _ in observer.of("set_aside")] == [name]


def test_the_recorded_reason_names_the_offending_field(world: World) -> None:
    world.create("rogue", options={"retry": False, "queue": 5})
    engine = world.replica("a")

    world.advance(30)
    engine.tick()

    fault = world.store.get_schedule("rogue").fault
    assert fault is not None
    assert "options.retry" in fault and "options.queue" in fault
    assert not fault.startswith("schedule "), "the row already says which schedule"


def test_a_schedule_set_aside_again_waits_twice_as_long_up_to_a_bound(world: World) -> None:
    world.create("rogue", options={"retry": False})
    engine = world.replica("a", settings=None)

    world.advance(30)
    engine.tick()
    first = world.store.get_schedule("rogue")
    world.advance((first.next_run_at - world.now).total_seconds())
    engine.tick()
    second = world.store.get_schedule("rogue")

    assert second.faults == 2
    assert second.fault_at == first.fault_at, "set aside since the first time"
    assert second.next_run_at == world.now + 2 * SET_ASIDE_RETRY
    assert set_aside_delay(50) == SET_ASIDE_RETRY_MAX


def test_an_edit_that_fixes_a_schedule_clears_its_fault_and_it_runs(world: World) -> None:
    spec = world.create("rogue", options={"retry": False})
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter)
    world.advance(30)
    engine.tick()
    current = world.store.get_schedule("rogue")

    world.store.replace_schedule(
        ScheduleSpec(name=spec.name, task=spec.task, trigger=spec.trigger),
        next_occurrence_at=minute(2), next_run_at=minute(2), expected_version=current.row_version)
    fixed = world.store.get_schedule("rogue")
    world.advance(60)
    engine.tick()

    assert fixed.fault is None and fixed.faults == 0
    assert idempotency_key("rogue", minute(2)) in submitter.keys


def test_a_trigger_that_raises_anything_sets_only_its_schedule_aside(world: World) -> None:
    def explode(params: Any) -> Any:
        raise RuntimeError("this replica's code has a bug")

    world.create("canary")
    world.create("buggy", trigger=TriggerSpec(kind="buggy", params={}))
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter,
                           triggers=TriggerRegistry.default().with_kind("buggy", explode))

    world.advance(30)
    engine.tick()

    assert canary_keys(submitter) == [idempotency_key("canary", minute(1))]
    assert "RuntimeError: this replica's code has a bug" in (
        world.store.get_schedule("buggy").fault or "")


def test_a_due_schedule_without_a_next_occurrence_starts_again_from_now(world: World) -> None:
    world.create("lost", next_at=minute(1))
    current = world.store.get_schedule("lost")
    world.store.replace_schedule(current.spec, next_occurrence_at=None,
                                 next_run_at=minute(1), expected_version=current.row_version)
    engine = world.replica("a")

    world.advance(30)
    engine.tick()

    restarted = world.store.get_schedule("lost")
    assert restarted.next_occurrence_at == minute(2)
    assert restarted.fault is None


# -- the claim path ----------------------------------------------------------------------------

class RefusingStore:
    """The memory store, except that the database refuses any claim naming ``poison``."""

    def __init__(self, world: World, poison: str) -> None:
        self._store = world.store
        self.poison = poison
        self.claims: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def claim(self, claims: Sequence[PlannedClaim], *, lease: LeaseGrant,
              not_before: datetime | None = None) -> ClaimResult:
        self.claims.append(len(claims))
        if any(claim.schedule_name == self.poison for claim in claims):
            raise StoreError("claim: index row size 2750 exceeds btree maximum 2704")
        return self._store.claim(claims, lease=lease, not_before=not_before)


def test_a_claim_the_database_refuses_is_narrowed_to_the_one_schedule(world: World) -> None:
    for index in range(7):
        world.create(f"ok-{index}")
    world.create("poison")
    store = RefusingStore(world, "poison")
    submitter = RecordingSubmitter()
    # The engine reads and claims through the refusing store; its lease is the real one.
    engine = build_engine(cast(Any, store), lease=world.store, submitter=submitter,
                          settings=Settings(max_interval=60), holder="a",
                          monotonic=world.clock.monotonic_for("a"))
    world.replicas["a"] = engine

    world.advance(30)
    engine.tick()

    assert sorted(submitter.keys) == sorted(
        idempotency_key(f"ok-{index}", minute(1)) for index in range(7))
    fault = world.store.get_schedule("poison").fault or ""
    assert "the database refused its claim" in fault and "index row size" in fault
    assert max(store.claims) == 8 and min(store.claims) == 1


def test_a_store_error_outside_any_schedule_never_escapes_the_tick(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    world.create("canary")
    engine = world.replica("a")
    engine.tick()

    def broken(limit: int) -> Any:
        raise ZeroDivisionError("a bug")

    engine.store.due_schedules = broken  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger="goatbeat_celery.core.loop"):
        seconds = engine.tick()

    assert 0 < seconds <= 1.0
    assert any(getattr(r, "action", None) == "tick_failed" for r in caplog.records)


# -- messages that cannot be sent --------------------------------------------------------------

class RejectingSubmitter(RecordingSubmitter):
    """Accepts every message except those of ``schedule``, which it rejects for themselves
    (with "EncodeError: cannot serialise")."""

    def __init__(self, schedule: str) -> None:
        super().__init__(rejecting={schedule})


def test_a_message_refused_for_itself_fails_alone_without_a_broker_backoff(
        world: World) -> None:
    world.create("canary")
    world.create("unsendable")
    submitter = RejectingSubmitter("unsendable")
    engine = world.replica("a", submitter=submitter)

    world.advance(30)
    engine.tick()
    world.advance(60)
    engine.tick()

    canary = world.executions("canary")
    assert [e.state for e in canary] == [ExecutionState.SUBMITTED] * 2
    held = world.executions("unsendable")
    assert held[0].state is ExecutionState.CLAIMED
    assert held[0].last_error == "EncodeError: cannot serialise"
    schedule = world.store.get_schedule("unsendable")
    assert "its message could not be sent: EncodeError" in (schedule.fault or "")


def test_an_unsendable_occurrence_is_abandoned_after_the_last_attempt(world: World) -> None:
    world.create("unsendable")
    submitter = RejectingSubmitter("unsendable")
    engine = world.replica("a", submitter=submitter)
    key = idempotency_key("unsendable", minute(1))

    world.advance(30)
    for _ in range(MAX_SEND_ATTEMPTS + 2):
        engine.tick()
        world.advance(1)

    assert submitter.keys.count(key) == MAX_SEND_ATTEMPTS
    [execution] = world.executions("unsendable")
    assert execution.state is ExecutionState.ABANDONED
    assert execution.attempts == MAX_SEND_ATTEMPTS


# -- config rows cannot be forged ----------------------------------------------------------------

def test_a_config_row_whose_task_was_changed_by_hand_is_held_to_the_allow_list(
        world: World) -> None:
    entry = ScheduleSpec(name="cleanup", task="app.cleanup", trigger=EVERY_MINUTE)
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter, config=[entry],
                           task_allowed=lambda task: task.startswith("app."))
    engine.tick()
    current = world.store.get_schedule("cleanup")
    forged = ScheduleSpec(name="cleanup", task="db.drop_everything", trigger=EVERY_MINUTE,
                          source=ScheduleSource.CONFIG)
    world.store.replace_schedule(forged, next_occurrence_at=current.next_occurrence_at,
                                 next_run_at=current.next_run_at)

    world.advance(30)
    engine.tick()

    assert submitter.keys == []
    fault = world.store.get_schedule("cleanup").fault or ""
    assert "not this replica's beat_schedule entry" in fault and "db.drop_everything" in fault


def test_a_row_marked_config_that_no_entry_matches_is_held_to_the_allow_list(
        world: World) -> None:
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter, task_allowed=lambda task: False)
    engine.tick()  # leads and syncs its (empty) config first
    world.create("smuggled", source=ScheduleSource.CONFIG)

    world.advance(30)
    engine.tick()

    assert submitter.keys == []
    assert world.store.get_schedule("smuggled").fault


def test_a_config_row_equal_to_the_entry_is_sent_whatever_the_allow_list(world: World) -> None:
    entry = ScheduleSpec(name="cleanup", task="app.cleanup", trigger=EVERY_MINUTE,
                         args=(1, [2]), kwargs={"a": {"b": 1}}, options={"queue": "low"})

    assert sent_allowing_no_task(world, entry) == [idempotency_key("cleanup", minute(1))]


def test_a_manual_run_is_logged_as_one_not_as_a_resubmission(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    world.create("report", next_at=minute(60))
    engine = world.replica("a")
    engine.tick()
    world.store.request_run("report")

    with caplog.at_level(logging.INFO, logger="goatbeat_celery.core.loop"):
        engine.tick()

    actions = [getattr(r, "action", None) for r in caplog.records]
    assert "manual_run" in actions and "resubmit" not in actions


def test_a_schedule_whose_messages_keep_being_refused_waits_longer_each_time(
        world: World) -> None:
    world.create("unsendable", trigger=TriggerSpec(kind="interval", params={"every": 10}),
                 next_at=T0 + timedelta(seconds=30))
    engine = world.replica("a", submitter=RejectingSubmitter("unsendable"))
    waits = []
    for _ in range(3):
        schedule = world.store.get_schedule("unsendable")
        assert schedule.next_run_at is not None
        world.advance(max(0.0, (schedule.next_run_at - world.now).total_seconds()))
        engine.tick()
        after = world.store.get_schedule("unsendable")
        assert after.next_run_at is not None
        waits.append(after.next_run_at - world.now)

    assert waits == [SET_ASIDE_RETRY, 2 * SET_ASIDE_RETRY, 4 * SET_ASIDE_RETRY]
    assert world.store.get_schedule("unsendable").faults == 3


# -- starting deadlines ------------------------------------------------------------------------

def test_a_run_past_its_starting_deadline_is_never_sent_and_says_so(world: World) -> None:
    create(world, "report", starting_deadline=timedelta(seconds=20))
    create(world, "patient")
    submitter = RecordingSubmitter()
    engine = world.replica("a", submitter=submitter)
    submitter.failing = True  # the broker is down when both fall due

    world.advance(30)
    engine.tick()
    submitter.failing = False
    world.advance(25)  # the broker is back after the 20 s deadline
    engine.tick()

    [report] = world.executions("report")
    assert report.state is ExecutionState.EXPIRED
    assert report.expires_at == minute(1) + timedelta(seconds=20)
    [patient] = world.executions("patient")
    assert patient.state is ExecutionState.SUBMITTED and patient.expires_at is None
    assert submitter.keys.count(report.key) == 1, "tried once while down, never after"


def test_the_global_starting_deadline_applies_unless_a_schedule_has_its_own(
        world: World) -> None:
    create(world, "own", starting_deadline=timedelta(minutes=5))
    create(world, "global")
    engine = world.replica("a", settings=Settings(max_interval=60, starting_deadline=30))

    world.advance(30)
    engine.tick()

    [own] = world.executions("own")
    [shared] = world.executions("global")
    assert own.expires_at == own.due_at + timedelta(minutes=5)
    assert shared.expires_at == shared.due_at + timedelta(seconds=30)
