"""oldest_pending: the claimed execution due earliest, which status displays measure lag by."""

from __future__ import annotations

from .conftest import Store
from .support import LONG_TTL, claim_next, create_due


def test_no_pending_execution_reads_as_none(store: Store) -> None:
    assert store.oldest_pending() is None


def test_the_claim_due_earliest_is_the_oldest_pending(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    older = create_due(store, "older", steps_back=3)
    newer = create_due(store, "newer", steps_back=1)
    result = store.claim([claim_next(newer), claim_next(older)], lease=grant)
    assert len(result.dispatches) == 2

    oldest = store.oldest_pending()

    assert oldest is not None
    assert oldest.schedule_name == "older"
    assert oldest.due_at == older.next_run_at


def test_submitted_executions_are_not_pending(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    older = create_due(store, "older", steps_back=3)
    newer = create_due(store, "newer", steps_back=1)
    dispatches = store.claim([claim_next(older), claim_next(newer)], lease=grant).dispatches
    by_name = {d.execution.schedule_name: d.key for d in dispatches}

    store.mark_submitted([by_name["older"]])

    oldest = store.oldest_pending()
    assert oldest is not None and oldest.key == by_name["newer"]
    store.mark_submitted([by_name["newer"]])
    assert store.oldest_pending() is None


def test_a_manual_run_is_pending_until_submitted(store: Store) -> None:
    create_due(store, "report")

    requested = store.request_run("report")

    oldest = store.oldest_pending()
    assert oldest is not None
    assert (oldest.key, oldest.manual) == (requested.key, True)
