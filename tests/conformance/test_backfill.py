"""Backfills on every store: the request round-trips and lists; a step inserts its executions
where their key is new and moves the cursor, fenced by the lease and only while the backfill
is active at the count it was planned from (a stale or repeated step writes nothing); the
schedule's row is never written; cancel and set-aside end it; an engine drains it to the end
without running any occurrence twice, a second leader going on where the first stopped."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa

from goatbeat_celery.core.rules.backfill import (
    BackfillMode,
    BackfillRequest,
    BackfillRun,
    BackfillState,
    BackfillStep,
    backfill_key,
)
from goatbeat_celery.core.types.errors import BackfillNotFound, LeaseLost, ScheduleNotFound
from goatbeat_celery.core.types.execution import ExecutionState, idempotency_key
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.store import open_store
from goatbeat_celery.store.url import normalise_url
from goatbeat_celery.testing import RecordingSubmitter, build_engine

from .conftest import Backend, Store, StoreClock
from .support import LONG_TTL, create_due, grid_point_before

M = timedelta(minutes=1)


def lease(store: Store, holder: str = "replica") -> LeaseGrant:
    grant = store.acquire("beat", holder, LONG_TTL)
    assert grant is not None
    return grant


def request(store: Store, minutes: int = 5, **fields: object) -> BackfillRequest:
    """The last ``minutes`` minute grid points before the store's clock, of schedule job."""
    end = grid_point_before(store.now(), 60, 1)
    values: dict[str, object] = {"schedule_name": "job", "start": end - (minutes - 1) * M,
                                 "end": end, "total": minutes, **fields}
    return BackfillRequest(**values)  # type: ignore[arg-type]


def step(backfill_id: int, points: list[datetime], *, before: int = 0,
         done: bool = False, keys: list[str] | None = None) -> BackfillStep:
    runs = tuple(BackfillRun(occurrence_at=p, key=k, reason="no execution")
                 for p, k in zip(points, keys or [idempotency_key("job", p) for p in points],
                                 strict=True))
    return BackfillStep(backfill_id=backfill_id, schedule_name="job", examined_before=before,
                        examined=len(points), cursor=points[-1] if points else None,
                        runs=runs, done=done)


def test_a_backfill_round_trips(store: Store) -> None:
    create_due(store, "job")
    asked = request(store, newest_first=True, per_tick=7, mode=BackfillMode.FAILED)
    created = store.create_backfill(asked)
    assert created.id > 0
    read = store.get_backfill(created.id)
    assert read == created
    assert (read.schedule_name, read.start, read.end, read.mode, read.newest_first,
            read.per_tick, read.total) == ("job", asked.start, asked.end, BackfillMode.FAILED,
                                           True, 7, 5)
    assert (read.examined, read.claimed, read.cursor, read.state, read.damage) == (
        0, 0, None, BackfillState.ACTIVE, ())
    assert read.created_at is not None and read.finished_at is None


def test_a_backfill_of_no_schedule_is_refused(store: Store) -> None:
    with pytest.raises(ScheduleNotFound):
        store.create_backfill(request(store))


def test_an_unknown_backfill_is_not_found(store: Store) -> None:
    with pytest.raises(BackfillNotFound):
        store.get_backfill(12345)
    with pytest.raises(BackfillNotFound):
        store.cancel_backfill(12345)


def test_backfills_list_newest_first_by_schedule_and_state(store: Store) -> None:
    create_due(store, "job")
    create_due(store, "other")
    first = store.create_backfill(request(store))
    second = store.create_backfill(replace(request(store), schedule_name="other"))
    third = store.create_backfill(request(store))
    store.cancel_backfill(third.id)
    assert [b.id for b in store.list_backfills()] == [third.id, second.id, first.id]
    assert [b.id for b in store.list_backfills(schedule_name="job")] == [third.id, first.id]
    assert [b.id for b in store.list_backfills(active=True)] == [second.id, first.id]
    assert [b.id for b in store.list_backfills(active=False)] == [third.id]
    assert [b.id for b in store.active_backfills(10)] == [first.id, second.id]
    assert [b.id for b in store.list_backfills(limit=1)] == [third.id]


