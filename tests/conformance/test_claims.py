"""Claims: one execution per occurrence whatever races, and an edit always beats a stale plan."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from functools import partial

from goatbeat_celery.core.types.claims import ClaimResult, PlannedClaim
from goatbeat_celery.core.types.errors import ScheduleConflict
from goatbeat_celery.core.types.execution import ExecutionState, idempotency_key
from goatbeat_celery.core.types.spec import TriggerSpec
from tests.support.fields import only_fields

from .conftest import Backend, Store
from .support import (
    LONG_TTL,
    claim_next,
    create_due,
    grid_point_before,
    interval_spec,
    lease,
    run_together,
    snapshot,
)


def test_a_claim_inserts_the_occurrence_and_advances_the_schedule(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    occurrence = grid_point_before(store.now(), 60)
    schedule = store.create_schedule(
        interval_spec("report", args=(1, "two", None), kwargs={"to": ["ops"], "n": 1.5},
                      options={"queue": "reports", "priority": 3}),
        next_occurrence_at=occurrence, next_run_at=occurrence + timedelta(seconds=5),
    )
    following = occurrence + timedelta(seconds=60)
    planned = PlannedClaim(
        schedule_name="report", version=schedule.row_version,
        occurrences=((occurrence, occurrence + timedelta(seconds=5)),), missed=0,
        next_occurrence_at=following, next_run_at=following + timedelta(seconds=5),
    )
    claimed_from = store.now()

    result = store.claim([planned], lease=grant)

    assert (result.advanced, result.conflicts, result.duplicates) == (1, (), 0)
    (dispatch,) = result.dispatches
    assert dispatch.key == idempotency_key("report", occurrence)
    assert (dispatch.task, dispatch.args, dict(dispatch.kwargs), dict(dispatch.options)) == (
        "proj.tasks.tick", (1, "two", None), {"to": ["ops"], "n": 1.5},
        {"queue": "reports", "priority": 3},
    )
    only_fields(dispatch.execution)
    execution = dispatch.execution
    assert (execution.schedule_name, execution.occurrence_at, execution.due_at) == (
        "report", occurrence, occurrence + timedelta(seconds=5))
    assert (execution.token, execution.state, execution.attempts, execution.manual) == (
        1, ExecutionState.CLAIMED, 1, False)
    assert claimed_from <= execution.claimed_at <= store.now()
    assert store.executions(schedule_name="report") == [execution]
    after = store.get_schedule("report")
    assert (after.next_occurrence_at, after.next_run_at, after.last_occurrence_at) == (
        following, following + timedelta(seconds=5), occurrence)
    assert (after.total_runs, after.total_missed, after.row_version) == (
        1, 0, schedule.row_version + 1)


def test_two_racing_claims_of_one_occurrence_produce_one_execution(backend: Backend) -> None:
    first, second = backend.open_peer(), backend.open_peer()
    grant = first.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    for round_ in range(10):
        # Both sides planned from the same read, as a leader resumed from a pause next to its
        # own retry would; only one of them may insert.
        schedule = create_due(first, f"report-{round_}")
        planned = claim_next(schedule)

        results = run_together(partial(first.claim, [planned], lease=grant),
                               partial(second.claim, [planned], lease=grant))

        assert [r for r in results if isinstance(r, BaseException)] == []
        claims = [r for r in results if isinstance(r, ClaimResult)]
        winners = [r for r in claims if r.dispatches]
        assert len(winners) == 1, claims
        (loser,) = [r for r in claims if r is not winners[0]]
        assert loser.dispatches == () and loser.advanced == 0
        # The loser either saw the new version (a conflict) or found the row locked and left
        # it for a later batch; it must never advance the schedule a second time.
        assert loser.conflicts in ((schedule.name,), ())
        assert len(backend.store.executions(schedule_name=schedule.name)) == 1
        assert backend.store.get_schedule(schedule.name).row_version == schedule.row_version + 1


def test_an_occurrence_claimed_again_under_a_new_version_is_a_duplicate(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    schedule = create_due(store, "report")
    store.claim([claim_next(schedule)], lease=grant)
    # An edit puts the schedule back on the occurrence that was already claimed.
    rewound = store.replace_schedule(schedule.spec, next_occurrence_at=schedule.next_occurrence_at,
                                     next_run_at=schedule.next_run_at)

    result = store.claim([claim_next(rewound)], lease=grant)

    assert (result.dispatches, result.duplicates, result.advanced) == ((), 1, 1)
    assert len(store.executions(schedule_name="report")) == 1
    assert store.get_schedule("report").row_version == rewound.row_version + 1


def test_an_edit_between_planning_and_claiming_wins(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    create_due(store, "report")
    batch = store.due_schedules(10)
    (due,) = batch.schedules
    planned = claim_next(due)
    edited_spec = replace(due.spec, trigger=TriggerSpec(kind="interval", params={"every": 300}))
    edited_next = batch.now + timedelta(hours=1)
    edited = store.replace_schedule(edited_spec, next_occurrence_at=edited_next,
                                    next_run_at=edited_next)

    result = store.claim([planned], lease=grant)

    assert result.conflicts == ("report",)
    assert (result.dispatches, result.advanced) == ((), 0)
    assert store.executions() == []
    assert snapshot(store.get_schedule("report")) == snapshot(edited)
    assert store.get_schedule("report").spec.trigger.params == {"every": 300}


def test_a_claim_for_a_deleted_schedule_is_dropped_as_a_conflict(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    planned = claim_next(create_due(store, "report"))
    store.delete_schedule("report")

    result = store.claim([planned], lease=grant)

    assert (result.dispatches, result.conflicts, result.advanced) == ((), ("report",), 0)
    assert store.executions() == []


def test_a_conflict_does_not_stop_the_other_claims_of_the_batch(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    stale = claim_next(create_due(store, "edited"))
    fresh = claim_next(create_due(store, "kept"))
    edited = store.get_schedule("edited")
    store.replace_schedule(edited.spec, next_occurrence_at=edited.next_occurrence_at,
                           next_run_at=edited.next_run_at)

    result = store.claim([stale, fresh], lease=grant)

    assert result.conflicts == ("edited",)
    assert [d.execution.schedule_name for d in result.dispatches] == ["kept"]
    assert result.advanced == 1


def test_a_backlog_overlapping_an_earlier_claim_inserts_only_the_new_occurrences(
    store: Store,
) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    schedule = create_due(store, "report", steps_back=2)
    store.claim([claim_next(schedule)], lease=grant)
    first = schedule.next_occurrence_at
    assert first is not None
    points = [first + timedelta(seconds=60 * i) for i in range(3)]
    # An edit rewinds the schedule; the catch-up plan covers the claimed point again.
    rewound = store.replace_schedule(schedule.spec, next_occurrence_at=first,
                                     next_run_at=first)
    following = points[-1] + timedelta(seconds=60)

    result = store.claim([PlannedClaim(
        schedule_name="report", version=rewound.row_version,
        occurrences=tuple((p, p) for p in points), missed=4,
        next_occurrence_at=following, next_run_at=following,
    )], lease=grant)

    assert [d.execution.occurrence_at for d in result.dispatches] == points[1:]
    assert (result.duplicates, result.missed, result.advanced) == (1, 4, 1)
    assert [d.execution.missed for d in result.dispatches] == [0, 4]
    stored = store.get_schedule("report")
    assert (stored.total_runs, stored.total_missed, stored.last_occurrence_at) == (
        3, 4, points[-1])
    assert len(store.executions(schedule_name="report")) == 3


def test_a_claim_racing_an_edit_never_loses_either(backend: Backend) -> None:
    claimer, editor = backend.open_peer(), backend.open_peer()
    grant = claimer.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    for round_ in range(10):
        schedule = create_due(claimer, f"report-{round_}")
        planned = claim_next(schedule)
        later = claimer.now() + timedelta(hours=1)

        claimed, edited = run_together(
            partial(claimer.claim, [planned], lease=grant),
            partial(editor.replace_schedule, interval_spec(schedule.name, every=300),
                    next_occurrence_at=later, next_run_at=later,
                    expected_version=schedule.row_version),
        )

        # Whichever went first, the other saw it: a claim then a refused stale edit, or an
        # edit then a claim that inserted nothing.
        assert isinstance(claimed, ClaimResult), claimed
        stored = backend.store.get_schedule(schedule.name)
        executions = backend.store.executions(schedule_name=schedule.name)
        if isinstance(edited, ScheduleConflict):
            assert len(claimed.dispatches) == 1 and len(executions) == 1
            assert (stored.row_version, stored.next_run_at) == (schedule.row_version + 1,
                                                            planned.next_run_at)
        else:
            assert not isinstance(edited, BaseException), edited
            assert (claimed.dispatches, executions) == ((), [])
            assert snapshot(stored) == snapshot(edited)


def test_a_claim_not_before_an_instant_the_store_has_not_reached_changes_nothing(
        store: Store) -> None:
    grant = lease(store)
    schedule = create_due(store, "report")
    before = snapshot(store.get_schedule("report"))
    ahead = store.now() + timedelta(minutes=5)

    refused = store.claim([claim_next(schedule)], lease=grant, not_before=ahead)

    assert refused.dispatches == () and refused.early is not None
    assert refused.early < ahead
    assert snapshot(store.get_schedule("report")) == before
    assert store.executions() == []
    # Reached (an instant the store's clock has passed): claimed as any claim.
    done = store.claim([claim_next(schedule)], lease=grant, not_before=refused.early)
    assert len(done.dispatches) == 1 and done.early is None
