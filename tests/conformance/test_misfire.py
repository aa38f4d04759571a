"""Three hours of downtime, planned by a real Engine and recorded by the store, per policy."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest

from goatbeat_celery.core.types.execution import ExecutionState, idempotency_key
from goatbeat_celery.core.types.spec import MisfirePolicy
from goatbeat_celery.testing import build_engine

from .conftest import Store, StoreClock
from .support import RecordingSubmitter, grid_point_before, interval_spec

EVERY = 600  # ten minutes: eighteen grid points in three hours
DOWN_POINTS = 18


@dataclass(frozen=True)
class Case:
    policy: MisfirePolicy
    max_catchup: int | None
    run: range  # indexes of the missed grid points that run, oldest first
    missed: int  # recorded on the schedule
    missed_per_run: tuple[int, ...]  # recorded on each execution: on the last one only
    #: When none runs: the newest point, recorded skipped (never sent) with the missed count.
    given_up: int | None = None


CASES = {
    "latest": Case(MisfirePolicy.LATEST, None, range(17, 18), 17, (17,)),
    "all-with-max-catchup": Case(MisfirePolicy.ALL, 5, range(13, 18), 13, (0, 0, 0, 0, 13)),
    "skip": Case(MisfirePolicy.SKIP, None, range(0), 18, (), given_up=17),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_three_hours_of_downtime_follow_the_misfire_policy(
    store: Store, clock: StoreClock, case: Case
) -> None:
    # The schedule's next occurrence is three hours behind the store's clock, as after an
    # outage; a grace of one hour keeps the last six points within it. A grid point about to pass
    # would add a nineteenth point mid-test, so start just after it instead.
    upcoming = grid_point_before(store.now(), EVERY, steps_back=-1)
    if upcoming - store.now() < timedelta(seconds=5):
        clock.move_to(upcoming + timedelta(milliseconds=1))
    first = grid_point_before(store.now(), EVERY, steps_back=DOWN_POINTS - 1)
    store.create_schedule(
        interval_spec("report", EVERY, misfire_policy=case.policy,
                      misfire_grace=timedelta(hours=1),
                      max_catchup=case.max_catchup),
        next_occurrence_at=first, next_run_at=first,
    )
    submitter = RecordingSubmitter()
    engine = build_engine(store, clock=clock, submitter=submitter, holder="a")

    engine.tick()

    points = [first + timedelta(seconds=EVERY * i) for i in range(DOWN_POINTS + 1)]
    expected_keys = [idempotency_key("report", points[i]) for i in case.run]
    assert submitter.keys == expected_keys
    rows = sorted(store.executions(schedule_name="report"), key=lambda e: e.occurrence_at)
    executions = [e for e in rows if not e.given_up]
    assert [e.key for e in executions] == expected_keys
    given_up = [(e.key, e.state, e.missed) for e in rows if e.given_up]
    assert given_up == ([] if case.given_up is None else [
        (idempotency_key("report", points[case.given_up]), ExecutionState.SKIPPED, case.missed)])
    assert all(e.state is ExecutionState.SUBMITTED for e in executions)
    assert tuple(e.missed for e in executions) == case.missed_per_run
    schedule = store.get_schedule("report")
    assert (schedule.total_runs, schedule.total_missed) == (len(case.run), case.missed)
    assert (schedule.next_occurrence_at, schedule.next_run_at) == (points[-1], points[-1])
    assert store.due_schedules(10).schedules == ()


def test_without_a_grace_the_newest_occurrence_runs_after_a_day_down(
        store: Store, clock: StoreClock) -> None:
    # The default: no grace, policy latest, as Celery's beat after an outage.
    upcoming = grid_point_before(store.now(), EVERY, steps_back=-1)
    if upcoming - store.now() < timedelta(seconds=5):
        clock.move_to(upcoming + timedelta(milliseconds=1))
    first = grid_point_before(store.now(), EVERY, steps_back=143)  # a day of ten minutes
    store.create_schedule(interval_spec("report", EVERY), next_occurrence_at=first,
                          next_run_at=first)
    submitter = RecordingSubmitter()

    build_engine(store, clock=clock, submitter=submitter, holder="a").tick()

    newest = first + timedelta(seconds=EVERY * 143)
    assert submitter.keys == [idempotency_key("report", newest)]
    (run,) = store.executions(schedule_name="report")
    assert (run.state, run.missed) == (ExecutionState.SUBMITTED, 143)
