"""``run_origin``: run-now and backfill runs are told from the schedule's own runs, a backfill
run under its occurrence's own key by the backfills' ranges and lives."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from goatbeat_celery.core.rules.backfill import Backfill, BackfillMode, backfill_key
from goatbeat_celery.core.rules.origin import run_origin
from goatbeat_celery.core.types.execution import (
    Execution,
    ExecutionState,
    idempotency_key,
    manual_key,
)

T = datetime(2030, 1, 1, 12, 0, tzinfo=timezone.utc)
M = timedelta(minutes=1)
BACKFILL = Backfill(id=7, schedule_name="job", start=T - 60 * M, end=T - 30 * M,
                    mode=BackfillMode.MISSING, created_at=T - M, finished_at=T + M)


def execution(key: str, occurrence: datetime, due: datetime, claimed: datetime, *,
              manual: bool = False) -> Execution:
    return Execution(key=key, schedule_name="job", occurrence_at=occurrence, due_at=due,
                     token=1, state=ExecutionState.CLAIMED, claimed_at=claimed, manual=manual)


def test_a_run_now_is_told_by_its_flag() -> None:
    assert run_origin(execution(manual_key("job", T), T, T, T, manual=True)) == "run-now"


def test_a_backfill_run_is_told_by_its_derived_key_or_by_the_backfill() -> None:
    past = T - 45 * M
    derived = execution(backfill_key("job", past, 7), past, T, T)
    own = execution(idempotency_key("job", past), past, T, T)

    assert run_origin(derived) == "backfill 7"
    assert run_origin(own, [BACKFILL]) == "backfill 7"
    assert run_origin(own, []) is None  # nothing to tell it by


def test_the_schedules_own_runs_are_not_taken_for_a_backfills() -> None:
    past = T - 45 * M
    late = execution(idempotency_key("job", past), past, past, T)  # a catch-up: due earlier
    on_time = execution(idempotency_key("job", T), T, T, T)  # claimed at its due instant
    before = execution(idempotency_key("job", past), past, T - 2 * M, T - 2 * M)
    outside = execution(idempotency_key("job", T - 10 * M), T - 10 * M, T, T)

    assert [run_origin(e, [BACKFILL]) for e in (late, on_time, before, outside)] == [
        None, None, None, None]
