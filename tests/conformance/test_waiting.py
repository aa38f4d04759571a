"""What waits for the leader, read in one round trip (ScheduleStore.waiting): each part agrees
with the call it stands for (the due read's next instant, finished_runs, take_pending, the
runs mark_lost may judge), on every store."""

from __future__ import annotations

from datetime import timedelta

from goatbeat_celery.core.rules.alerts import AlertChange, AlertRule
from goatbeat_celery.core.rules.backfill import BackfillRequest
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome
from goatbeat_celery.core.types.claims import Waiting
from goatbeat_celery.core.types.settlement import RunSettlement

from .conftest import Store
from .support import LONG_TTL, claim_next, create_due, interval_spec

A = "celery@a"


def parts(waiting: Waiting) -> tuple[bool, bool, bool]:
    return waiting.unsettled, waiting.claimed, waiting.open_runs


def test_an_empty_store_has_nothing_waiting_and_tells_its_clock(store: Store) -> None:
    before = store.now()
    waiting = store.waiting()
    after = store.now()

    assert before <= waiting.now <= after
    assert waiting.now.utcoffset() == timedelta(0)
    assert waiting.next_due_at is None
    assert parts(waiting) == (False, False, False)


def test_the_next_due_instant_is_the_due_reads_over_enabled_schedules(store: Store) -> None:
    later = store.now() + timedelta(hours=1)
    store.create_schedule(interval_spec("later"), next_occurrence_at=later, next_run_at=later)
    sooner = later - timedelta(minutes=30)
    store.create_schedule(interval_spec("off", enabled=False), next_occurrence_at=sooner,
                          next_run_at=sooner)
    assert store.waiting().next_due_at == later == store.due_schedules(10).next_due_at

    due = create_due(store, "due")

    assert store.waiting().next_due_at == due.next_run_at == store.due_schedules(10).next_due_at


def test_a_claim_waits_until_it_is_sent_and_its_run_until_it_ends(store: Store) -> None:
    grant = store.acquire("beat", "replica", LONG_TTL)
    assert grant is not None
    schedule = create_due(store, "job")
    (dispatch,) = store.claim([claim_next(schedule)], lease=grant).dispatches
    key = dispatch.key
    assert parts(store.waiting()) == (False, True, False)  # claimed: take_pending's

    store.mark_submitted([key])
    assert parts(store.waiting()) == (False, False, True)  # sent, not started: may be lost
    store.record_runs([RunEvent.started(key, run="r1", worker=A, age=timedelta(0))])
    assert parts(store.waiting()) == (False, False, True)  # running
    store.record_runs([RunEvent.finished(key, run="r1", worker=A, age=timedelta(0),
                                         outcome=RunOutcome.SUCCEEDED)])

    assert parts(store.waiting()) == (True, False, False)  # ended, its end to settle
    assert [run.execution.key for run in store.finished_runs(10)] == [key]
    store.settle_runs([RunSettlement(key=key, schedule_name="job", version=None)],
                      lease=grant)
    assert parts(store.waiting()) == (False, False, False)
    assert store.finished_runs(10) == []


def test_a_retrying_run_may_still_be_lost(store: Store) -> None:
    grant = store.acquire("beat", "replica", LONG_TTL)
    assert grant is not None
    (dispatch,) = store.claim([claim_next(create_due(store, "job"))], lease=grant).dispatches
    store.mark_submitted([dispatch.key])
    store.record_runs([
        RunEvent.started(dispatch.key, run="r1", worker=A, age=timedelta(0)),
        RunEvent.retried(dispatch.key, run="r1", worker=A, age=timedelta(0))])

    assert store.waiting().open_runs


def test_alerts_wait_while_a_run_is_in_flight_or_an_alert_is_open(store: Store) -> None:
    grant = store.acquire("beat", "replica", LONG_TTL)
    assert grant is not None
    assert store.waiting().alerts_waiting is False
    (dispatch,) = store.claim([claim_next(create_due(store, "job"))], lease=grant).dispatches
    assert store.waiting().alerts_waiting is True  # claimed
    store.mark_submitted([dispatch.key])
    store.record_runs([RunEvent.started(dispatch.key, run="r1", worker=A, age=timedelta(0)),
                       RunEvent.finished(dispatch.key, run="r1", worker=A, age=timedelta(0),
                                         outcome=RunOutcome.FAILED)])
    assert store.waiting().alerts_waiting is False  # ended: nothing in flight
    store.record_alerts([AlertChange(schedule_name="job", rule=AlertRule.FAILED, action="open",
                                     reason="failed", key=dispatch.key)], lease=grant)
    assert store.waiting().alerts_waiting is True


def test_a_backfill_waits_while_it_is_active(store: Store) -> None:
    """Asked on its own, and with a leader's renewal (one statement on PostgreSQL)."""
    assert store.acquire("beat", "replica", LONG_TTL) is not None
    assert store.waiting().backfills is False
    create_due(store, "job")
    end = store.now()
    backfill = store.create_backfill(BackfillRequest(
        schedule_name="job", start=end - timedelta(minutes=2), end=end, total=3))
    assert store.waiting().backfills is True
    assert [b.id for b in store.active_backfills(10)] == [backfill.id]
    store.wait(0)
    [grant], _ = store.acquire_watching(["beat"], "replica", LONG_TTL, "beat.")
    assert grant is not None
    assert store.waiting().backfills is True

    store.cancel_backfill(backfill.id)

    assert store.waiting().backfills is False
    assert store.active_backfills(10) == []
