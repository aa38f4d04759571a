"""Small builders shared by the conformance tests; the package's recording broker is imported
from here too."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from goatbeat_celery.core.protocols import ScheduleStore
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome
from goatbeat_celery.core.rules.triggers import IntervalTrigger
from goatbeat_celery.core.types.claims import PlannedClaim
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from goatbeat_celery.testing import RecordingSubmitter as RecordingSubmitter

from .conftest import Store

#: Long enough that no test step outlives it, on any backend.
LONG_TTL = timedelta(seconds=60)
T = TypeVar("T")


def interval_spec(name: str, every: float = 60, **fields: Any) -> ScheduleSpec:
    return ScheduleSpec(name=name, task="proj.tasks.tick",
                        trigger=TriggerSpec(kind="interval", params={"every": every}), **fields)


def grid_point_before(instant: datetime, every: float, steps_back: int = 0) -> datetime:
    """The ``steps_back``-th interval grid point at or before ``instant``."""
    trigger = IntervalTrigger(timedelta(seconds=every))
    point = trigger.next_after(instant)
    assert point is not None
    return point - timedelta(seconds=every) * (steps_back + 1)


def create_due(store: ScheduleStore, name: str, *, every: float = 60, steps_back: int = 0,
               **fields: Any) -> Schedule:
    """An interval schedule whose next occurrence is a grid point already due by the store."""
    occurrence = grid_point_before(store.now(), every, steps_back)
    return store.create_schedule(interval_spec(name, every, **fields),
                                 next_occurrence_at=occurrence, next_run_at=occurrence)


def claim_next(schedule: Schedule, every: float = 60) -> PlannedClaim:
    """Plan the claim of a schedule's next occurrence (on time, nothing missed)."""
    occurrence = schedule.next_occurrence_at
    assert occurrence is not None
    following = occurrence + timedelta(seconds=every)
    return PlannedClaim(schedule_name=schedule.name, version=schedule.row_version,
                        occurrences=((occurrence, occurrence),), missed=0,
                        next_occurrence_at=following, next_run_at=following)


def snapshot(schedule: Schedule) -> tuple[Any, ...]:
    """What a refused write must leave exactly as it was."""
    return (schedule.spec, schedule.row_version, schedule.next_occurrence_at, schedule.next_run_at,
            schedule.last_occurrence_at, schedule.total_runs, schedule.total_missed)


def run_together(*calls: Callable[[], T]) -> list[T | BaseException]:
    """Run the calls in threads released at the same instant; results (or errors) in order."""
    barrier = threading.Barrier(len(calls))
    results: list[T | BaseException] = [RuntimeError("did not finish")] * len(calls)

    def run(index: int, call: Callable[[], T]) -> None:
        barrier.wait()
        try:
            results[index] = call()
        except BaseException as exc:  # reported to the test, which asserts on it
            results[index] = exc

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), "a concurrent call never returned"
    return results


def lease(store: Store) -> LeaseGrant:
    grant = store.acquire("beat", "replica", LONG_TTL)
    assert grant is not None
    return grant


def claim(schedule: Schedule, steps: int = 1, **policies: object) -> PlannedClaim:
    """The claim of the schedule's next ``steps`` minute grid points."""
    first = schedule.next_occurrence_at
    assert first is not None
    points = tuple((first + timedelta(minutes=i), first + timedelta(minutes=i))
                   for i in range(steps))
    following = first + timedelta(minutes=steps)
    return PlannedClaim(schedule_name=schedule.name, version=schedule.row_version,
                        occurrences=points, missed=0, next_occurrence_at=following,
                        next_run_at=following, **policies)  # type: ignore[arg-type]


def report(store: Store, key: str, outcome: RunOutcome | None = RunOutcome.SUCCEEDED) -> None:
    events = [RunEvent.started(key, run="r", worker="w", age=timedelta(0))]
    if outcome is not None:
        events.append(RunEvent.finished(key, run="r", worker="w", age=timedelta(0),
                                        outcome=outcome))
    store.record_runs(events)
