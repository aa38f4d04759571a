"""prune: old history goes in small batches; claims still waiting for the broker never do."""

from __future__ import annotations

from datetime import timedelta

from goatbeat_celery.core.types.claims import PlannedClaim
from goatbeat_celery.core.types.execution import ExecutionState

from .conftest import Store
from .support import LONG_TTL, create_due


def _claim_backlog(store: Store, count: int) -> list[str]:
    """Claim ``count`` occurrences of one schedule in one transaction; returns their keys."""
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    schedule = create_due(store, "report", steps_back=count - 1)
    first = schedule.next_occurrence_at
    assert first is not None
    points = [first + timedelta(minutes=i) for i in range(count)]
    following = points[-1] + timedelta(minutes=1)
    result = store.claim([PlannedClaim(
        schedule_name="report", version=schedule.row_version,
        occurrences=tuple((p, p) for p in points), missed=0,
        next_occurrence_at=following, next_run_at=following,
    )], lease=grant)
    assert len(result.dispatches) == count
    return [d.key for d in result.dispatches]


def test_prune_deletes_only_old_rows_that_are_not_claimed_at_most_limit(store: Store) -> None:
    keys = _claim_backlog(store, 5)
    store.mark_submitted(keys[:4])  # the last one is still waiting for the broker
    (claimed_at,) = {e.claimed_at for e in store.executions()}

    # Strictly before: rows claimed at the cut-off instant stay.
    assert store.prune(before=claimed_at, limit=10) == 0
    later = claimed_at + timedelta(microseconds=1)
    assert store.prune(before=later, limit=3) == 3
    assert store.prune(before=later, limit=3) == 1
    assert store.prune(before=later, limit=3) == 0

    (left,) = store.executions()
    assert (left.key, left.state) == (keys[4], ExecutionState.CLAIMED)


def test_prune_keeps_rows_claimed_after_the_cut_off(store: Store) -> None:
    keys = _claim_backlog(store, 2)
    store.mark_submitted(keys)

    assert store.prune(before=store.now() - timedelta(days=7), limit=10) == 0

    assert len(store.executions()) == 2


def test_prune_deletes_backfills_that_finished_before_the_cut_off_and_never_active_ones(
        store: Store) -> None:
    from goatbeat_celery.core.rules.backfill import BackfillRequest

    create_due(store, "report")
    end = store.now().replace(microsecond=0) - timedelta(hours=1)
    asked = BackfillRequest(schedule_name="report", start=end - timedelta(minutes=4), end=end,
                            total=5)
    finished = store.cancel_backfill(store.create_backfill(asked).id)
    active = store.create_backfill(asked)
    assert finished.finished_at is not None

    # Strictly before, like executions.
    assert store.prune(before=finished.finished_at, limit=10) == 0
    assert store.prune(before=store.now() + timedelta(days=1), limit=10) == 1

    assert [b.id for b in store.list_backfills()] == [active.id]
    # A new backfill never takes a pruned one's id.
    assert store.create_backfill(asked).id not in {finished.id, active.id}