def test_a_step_inserts_claimed_executions_due_now_and_moves_the_cursor(store: Store) -> None:
    schedule = create_due(store, "job")
    grant = lease(store)
    backfill = store.create_backfill(request(store))
    points = [backfill.start, backfill.start + M]
    result = store.claim_backfill(step(backfill.id, points), lease=grant)
    assert [d.key for d in result.dispatches] == [idempotency_key("job", p) for p in points]
    assert all(d.task == "proj.tasks.tick" for d in result.dispatches)
    executions = store.executions_by_key([d.key for d in result.dispatches])
    for point in points:
        execution = executions[idempotency_key("job", point)]
        assert execution.state is ExecutionState.CLAIMED
        assert execution.occurrence_at == point
        assert execution.due_at == execution.claimed_at > point
        assert (execution.token, execution.attempts) == (grant.token, 1)
    after = store.get_backfill(backfill.id)
    assert (after.examined, after.claimed, after.cursor, after.state) == (
        2, 2, points[-1], BackfillState.ACTIVE)
    assert store.get_schedule("job") == schedule


def test_a_key_taken_already_is_not_inserted_again(store: Store) -> None:
    create_due(store, "job")
    grant = lease(store)
    backfill = store.create_backfill(request(store))
    points = [backfill.start, backfill.start + M]
    store.claim_backfill(step(backfill.id, points[:1]), lease=grant)
    again = store.create_backfill(request(store))
    result = store.claim_backfill(step(again.id, points), lease=grant)
    assert [d.key for d in result.dispatches] == [idempotency_key("job", points[1])]
    assert result.duplicates == 1
    assert store.get_backfill(again.id).claimed == 1


def test_a_stale_or_repeated_step_writes_nothing(store: Store) -> None:
    create_due(store, "job")
    grant = lease(store)
    backfill = store.create_backfill(request(store))
    first = step(backfill.id, [backfill.start])
    assert store.claim_backfill(first, lease=grant).dispatches
    assert store.claim_backfill(first, lease=grant).dispatches == ()
    later = step(backfill.id, [backfill.start + M], before=1)
    assert store.claim_backfill(later, lease=grant).dispatches
    assert store.get_backfill(backfill.id).examined == 2


def test_a_step_under_a_stale_lease_is_refused(store: Store, backend: Backend,
                                               clock: StoreClock) -> None:
    create_due(store, "job")
    grant = store.acquire("beat", "old", backend.expiring_ttl)
    assert grant is not None
    backfill = store.create_backfill(request(store))
    clock.advance(backend.expiring_ttl.total_seconds() + 0.1)
    assert store.acquire("beat", "new", LONG_TTL) is not None
    with pytest.raises(LeaseLost):
        store.claim_backfill(step(backfill.id, [backfill.start]), lease=grant)
    assert store.get_backfill(backfill.id).examined == 0
    assert store.executions_by_key([idempotency_key("job", backfill.start)]) == {}


def test_the_last_step_finishes_the_backfill(store: Store) -> None:
    create_due(store, "job")
    grant = lease(store)
    backfill = store.create_backfill(request(store, minutes=2))
    store.claim_backfill(step(backfill.id, [backfill.start, backfill.end], done=True),
                         lease=grant)
    done = store.get_backfill(backfill.id)
    assert done.state is BackfillState.DONE and done.finished_at is not None
    assert store.active_backfills(10) == []


def test_a_cancelled_backfill_takes_no_step(store: Store) -> None:
    create_due(store, "job")
    grant = lease(store)
    backfill = store.create_backfill(request(store))
    cancelled = store.cancel_backfill(backfill.id)
    assert cancelled.state is BackfillState.CANCELLED and cancelled.finished_at is not None
    assert store.cancel_backfill(backfill.id) == cancelled  # once finished, unchanged
    assert store.claim_backfill(step(backfill.id, [backfill.start]), lease=grant).dispatches \
        == ()


def test_a_backfill_set_aside_records_its_reason(store: Store) -> None:
    create_due(store, "job")
    grant = lease(store)
    backfill = store.create_backfill(request(store))
    assert store.fail_backfill(backfill.id, "mode: cannot be read", lease=grant)
    failed = store.get_backfill(backfill.id)
    assert (failed.state, failed.error) == (BackfillState.FAILED, "mode: cannot be read")
    assert not store.fail_backfill(backfill.id, "again", lease=grant)


def test_a_derived_key_runs_an_occurrence_again(store: Store) -> None:
    create_due(store, "job")
    grant = lease(store)
    backfill = store.create_backfill(request(store))
    point = backfill.start
    store.claim_backfill(step(backfill.id, [point]), lease=grant)
    again = store.create_backfill(request(store, mode=BackfillMode.ALL))
    key = backfill_key("job", point, again.id)
    result = store.claim_backfill(step(again.id, [point], keys=[key]), lease=grant)
    assert [d.key for d in result.dispatches] == [key]
    assert set(store.executions_by_key([idempotency_key("job", point), key])) == {
        idempotency_key("job", point), key}


