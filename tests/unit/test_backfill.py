"""Backfills through the Schedules API and the engine loop, on the memory store with a manual
clock: what each mode runs and under which key, at most per_tick a tick after the live
schedules, newest first, and a restart or a new leader going on without running anything
twice; bad requests refused at the door, bad rows set aside."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.config import base_registry
from goatbeat_celery.core.loop.engine import BACKFILL_PAUSE, Engine
from goatbeat_celery.core.rules.backfill import (
    Backfill,
    BackfillMode,
    BackfillRun,
    BackfillState,
    backfill_key,
    choose_runs,
    failed_execution,
    next_window,
)
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome, RunState
from goatbeat_celery.core.types.errors import BackfillNotFound, ConfigurationError, StoreError
from goatbeat_celery.core.types.execution import Execution, ExecutionState, idempotency_key
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.testing import ManualClock, MemoryStore, RecordingSubmitter, build_engine

T0 = ManualClock.DEFAULT_START
M = timedelta(minutes=1)
H = timedelta(hours=1)
S = timedelta(seconds=1)


class World:
    """Leaders on one memory store, the clock moved by hand; the API on the same store."""

    def __init__(self, **settings: Any) -> None:
        self.clock = ManualClock()
        self.store = MemoryStore(self.clock)
        self.submitter = RecordingSubmitter()
        self.settings = Settings(max_interval=60, **settings)
        self.engine = self.leader("a")
        self.api = Schedules(self.store)

    def leader(self, holder: str) -> Engine:
        return build_engine(self.store, clock=self.clock, submitter=self.submitter,
                            settings=self.settings, holder=holder, triggers=base_registry())

    def keys(self, name: str = "job") -> list[str]:
        return [d.key for d in self.submitter.dispatches
                if d.execution.schedule_name == name]

    def backfilled(self, name: str = "job") -> list[str]:
        # Backfill runs are due when claimed: their occurrence lies before that.
        return [d.key for d in self.submitter.dispatches
                if d.execution.schedule_name == name
                and d.execution.occurrence_at < d.execution.due_at - M]


@pytest.fixture
def world() -> World:
    return World()


def past_job(world: World, *, hours: int = 2) -> None:
    """A minutely schedule created now, then the clock moved ``hours`` on: a range with no
    executions lies behind it (the engine has not ticked)."""
    world.api.create("job", "app.job", every=60)
    world.clock.advance(hours * 3600)


def test_missing_mode_runs_the_occurrences_without_executions_under_their_own_keys(
        world: World) -> None:
    past_job(world)
    backfill = world.api.backfill("job", T0 + M, T0 + 5 * M)
    assert (backfill.total, backfill.state) == (5, BackfillState.ACTIVE)
    world.engine.tick()
    expected = [idempotency_key("job", T0 + k * M) for k in range(1, 6)]
    assert [k for k in world.keys() if k in expected] == expected
    done = world.api.get_backfill(backfill.id)
    assert (done.state, done.examined, done.claimed) == (BackfillState.DONE, 5, 5)


def test_backfill_runs_are_due_when_claimed_not_at_their_past_occurrence(world: World) -> None:
    past_job(world)
    world.api.backfill("job", T0 + M, T0 + 2 * M)
    world.engine.tick()
    runs = [d.execution for d in world.submitter.dispatches
            if d.execution.occurrence_at <= T0 + 2 * M]
    assert runs
    assert all(e.due_at == e.claimed_at == world.clock() for e in runs)


def test_the_schedule_keeps_its_next_run(world: World) -> None:
    past_job(world)
    world.engine.tick()
    before = world.api.get("job")
    world.api.backfill("job", T0 + M, T0 + 30 * M)
    world.engine.tick()
    after = world.api.get("job")
    assert (after.next_occurrence_at, after.next_run_at, after.total_runs) == (
        before.next_occurrence_at, before.next_run_at, before.total_runs)


def test_missing_mode_skips_occurrences_that_ran(world: World) -> None:
    world.api.create("job", "app.job", every=60)
    world.engine.tick()
    world.clock.advance(3 * 60)
    world.engine.tick()  # runs T0+3m (latest of the late ones)
    world.clock.advance(60)
    ran = set(world.keys())
    world.api.backfill("job", T0 + M, T0 + 3 * M)
    world.engine.tick()
    again = [k for k in world.keys() if k in ran]
    assert len(again) == len(ran)  # nothing run twice
    assert idempotency_key("job", T0 + M) in world.keys()


def test_failed_mode_reruns_failed_and_lost_runs_under_a_key_of_the_backfill(
        world: World) -> None:
    world.api.create("job", "app.job", every=60)
    world.engine.tick()
    for _ in range(3):
        world.clock.advance(60)
        world.engine.tick()
    keys = [idempotency_key("job", T0 + k * M) for k in (1, 2, 3)]
    assert set(keys) <= set(world.keys())
    world.store.record_runs([
        RunEvent.started(keys[0], run="r0", worker="w", age=timedelta(0)),
        RunEvent.started(keys[1], run="r1", worker="w", age=timedelta(0)),
    ])
    world.store.record_runs([
        RunEvent.finished(keys[0], run="r0", worker="w", age=timedelta(0),
                          outcome=RunOutcome.FAILED),
        RunEvent.finished(keys[1], run="r1", worker="w", age=timedelta(0),
                          outcome=RunOutcome.SUCCEEDED),
    ])
    backfill = world.api.backfill("job", T0 + M, T0 + 3 * M, mode="failed")
    world.engine.tick()
    assert backfill_key("job", T0 + M, backfill.id) in world.keys()
    assert backfill_key("job", T0 + 2 * M, backfill.id) not in world.keys()
    assert world.api.get_backfill(backfill.id).claimed == 1


def test_all_mode_runs_every_occurrence_once_per_backfill(world: World) -> None:
    world.api.create("job", "app.job", every=60)
    world.engine.tick()
    world.clock.advance(60)
    world.engine.tick()  # T0+1m ran
    world.clock.advance(120)  # T0+2m, T0+3m not yet claimed: the engine did not tick
    backfill = world.api.backfill("job", T0 + M, T0 + 2 * M, mode=BackfillMode.ALL)
    world.engine.tick()
    keys = world.keys()
    assert backfill_key("job", T0 + M, backfill.id) in keys
    assert idempotency_key("job", T0 + 2 * M) in keys
    assert keys.count(idempotency_key("job", T0 + M)) == 1


def test_a_backfill_claims_at_most_per_tick_occurrences_a_tick(world: World) -> None:
    past_job(world, hours=3)
    backfill = world.api.backfill("job", T0 + M, T0 + 100 * M, per_tick=30)
    counts, waits = [], []
    for _ in range(5):
        before = len(world.backfilled())
        waits.append(world.engine.tick())
        counts.append(len(world.backfilled()) - before)
        world.clock.advance(0.1)
    assert counts == [30, 30, 30, 10, 0]
    # The leader comes back for the next step at once while occurrences are left.
    assert all(wait <= BACKFILL_PAUSE for wait in waits[:3])
    assert world.api.get_backfill(backfill.id).state is BackfillState.DONE


def test_the_setting_sets_per_tick_when_the_request_does_not() -> None:
    world = World(backfill_per_tick=7)
    past_job(world)
    world.api.backfill("job", T0 + M, T0 + 60 * M)
    world.engine.tick()
    assert len(world.backfilled()) == 7


def test_backfills_share_the_setting_of_a_tick_oldest_first() -> None:
    world = World(backfill_per_tick=10)
    past_job(world)
    first = world.api.backfill("job", T0 + M, T0 + 30 * M)
    second = world.api.backfill("job", T0 + 31 * M, T0 + 40 * M)
    world.engine.tick()
    assert len(world.backfilled()) == 10
    assert (world.api.get_backfill(first.id).claimed,
            world.api.get_backfill(second.id).claimed) == (10, 0)


def test_a_backfill_whose_range_ran_already_lets_the_next_one_go() -> None:
    world = World(backfill_per_tick=10)
    past_job(world)
    first = world.api.backfill("job", T0 + M, T0 + 10 * M)
    world.engine.tick()
    again = world.api.backfill("job", T0 + M, T0 + 10 * M)  # nothing missing now
    other = world.api.backfill("job", T0 + 11 * M, T0 + 12 * M)
    world.clock.advance(0.1)
    world.engine.tick()
    assert world.api.get_backfill(first.id).claimed == 10
    assert (world.api.get_backfill(again.id).state, world.api.get_backfill(again.id).claimed) \
        == (BackfillState.DONE, 0)
    assert world.api.get_backfill(other.id).claimed == 2


def test_live_schedules_are_sent_before_the_backfill_of_the_tick(world: World) -> None:
    world.api.create("job", "app.job", every=60)
    world.api.create("live", "app.live", every=60)
    world.engine.tick()
    world.clock.advance(3 * 3600)
    world.engine.tick()
    world.api.backfill("job", T0 + M, T0 + 60 * M)
    world.clock.advance(60)
    calls_before = len(world.submitter.calls)
    world.engine.tick()
    calls = world.submitter.calls[calls_before:]
    live_key = idempotency_key("live", T0 + 3 * H + M)
    assert live_key in calls[0].keys
    assert all(key.startswith(("live:", "job:")) and ":backfill" not in key
               for key in calls[0].keys)
    backfilled = set(world.backfilled())
    assert not backfilled & set(calls[0].keys)
    assert backfilled <= {key for call in calls[1:] for key in call.keys}


def test_newest_first_drains_from_the_end_of_the_range(world: World) -> None:
    past_job(world)
    world.api.backfill("job", T0 + M, T0 + 10 * M, newest_first=True, per_tick=4)
    world.engine.tick()
    assert world.backfilled() == [idempotency_key("job", T0 + k * M) for k in (10, 9, 8, 7)]
    for _ in range(3):
        world.clock.advance(0.1)
        world.engine.tick()
    assert world.backfilled() == [idempotency_key("job", T0 + k * M)
                                  for k in range(10, 0, -1)]


def test_newest_first_window_finds_points_on_an_uneven_grid() -> None:
    # Every point once, whatever the widths it had to try.
    def next_after(instant: datetime) -> datetime | None:
        minutes = math.floor((instant - T0) / M) + 1
        while minutes % 7 not in (0, 1):
            minutes += 1
        return T0 + minutes * M

    backfill = Backfill(id=1, schedule_name="job", start=T0, end=T0 + 200 * M,
                        mode=BackfillMode.ALL, newest_first=True, total=58)
    seen: list[datetime] = []
    while True:
        window, done = next_window(backfill, next_after, 5)
        seen.extend(window)
        backfill = replace(backfill, cursor=window[-1] if window else backfill.cursor,
                           examined=backfill.examined + len(window))
        if done:
            break
    expected = [T0 + k * M for k in range(200, -1, -1) if k % 7 in (0, 1)]
    assert seen == expected


def test_a_new_leader_goes_on_from_the_stored_cursor_without_duplicates(world: World) -> None:
    past_job(world)
    world.api.backfill("job", T0 + M, T0 + 50 * M, per_tick=20)
    world.engine.tick()
    assert len(world.backfilled()) == 20
    world.engine.close()
    other = world.leader("b")
    for _ in range(4):
        other.tick()
        world.clock.advance(0.1)
    keys = world.backfilled()
    assert len(keys) == len(set(keys)) == 50


def test_a_step_planned_by_a_stale_leader_writes_nothing(world: World) -> None:
    past_job(world)
    backfill = world.api.backfill("job", T0 + M, T0 + 10 * M, per_tick=5)
    step = world.engine._backfills.step(world.store.get_backfill(backfill.id))
    world.engine.tick()  # the same step, applied
    grant = world.engine.grant
    assert grant is not None
    result = world.store.claim_backfill(step, lease=grant)
    assert result.dispatches == ()
    assert world.store.get_backfill(backfill.id).examined == 5


def test_claims_left_unsent_by_a_crash_are_sent_again_under_their_keys(world: World) -> None:
    past_job(world)
    world.engine.tick()
    world.api.backfill("job", T0 + M, T0 + 3 * M)
    backfill = world.store.list_backfills()[0]
    step = world.engine._backfills.step(backfill)
    grant = world.engine.grant
    assert grant is not None
    world.store.claim_backfill(step, lease=grant)  # claimed, then the leader dies
    world.engine.close()
    world.clock.advance(1)
    world.leader("b").tick()
    keys = world.backfilled()
    assert sorted(keys) == sorted(idempotency_key("job", T0 + k * M) for k in (1, 2, 3))
    assert all(e.state is ExecutionState.SUBMITTED
               for e in world.store.executions_by_key(keys).values())


def test_a_cancelled_backfill_claims_nothing_more(world: World) -> None:
    past_job(world)
    backfill = world.api.backfill("job", T0 + M, T0 + 60 * M, per_tick=10)
    world.engine.tick()
    cancelled = world.api.cancel_backfill(backfill.id)
    assert cancelled.state is BackfillState.CANCELLED
    world.clock.advance(1)
    world.engine.tick()
    assert len(world.backfilled()) == 10
    assert world.api.backfills(active=True) == []


def test_a_dry_run_lists_what_would_run_and_writes_nothing(world: World) -> None:
    world.api.create("job", "app.job", every=60)
    world.engine.tick()
    world.clock.advance(60)
    world.engine.tick()
    world.clock.advance(3600)
    preview = world.api.backfill("job", T0 + M, T0 + 3 * M, mode="all", dry_run=True)
    assert preview.total == 3
    assert [(r.key, r.reason) for r in preview.runs] == [
        (backfill_key("job", T0 + M, "new"), "execution submitted"),
        (idempotency_key("job", T0 + 2 * M), "no execution"),
        (idempotency_key("job", T0 + 3 * M), "no execution"),
    ]
    assert world.api.backfills() == []


@pytest.mark.parametrize(("start", "end", "wanted"), [
    (T0 + 5 * M, T0 + M, "end: must not be before start"),
    (T0 + M, T0 + 10 * H, "end: must not be in the future"),
    (T0.replace(tzinfo=None), T0 + M, "start: expected an aware datetime"),
])
def test_bad_ranges_are_refused(world: World, start: datetime, end: datetime,
                                wanted: str) -> None:
    past_job(world)
    with pytest.raises(ConfigurationError, match=wanted):
        world.api.backfill("job", start, end)


def test_bad_mode_and_per_tick_are_refused_together(world: World) -> None:
    past_job(world)
    with pytest.raises(ConfigurationError) as caught:
        world.api.backfill("job", T0 + M, T0 + 2 * M, mode="some", per_tick=0)
    text = str(caught.value)
    assert "mode: unknown mode 'some'" in text
    assert "per_tick: must be an integer from 1 to 10000" in text


def test_a_range_over_the_cap_is_refused(world: World) -> None:
    world.api.create("job", "app.job", every=1)
    world.clock.advance(30 * 3600)
    with pytest.raises(ConfigurationError, match="more than 100000 occurrences"):
        world.api.backfill("job", T0, T0 + 29 * H)


def test_an_unreadable_backfill_is_set_aside_and_others_go_on(world: World) -> None:
    past_job(world)
    bad = world.api.backfill("job", T0 + M, T0 + 3 * M)
    good = world.api.backfill("job", T0 + 10 * M, T0 + 12 * M)
    world.store.put_backfill(replace(world.store.get_backfill(bad.id),
                                     damage=(Problem("mode", ""),)))
    world.engine.tick()
    failed = world.store.get_backfill(bad.id)
    assert failed.state is BackfillState.FAILED
    assert failed.error is not None and "mode: cannot be read" in failed.error
    assert world.store.get_backfill(good.id).state is BackfillState.DONE
    assert idempotency_key("job", T0 + 10 * M) in world.keys()
    assert world.api.get("job").next_run_at is not None


def test_a_backfill_of_a_deleted_schedule_is_set_aside(world: World) -> None:
    past_job(world)
    backfill = world.api.backfill("job", T0 + M, T0 + 3 * M)
    world.api.delete("job")
    world.engine.tick()
    assert world.store.get_backfill(backfill.id).state is BackfillState.FAILED


def test_an_unknown_backfill_is_not_found(world: World) -> None:
    with pytest.raises(BackfillNotFound):
        world.api.get_backfill(42)
    with pytest.raises(BackfillNotFound):
        world.api.cancel_backfill(42)


def test_a_ten_thousand_occurrence_backfill_leaves_the_live_runs_on_time() -> None:
    world = World()
    world.api.create("job", "app.job", every=1)
    world.clock.advance(3 * 3600)
    world.api.create("live", "app.live", every=1)
    backfill = world.api.backfill("job", T0 + timedelta(seconds=1), T0 + 10_000 * S)
    assert backfill.total == 10_000
    start = world.clock()
    end = start + timedelta(seconds=30)
    while world.clock() < end:
        wait = world.engine.tick()
        world.clock.advance(max(min(wait, (end - world.clock()).total_seconds()), 0.001))
    world.engine.tick()
    live = [d.execution for d in world.submitter.dispatches
            if d.execution.schedule_name == "live"]
    # Every live second sent, each at its due instant (the clock moves only between ticks).
    assert [e.due_at for e in live] == [start + k * S for k in range(1, 31)]
    assert all(e.claimed_at == e.due_at for e in live)
    # Meanwhile the backfill went on, 100 a tick, with no key sent twice.
    done = world.api.get_backfill(backfill.id)
    assert done.state is BackfillState.DONE and done.claimed == 10_000
    keys = world.backfilled()
    assert len(keys) == len(set(keys)) == 10_000
    assert max(len([k for k in call.keys if k in set(keys)])
               for call in world.submitter.calls) <= 100


@pytest.mark.parametrize(("state", "run_state", "failed"), [
    (ExecutionState.SUBMITTED, None, False),
    (ExecutionState.SUBMITTED, RunState.SUCCEEDED, False),
    (ExecutionState.SUBMITTED, RunState.RUNNING, False),
    (ExecutionState.SUBMITTED, RunState.FAILED, True),
    (ExecutionState.SUBMITTED, RunState.LOST, True),
    (ExecutionState.SUBMITTED, RunState.REVOKED, False),
    (ExecutionState.EXPIRED, None, True),
    (ExecutionState.ABANDONED, None, True),
    (ExecutionState.CLAIMED, None, False),
    (ExecutionState.SKIPPED, None, False),
])
def test_what_the_failed_mode_counts_as_failed(state: ExecutionState, run_state: RunState | None,
                                               failed: bool) -> None:
    execution = Execution(key="job:x", schedule_name="job", occurrence_at=T0, due_at=T0, token=1,
                          state=state, claimed_at=T0, run_state=run_state)
    assert failed_execution(execution) is failed


@pytest.mark.parametrize(("mode", "expected"), [
    (BackfillMode.MISSING, [("job:{0}", "no execution")]),
    (BackfillMode.FAILED, [("job:{1}:backfill-7", "execution expired")]),
    (BackfillMode.ALL, [("job:{0}", "no execution"), ("job:{1}:backfill-7", "execution expired"),
                        ("job:{2}:backfill-7", "run succeeded")]),
])
def test_each_mode_chooses_its_occurrences_and_keys(mode: BackfillMode,
                                                    expected: list[tuple[str, str]]) -> None:
    points = [T0 + k * M for k in range(3)]
    keys = [idempotency_key("job", p) for p in points]
    existing = [
        Execution(key=keys[1], schedule_name="job", occurrence_at=points[1], due_at=points[1],
                  token=1, state=ExecutionState.EXPIRED, claimed_at=points[1]),
        Execution(key=keys[2], schedule_name="job", occurrence_at=points[2], due_at=points[2],
                  token=1, state=ExecutionState.SUBMITTED, claimed_at=points[2],
                  run_state=RunState.SUCCEEDED),
        # A manual run requested at the first point's instant is no run of that occurrence.
        Execution(key=f"{keys[0]}:manual", schedule_name="job", occurrence_at=points[0],
                  due_at=points[0], token=0, state=ExecutionState.SUBMITTED,
                  claimed_at=points[0], manual=True),
    ]
    backfill = Backfill(id=7, schedule_name="job", start=points[0], end=points[-1], mode=mode)
    runs = choose_runs(backfill, points, existing)
    stamps = [p.isoformat() for p in points]
    assert [(r.key, r.reason) for r in runs] == [(key.format(*stamps), why)
                                                 for key, why in expected]


def test_an_occurrence_is_judged_by_its_latest_execution() -> None:
    point = T0 + M
    key = idempotency_key("job", point)
    failed = Execution(key=key, schedule_name="job", occurrence_at=point, due_at=point, token=1,
                       state=ExecutionState.SUBMITTED, claimed_at=point,
                       run_state=RunState.FAILED)
    rerun = Execution(key=backfill_key("job", point, 1), schedule_name="job",
                      occurrence_at=point, due_at=T0 + H, token=1,
                      state=ExecutionState.SUBMITTED, claimed_at=T0 + H,
                      run_state=RunState.SUCCEEDED)
    backfill = Backfill(id=2, schedule_name="job", start=point, end=point,
                        mode=BackfillMode.FAILED)
    assert choose_runs(backfill, [point], [failed]) == [
        BackfillRun(occurrence_at=point, key=backfill_key("job", point, 2),
                    reason="run failed")]
    assert choose_runs(backfill, [point], [failed, rerun]) == []


def test_a_second_failed_mode_backfill_leaves_what_the_first_ran_again(world: World) -> None:
    world.api.create("job", "app.job", every=60)
    world.engine.tick()
    world.clock.advance(60)
    world.engine.tick()
    key = idempotency_key("job", T0 + M)
    world.store.record_runs([RunEvent.started(key, run="r0", worker="w", age=timedelta(0))])
    world.store.record_runs([RunEvent.finished(key, run="r0", worker="w", age=timedelta(0),
                                               outcome=RunOutcome.FAILED)])
    world.clock.advance(60)
    first = world.api.backfill("job", T0 + M, T0 + M, mode="failed")
    world.engine.tick()
    rerun = backfill_key("job", T0 + M, first.id)
    assert rerun in world.keys()
    world.store.record_runs([RunEvent.started(rerun, run="r1", worker="w", age=timedelta(0))])
    world.store.record_runs([RunEvent.finished(rerun, run="r1", worker="w", age=timedelta(0),
                                               outcome=RunOutcome.SUCCEEDED)])
    world.clock.advance(1)
    second = world.api.backfill("job", T0 + M, T0 + M, mode="failed")
    assert world.api.backfill("job", T0 + M, T0 + M, mode="failed", dry_run=True).runs == ()
    world.engine.tick()
    assert world.api.get_backfill(second.id).claimed == 0


def test_a_step_the_database_refuses_is_tried_again_and_live_runs_go_on(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world.api.create("live", "app.live", every=1)
    past_job(world)
    backfill = world.api.backfill("job", T0 + M, T0 + 3 * M)
    refused = StoreError("could not serialize access")

    def refuse(*args: object, **kwargs: object) -> None:
        raise refused

    monkeypatch.setattr(world.store, "claim_backfill", refuse)
    world.engine.tick()
    assert world.api.get_backfill(backfill.id).state is BackfillState.ACTIVE
    assert any(d.execution.schedule_name == "live" for d in world.submitter.dispatches)
    monkeypatch.undo()
    world.clock.advance(1)
    world.engine.tick()
    assert world.api.get_backfill(backfill.id).state is BackfillState.DONE
