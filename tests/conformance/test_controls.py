"""Schedule controls on every store: the control columns round-trip; a claim never runs past
``max_runs``, judged by the run count locked in the claim's own transaction (a planner's stale
view, a second replica or a new leader cannot exceed it); a pause writes its note and end, and
an enabled write clears them; listing filters by tags, every tag required, across pages."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from goatbeat_celery.core.types.claims import PlannedClaim
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.schedule import PauseNote, Schedule

from .conftest import Backend, Store
from .support import LONG_TTL, create_due, interval_spec, run_together

M = timedelta(minutes=1)
START = datetime(2030, 5, 1, 8, 0, tzinfo=UTC)


def lease(store: Store, holder: str = "replica") -> LeaseGrant:
    grant = store.acquire("beat", holder, LONG_TTL)
    assert grant is not None
    return grant


def claim(schedule: Schedule, steps: int = 1) -> PlannedClaim:
    """The claim of the schedule's next ``steps`` minute grid points, limited as it says."""
    first = schedule.next_occurrence_at
    assert first is not None
    points = tuple((first + i * M, first + i * M) for i in range(steps))
    following = first + steps * M
    return PlannedClaim(schedule_name=schedule.name, version=schedule.row_version,
                        occurrences=points, missed=0, next_occurrence_at=following,
                        next_run_at=following, max_runs=schedule.spec.max_runs)


def test_the_control_columns_round_trip(store: Store) -> None:
    spec = interval_spec("job", start_at=START, end_at=START + 60 * M, max_runs=7,
                         description="Nightly invoices.\nAsk billing first.",
                         tags=("billing", "nightly"))
    store.create_schedule(spec, next_occurrence_at=None, next_run_at=None)
    read = store.get_schedule("job")
    assert read.spec == spec
    assert read.spec.start_at is not None and read.spec.start_at.tzinfo is UTC
    assert read.paused_until is None and read.damage == ()


def test_a_schedule_without_controls_reads_as_unbounded(store: Store) -> None:
    store.create_schedule(interval_spec("job"), next_occurrence_at=None, next_run_at=None)
    spec = store.get_schedule("job").spec
    assert (spec.start_at, spec.end_at, spec.max_runs, spec.description, spec.tags) == (
        None, None, None, None, ())


def test_a_claim_runs_no_more_than_the_runs_left(store: Store) -> None:
    grant = lease(store)
    schedule = create_due(store, "job", max_runs=2, steps_back=4)
    result = store.claim([claim(schedule, steps=5)], lease=grant)
    assert len(result.dispatches) == 2
    after = store.get_schedule("job")
    assert (after.total_runs, after.next_occurrence_at, after.next_run_at) == (2, None, None)
    assert [d.execution.occurrence_at for d in result.dispatches] == [
        schedule.next_occurrence_at, schedule.next_occurrence_at + M]  # type: ignore[operator]


def test_the_limit_is_judged_by_the_count_locked_in_the_claim(store: Store) -> None:
    grant = lease(store)
    schedule = create_due(store, "job", max_runs=1, steps_back=2)
    store.claim([claim(schedule)], lease=grant)
    current = store.get_schedule("job")
    # A row edited back to a next run with its version current: the planner offers a run,
    # but the count read under the claim's lock has none left.
    store.replace_schedule(current.spec, next_occurrence_at=schedule.next_occurrence_at,
                           next_run_at=schedule.next_run_at)
    again = store.get_schedule("job")
    result = store.claim([claim(replace(again, total_runs=0))], lease=grant)
    assert result.dispatches == ()
    after = store.get_schedule("job")
    assert (after.total_runs, after.next_run_at) == (1, None)


def test_two_claims_planned_from_one_read_never_exceed_the_limit(backend: Backend) -> None:
    store = backend.store
    grant = lease(store)
    schedule = create_due(store, "job", max_runs=1, steps_back=2)
    peer = backend.open_peer()
    planned = claim(schedule, steps=2)
    results = run_together(lambda: store.claim([planned], lease=grant),
                           lambda: peer.claim([planned], lease=grant))
    sent = [d for r in results if not isinstance(r, BaseException) for d in r.dispatches]
    assert len(sent) <= 1
    assert store.get_schedule("job").total_runs == len(sent) == 1


def test_a_new_leader_continues_the_count(store: Store) -> None:
    first = lease(store, "a")
    schedule = create_due(store, "job", max_runs=2, steps_back=3)
    store.claim([claim(schedule)], lease=first)
    store.release(first)
    second = lease(store, "b")
    current = store.get_schedule("job")
    result = store.claim([claim(current, steps=3)], lease=second)
    assert len(result.dispatches) == 1
    assert store.get_schedule("job").total_runs == 2


def test_a_pause_writes_its_note_and_end_and_resume_clears_them(store: Store) -> None:
    created = store.create_schedule(interval_spec("job"), next_occurrence_at=START,
                                    next_run_at=START)
    paused = store.replace_schedule(created.spec, next_occurrence_at=START + 10 * M,
                                    next_run_at=START + 10 * M,
                                    pause=PauseNote(reason="freeze", until=START + 10 * M))
    read = store.get_schedule("job")
    assert (read.paused_reason, read.paused_until) == ("freeze", START + 10 * M)
    assert read.paused_until is not None and read.paused_until.tzinfo is UTC
    assert paused.paused_until == read.paused_until
    stopped = store.replace_schedule(replace(created.spec, enabled=False),
                                     next_occurrence_at=None, next_run_at=None,
                                     pause=PauseNote(reason="by hand"))
    assert (stopped.paused_reason, stopped.paused_until, stopped.spec.enabled) == (
        "by hand", None, False)
    resumed = store.replace_schedule(created.spec, next_occurrence_at=START,
                                     next_run_at=START)
    assert (resumed.paused_reason, resumed.paused_until) == (None, None)


def test_listing_by_tags_needs_every_tag(store: Store) -> None:
    for name, tags in (("a", ("billing", "nightly")), ("b", ("billing",)), ("c", ()),
                       ("d", ("nightly", "billing", "eu"))):
        store.create_schedule(interval_spec(name, tags=tags), next_occurrence_at=None,
                              next_run_at=None)
    assert [s.name for s in store.list_schedules(tags=["billing"])] == ["a", "b", "d"]
    assert [s.name for s in store.list_schedules(tags=["nightly", "billing"])] == ["a", "d"]
    assert [s.name for s in store.list_schedules(tags=["billing"], limit=2)] == ["a", "b"]
    assert [s.name for s in store.list_schedules(tags=["billing"], after="a")] == ["b", "d"]
    assert store.list_schedules(tags=["none"]) == []


@pytest.mark.slow
def test_listing_by_tags_pages_through_many_untagged_rows(store: Store) -> None:
    for index in range(620):
        tags = ("rare",) if index in (3, 611) else ()
        store.create_schedule(interval_spec(f"s{index:04d}", tags=tags),
                              next_occurrence_at=None, next_run_at=None)
    assert [s.name for s in store.list_schedules(tags=["rare"])] == ["s0003", "s0611"]
    assert [s.name for s in store.list_schedules(tags=["rare"], limit=1)] == ["s0003"]
