"""A backfill's outcomes and the re-runs of its failed occurrences, through the Schedules API on
every store: its own runs counted by outcome (a live claim of the same range is not its), the
failed ones run again under new keys in one audited round, refused when none failed or when the
round was requested already; and a recorded edit reverted, refused once the schedule moved."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.rules.backfill import Backfill, BackfillRun, BackfillStep
from goatbeat_celery.core.rules.backfill_outcomes import BackfillTally, rerun_key, tally_executions
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome
from goatbeat_celery.core.types.audit import AuditAction
from goatbeat_celery.core.types.errors import (
    AuditEntryNotFound,
    ConfigurationError,
    ScheduleConflict,
)
from goatbeat_celery.core.types.execution import ExecutionState, idempotency_key

from .conftest import Store, StoreClock
from .support import LONG_TTL, claim_next, create_due

M = timedelta(minutes=1)
W = "celery@a"


def ended(store: Store, key: str, outcome: RunOutcome) -> None:
    """A worker ran ``key``'s run to ``outcome``."""
    store.record_runs([RunEvent.started(key, run="r1", worker=W, age=timedelta(0))])
    store.record_runs([RunEvent.finished(key, run="r1", worker=W, age=timedelta(0),
                                         outcome=outcome)])


def backfilled(store: Store, clock: StoreClock, schedules: Schedules,
               points: int = 5) -> tuple[Backfill, list[datetime]]:
    """A backfill of the ``points`` minutes before now whose leader claimed the first four
    (one of them under a key of its own: a live claim took the occurrence's), sent them,
    and whose workers report: succeeded, failed, started, nothing."""
    grant = store.acquire("beat", "replica", LONG_TTL)
    assert grant is not None
    schedule = create_due(store, "job", steps_back=points - 1)
    # From the schedule's first point, not a second reading of the clock, which a minute may
    # have turned between (on MySQL under load, start came out a minute later).
    start = schedule.next_occurrence_at
    assert start is not None
    end = start + (points - 1) * M
    # The live schedule claims its first occurrence before the backfill exists.
    (live,) = store.claim([claim_next(schedule)], lease=grant).dispatches
    assert live.execution.occurrence_at == start
    clock.advance(0.001)
    backfill = schedules.backfill("job", start, end, mode="all")
    chosen = [start + k * M for k in range(4)]
    keys = [f"{idempotency_key('job', start)}:backfill-{backfill.id}",
            *(idempotency_key("job", p) for p in chosen[1:])]
    store.claim_backfill(BackfillStep(
        backfill_id=backfill.id, schedule_name="job", examined_before=0, examined=5,
        cursor=end, done=True,
        runs=tuple(BackfillRun(occurrence_at=p, key=k, reason="all")
                   for p, k in zip(chosen, keys, strict=True))), lease=grant)
    store.mark_submitted([live.key, *keys])
    ended(store, live.key, RunOutcome.FAILED)
    ended(store, keys[0], RunOutcome.SUCCEEDED)
    ended(store, keys[1], RunOutcome.FAILED)
    store.record_runs([RunEvent.started(keys[2], run="r1", worker=W, age=timedelta(0))])
    return store.get_backfill(backfill.id), chosen


def test_a_backfill_counts_its_own_runs_by_outcome(store: Store, clock: StoreClock) -> None:
    schedules = Schedules(store)
    backfill, points = backfilled(store, clock, schedules)
    found = schedules.backfill_outcomes(backfill.id)
    # The live claim's failure is not the backfill's: only its own four runs count.
    assert found.outcomes == {"succeeded": 1, "failed": 1, "running": 1, "submitted": 1}
    assert (found.not_recorded, found.not_run, found.to_examine) == (0, 1, 0)
    assert found.failed == (points[1],)
    assert found.reruns == ()


def test_the_failed_occurrences_run_again_under_new_keys_in_one_audited_round(
        store: Store, clock: StoreClock) -> None:
    schedules = Schedules(store, actor="ops")
    backfill, points = backfilled(store, clock, schedules)
    rerun = schedules.rerun_failed(backfill.id, reason="db was down")
    assert rerun.round == 1
    (execution,) = rerun.executions
    assert execution.key == rerun_key("job", points[1], backfill.id, 1) == (
        f"{idempotency_key('job', points[1])}:backfill-{backfill.id}-rerun-1")
    stored = store.executions_by_key([execution.key])[execution.key]
    assert (stored.state, stored.occurrence_at, stored.manual, stored.attempts) == (
        ExecutionState.CLAIMED, points[1], False, 0)
    assert stored.due_at == stored.claimed_at >= backfill.created_at  # type: ignore[operator]
    entry = schedules.audit("job", limit=1)[0]
    assert (entry.action, entry.actor, entry.reason) == (AuditAction.RERUN, "ops", "db was down")
    assert dict(entry.changes) == {"backfill": (None, backfill.id), "round": (None, 1),
                                   "occurrences": (None, 1)}
    found = schedules.backfill_outcomes(backfill.id)
    assert [(r.round, r.outcomes) for r in found.reruns] == [(1, {"claimed": 1})]
    # The failed occurrence is under way again: nothing is left to re-run.
    assert found.failed == ()
    with pytest.raises(ScheduleConflict, match="nothing to re-run"):
        schedules.rerun_failed(backfill.id)
    # Its re-run failed too: a second round runs it under yet another key.
    store.mark_submitted([execution.key])
    ended(store, execution.key, RunOutcome.FAILED)
    assert schedules.backfill_outcomes(backfill.id).failed == (points[1],)
    again = schedules.rerun_failed(backfill.id)
    assert [e.key for e in again.executions] == [rerun_key("job", points[1], backfill.id, 2)]