def test_an_engine_drains_a_backfill_and_a_second_leader_goes_on(store: Store,
                                                                 backend: Backend) -> None:
    create_due(store, "job")
    backfill = store.create_backfill(request(store, minutes=25, per_tick=10))
    submitter = RecordingSubmitter()
    settings = Settings(lease_ttl=60, lease_renew_interval=20)
    first = build_engine(store, submitter=submitter, settings=settings, holder="a")
    first.tick()
    first.close()
    peer = backend.open_peer()
    second = build_engine(peer, submitter=submitter, settings=settings, holder="b")
    for _ in range(3):
        second.tick()
    second.close()
    backfilled = [d.key for d in submitter.dispatches
                  if d.execution.occurrence_at <= backfill.end]
    assert sorted(backfilled) == sorted(
        idempotency_key("job", backfill.start + k * M) for k in range(25))
    done = store.get_backfill(backfill.id)
    assert (done.state, done.examined, done.claimed) == (BackfillState.DONE, 25, 25)


@pytest.fixture(params=["sqlite", "postgres"])
def raw_store(request: pytest.FixtureRequest) -> tuple[Store, sa.Engine]:
    if request.param == "sqlite":
        url = f"sqlite:///{request.getfixturevalue('tmp_path') / 'store.db'}"
    else:
        url = request.getfixturevalue("pg_empty_url")
    store = open_store(url)
    raw = sa.create_engine(normalise_url(url))
    request.addfinalizer(raw.dispose)
    request.addfinalizer(store.close)
    return store, raw


@pytest.mark.parametrize(("column", "value", "reason"), [
    ("mode", "sometimes", "mode"),
    ("start_at", "yesterday", "start_at"),
    ("per_tick", -3, "per_tick"),
])
def test_a_backfill_row_edited_by_hand_is_set_aside_and_live_runs_go_on(
        raw_store: tuple[Store, sa.Engine], column: str, value: object, reason: str) -> None:
    store, raw = raw_store
    if column == "start_at" and raw.dialect.name == "postgresql":
        value = "infinity"
    create_due(store, "job")
    bad = store.create_backfill(request(store))
    good = store.create_backfill(request(store, minutes=2))
    with raw.begin() as conn:
        conn.execute(sa.text(f"UPDATE goatbeat_backfill SET {column} = :value WHERE id = :id"),
                     {"value": value, "id": bad.id})
    read = store.get_backfill(bad.id)
    assert read.damage or column == "per_tick"
    submitter = RecordingSubmitter()
    engine = build_engine(store, submitter=submitter,
                          settings=Settings(lease_ttl=60, lease_renew_interval=20), holder="a")
    try:
        engine.tick()
    finally:
        engine.close()
    failed = store.get_backfill(bad.id)
    assert failed.state is BackfillState.FAILED
    assert failed.error is not None and reason in failed.error
    assert store.get_backfill(good.id).state is BackfillState.DONE
    # The live schedule was claimed as always.
    assert store.get_schedule("job").total_runs >= 1


def test_the_executions_of_occurrences_are_read_by_their_instant(store: Store) -> None:
    create_due(store, "job")
    create_due(store, "other")
    grant = lease(store)
    backfill = store.create_backfill(request(store))
    points = [backfill.start + k * M for k in range(4)]
    store.claim_backfill(step(backfill.id, points), lease=grant)
    again = store.create_backfill(request(store, mode=BackfillMode.ALL))
    derived = backfill_key("job", points[1], again.id)
    store.claim_backfill(step(again.id, [points[1]], keys=[derived]), lease=grant)
    found = store.occurrence_executions("job", points[1], points[2])
    assert [(e.occurrence_at, e.key) for e in found] == [
        (points[1], idempotency_key("job", points[1])), (points[1], derived),
        (points[2], idempotency_key("job", points[2]))]
    assert store.occurrence_executions("other", points[0], points[-1]) == []


def test_a_backfill_with_an_unknown_state_is_listed_with_its_damage_and_never_run(
        raw_store: tuple[Store, sa.Engine]) -> None:
    store, raw = raw_store
    create_due(store, "job")
    odd = store.create_backfill(request(store))
    with raw.begin() as conn:
        conn.execute(sa.text("UPDATE goatbeat_backfill SET state = 'sleeping' WHERE id = :id"),
                     {"id": odd.id})
    listed = store.list_backfills()
    assert [b.id for b in listed] == [odd.id]
    assert listed[0].damage == (Problem("state", "'sleeping'"),)
    assert store.active_backfills(10) == []
    engine = build_engine(store, settings=Settings(lease_ttl=60, lease_renew_interval=20),
                          holder="a")
    try:
        engine.tick()
    finally:
        engine.close()
    assert store.get_backfill(odd.id).examined == 0
    assert store.get_schedule("job").total_runs >= 1