def test_a_round_requested_twice_is_written_once(store: Store, clock: StoreClock) -> None:
    schedules = Schedules(store)
    backfill, points = backfilled(store, clock, schedules)
    store.request_reruns(backfill, 1, [points[1]])
    with pytest.raises(ScheduleConflict, match="requested already"):
        store.request_reruns(backfill, 1, [points[1], points[2]])
    assert rerun_key("job", points[2], backfill.id, 1) not in store.executions_by_key(
        [rerun_key("job", points[2], backfill.id, 1)])


def test_executions_of_occurrences_claimed_since_an_instant(store: Store,
                                                            clock: StoreClock) -> None:
    schedules = Schedules(store)
    backfill, points = backfilled(store, clock, schedules)
    everything = store.occurrence_executions("job", backfill.start, backfill.end)
    since = store.occurrence_executions("job", backfill.start, backfill.end,
                                        claimed_since=backfill.created_at)
    assert len(everything) == 5 and len(since) == 4
    assert idempotency_key("job", points[0]) in {e.key for e in everything} - {
        e.key for e in since}


def test_an_edit_is_reverted_and_a_later_change_of_its_fields_refuses_it(store: Store) -> None:
    schedules = Schedules(store, actor="ops")
    schedules.create("job", "proj.tasks.tick", every=60, tags=["a"])
    schedules.update("job", every=120, tags=["a", "b"], description="two minutes")
    edit = schedules.audit("job", limit=1)[0]
    schedules.update("job", misfire_grace=30)  # another field: the revert still applies
    reverted = schedules.revert(edit.id, reason="too slow")
    assert reverted.spec.trigger.params["every"] == 60
    assert (reverted.spec.tags, reverted.spec.description) == (("a",), None)
    assert reverted.spec.misfire_grace == timedelta(seconds=30)
    entry = schedules.audit("job", limit=1)[0]
    assert (entry.action, entry.reason, entry.changes["reverts"]) == (
        AuditAction.REVERT, "too slow", (None, edit.id))
    assert entry.changes["tags"] == (["a", "b"], ["a"])
    # Reverting it again finds the fields moved since (by the revert itself).
    with pytest.raises(ScheduleConflict, match="changed since") as raised:
        schedules.revert(edit.id)
    assert 'tags: now ["a"], the edit left ["a", "b"]' in str(raised.value)
    with pytest.raises(ConfigurationError, match="is a create, not an edit"):
        schedules.revert(schedules.audit("job", limit=10)[-1].id)
    with pytest.raises(ConfigurationError, match="is a revert, not an edit"):
        schedules.revert(entry.id)
    with pytest.raises(AuditEntryNotFound):
        schedules.revert(entry.id + 1000)


def test_the_store_counts_a_backfill_as_its_executions_read_one_by_one_count(
        store: Store, clock: StoreClock) -> None:
    """backfill_tally (one grouped read on SQL) equals tally_executions over the executions it
    stands for, through two re-run rounds, a live claim and a manual run of the range."""
    schedules = Schedules(store)
    backfill, points = backfilled(store, clock, schedules)
    first = schedules.rerun_failed(backfill.id)
    store.mark_submitted([e.key for e in first.executions])
    ended(store, first.executions[0].key, RunOutcome.FAILED)
    ended(store, f"{idempotency_key('job', points[2])}", RunOutcome.FAILED)
    schedules.rerun_failed(backfill.id)
    schedules.run_now("job")

    def by_one() -> BackfillTally:
        return tally_executions(backfill, store.occurrence_executions(
            "job", backfill.start, backfill.end, claimed_since=backfill.created_at))

    tally = store.backfill_tally(backfill)
    assert tally == by_one()
    assert [(c.round, c.outcome, c.runs) for c in tally.counts] == [
        (0, "failed", 2), (0, "submitted", 1), (0, "succeeded", 1), (1, "failed", 1),
        (2, "claimed", 2)]
    assert tally.failed == ()
