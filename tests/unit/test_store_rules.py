"""The rules every store executes, decided once in the core: what a claim writes
(``core.rules.claims``), when a lease may be taken and when its fence holds
(``core.rules.fence``), and how a schedule is set aside (``core.rules.faults``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest

from goatbeat_celery.core.rules.claims import (
    ATTEMPTS_MAX,
    claim_executions,
    manual_execution,
    manual_run_exists,
    next_attempt,
    plan_claims,
)
from goatbeat_celery.core.rules.faults import FAULTS_MAX, plan_set_aside
from goatbeat_celery.core.rules.fence import (
    COUNTER_MAX,
    check_fence,
    fence_holds,
    fenced_clock,
    grant_lease,
    next_counter,
    released_by,
)
from goatbeat_celery.core.rules.validation import stored_value
from goatbeat_celery.core.types.claims import Dispatch, PlannedClaim
from goatbeat_celery.core.types.errors import LeaseLost, ScheduleConflict
from goatbeat_celery.core.types.execution import Execution, ExecutionState, idempotency_key
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.lease import LeaseGrant, LeaseInfo, lease_live
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.set_aside import SetAside, set_aside_delay

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
TTL = timedelta(seconds=30)


def claim(name: str = "report", *, version: int = 3, count: int = 2, missed: int = 0,
          expires_after: timedelta | None = None) -> PlannedClaim:
    occurrences = tuple((NOW - MINUTE * (count - i), NOW - MINUTE * (count - i) + MINUTE / 2)
                        for i in range(count))
    return PlannedClaim(schedule_name=name, version=version, occurrences=occurrences,
                        missed=missed, next_occurrence_at=NOW + MINUTE,
                        next_run_at=NOW + MINUTE, expires_after=expires_after)


def dispatch(execution: Execution) -> Dispatch:
    return Dispatch(execution=execution, task="proj.tasks.tick", args=(), kwargs={}, options={})


# -- what a claim writes -------------------------------------------------------------------
def test_a_claim_writes_one_claimed_first_attempt_per_occurrence_under_the_lease_token() -> None:
    planned = claim(count=3)

    rows = claim_executions(planned, token=7, now=NOW)

    assert [(r.occurrence_at, r.due_at) for r in rows] == list(planned.occurrences)
    assert [r.key for r in rows] == [idempotency_key("report", o) for o, _ in planned.occurrences]
    assert {(r.state, r.token, r.attempts, r.claimed_at, r.manual) for r in rows} == {
        (ExecutionState.CLAIMED, 7, 1, NOW, False)}


def test_the_missed_count_is_recorded_on_the_last_execution_only() -> None:
    rows = claim_executions(claim(count=3, missed=5), token=1, now=NOW)

    assert [r.missed for r in rows] == [0, 0, 5]


def test_each_execution_expires_its_starting_deadline_after_its_due_instant() -> None:
    planned = claim(count=2, expires_after=timedelta(seconds=90))

    rows = claim_executions(planned, token=1, now=NOW)

    assert [r.expires_at for r in rows] == [due + timedelta(seconds=90)
                                           for _, due in planned.occurrences]
    assert [r.expires_at for r in claim_executions(claim(), token=1, now=NOW)] == [None, None]


def test_a_claim_whose_version_holds_is_planned_and_advances_its_schedule() -> None:
    plan = plan_claims([claim(version=3, missed=2)], {"report": 3}, token=1, now=NOW)

    [advance] = plan.advances
    assert (advance.name, advance.version, advance.runs, advance.missed) == ("report", 3, 2, 2)
    assert advance.last_occurrence_at == plan.executions[-1].occurrence_at
    assert advance.next_run_at == NOW + MINUTE
    assert plan.conflicts == ()


@pytest.mark.parametrize("versions", [{"report": 4}, {}], ids=["version-changed", "deleted"])
def test_a_claim_whose_version_changed_or_whose_schedule_is_gone_is_a_conflict(
        versions: dict[str, int]) -> None:
    plan = plan_claims([claim(version=3)], versions, token=1, now=NOW)

    assert (plan.executions, plan.advances, plan.conflicts) == ((), (), ("report",))


def test_a_schedule_locked_elsewhere_is_left_for_a_later_batch_without_a_conflict() -> None:
    plan = plan_claims([claim()], {}, token=1, now=NOW, skip={"report"})

    assert (plan.executions, plan.advances, plan.conflicts) == ((), (), ())


def test_a_claim_without_occurrences_keeps_the_last_occurrence() -> None:
    plan = plan_claims([claim(count=0)], {"report": 3}, token=1, now=NOW)

    [advance] = plan.advances
    assert (advance.last_occurrence_at, advance.runs, plan.executions) == (None, 0, ())


def test_a_second_claim_of_one_schedule_in_a_batch_holds_only_at_the_next_version() -> None:
    first, again = claim(version=3, count=1), claim(version=3, count=1)
    later = PlannedClaim(schedule_name="report", version=4,
                         occurrences=((NOW, NOW),), missed=0, next_occurrence_at=None,
                         next_run_at=None)

    plan = plan_claims([first, again, later], {"report": 3}, token=1, now=NOW)

    assert [a.version for a in plan.advances] == [3, 4]
    assert plan.conflicts == ("report",)


def test_an_occurrence_planned_twice_in_a_batch_is_inserted_once_and_counted_duplicate() -> None:
    first = claim(version=3, count=2)
    overlapping = PlannedClaim(schedule_name="report", version=4,
                               occurrences=first.occurrences[1:], missed=0,
                               next_occurrence_at=None, next_run_at=None)

    plan = plan_claims([first, overlapping], {"report": 3}, token=1, now=NOW)
    result = plan.result({e.key for e in plan.executions}, dispatch)

    assert len(plan.executions) == 2
    assert [a.runs for a in plan.advances] == [2, 0]
    assert (len(result.dispatches), result.duplicates, result.advanced) == (2, 1, 2)


def test_runs_count_only_the_executions_the_store_inserted() -> None:
    plan = plan_claims([claim(count=3), claim("other", count=1)], {"report": 3, "other": 3},
                       token=1, now=NOW)
    existing = plan.executions[0].key  # claimed before a crash

    counted = plan.counted({e.key for e in plan.executions if e.key != existing})

    assert [(a.name, a.runs) for a in counted] == [("report", 2), ("other", 1)]
    assert [a.runs for a in plan.advances] == [3, 1], "the plan itself is unchanged"


def test_the_result_dispatches_what_was_inserted_in_claim_order() -> None:
    plan = plan_claims([claim(count=2, missed=1), claim("gone"), claim("other", count=1)],
                       {"report": 3, "other": 3}, token=1, now=NOW)
    inserted = {e.key for e in plan.executions[1:]}

    result = plan.result(inserted, dispatch)

    assert [d.key for d in result.dispatches] == [e.key for e in plan.executions[1:]]
    assert (result.advanced, result.conflicts, result.duplicates, result.missed) == (
        2, ("gone",), 1, 1)


def test_a_manual_run_is_claimed_now_under_its_own_key_with_no_attempt_yet() -> None:
    execution = manual_execution("report", NOW)

    assert execution.key.endswith(":manual") and execution.manual
    assert (execution.occurrence_at, execution.due_at, execution.claimed_at) == (NOW, NOW, NOW)
    assert (execution.state, execution.attempts, execution.token) == (
        ExecutionState.CLAIMED, 0, 0)
    conflict = manual_run_exists(execution)
    assert isinstance(conflict, ScheduleConflict) and "'report'" in str(conflict)


@pytest.mark.parametrize("attempts,expected", [(0, 1), (4, 5), (ATTEMPTS_MAX - 1, ATTEMPTS_MAX),
                                               (ATTEMPTS_MAX, ATTEMPTS_MAX),
                                               (ATTEMPTS_MAX + 9, ATTEMPTS_MAX + 9)])
def test_attempts_stop_counting_at_their_limit(attempts: int, expected: int) -> None:
    assert next_attempt(attempts) == expected


# -- the lease -----------------------------------------------------------------------------
@dataclass
class Row:
    holder: str | None
    token: int
    expires_at: datetime | None
    acquired_at: datetime | None = None
    previous_holder: str | None = None
    changed_at: datetime | None = None


GRANT = LeaseGrant(name="beat", holder="a", token=4, expires_at=NOW + TTL)


def test_the_first_grant_of_a_lease_never_taken_has_token_one() -> None:
    write = grant_lease("beat", "a", TTL, row=None, now=NOW)

    assert write is not None
    assert (write.grant.token, write.grant.changed_holder) == (1, True)
    assert (write.grant.expires_at, write.acquired_at) == (NOW + TTL, NOW)


def test_a_placeholder_row_gives_the_same_first_token() -> None:
    write = grant_lease("beat", "a", TTL, row=Row(None, 0, None), now=NOW)

    assert write is not None and write.grant.token == 1


def test_the_holder_renewing_keeps_its_token_and_acquisition_time_even_once_expired() -> None:
    since = NOW - timedelta(hours=1)
    write = grant_lease("beat", "a", TTL, row=Row("a", 4, NOW - MINUTE, since), now=NOW)

    assert write is not None
    assert (write.grant.token, write.grant.changed_holder, write.acquired_at) == (4, False, since)
    assert write.grant.expires_at == NOW + TTL


@pytest.mark.parametrize("row", [Row(None, 4, None), Row("b", 4, NOW), Row("b", 4, None)],
                         ids=["released", "expired-at-now", "no-expiry"])
def test_a_released_or_expired_lease_goes_to_a_new_holder_with_the_next_token(row: Row) -> None:
    write = grant_lease("beat", "a", TTL, row=row, now=NOW)

    assert write is not None
    assert (write.grant.token, write.grant.changed_holder, write.acquired_at) == (5, True, NOW)


def test_taking_an_expired_lease_records_its_holder_as_previous_until_its_expiry() -> None:
    write = grant_lease("beat", "a", TTL, row=Row("b", 4, NOW - MINUTE, None, "c", NOW - TTL),
                        now=NOW)

    assert write is not None
    assert (write.previous_holder, write.changed_at) == ("b", NOW - MINUTE)


@pytest.mark.parametrize("row", [Row(None, 4, None, None, "b", NOW - MINUTE),
                                 Row("b", 4, NOW + MINUTE, NOW - TTL, "c", NOW - TTL)],
                         ids=["released", "renewed"])
def test_a_release_or_a_renewal_keeps_the_previous_holder_recorded(row: Row) -> None:
    write = grant_lease("beat", row.holder or "a", TTL, row=row, now=NOW)

    assert write is not None
    assert (write.previous_holder, write.changed_at) == (row.previous_holder, row.changed_at)


def test_a_release_makes_its_holder_the_previous_one_until_then() -> None:
    released = released_by("a", NOW)

    assert (released.previous_holder, released.changed_at) == ("a", NOW)


def test_a_live_lease_of_another_holder_is_not_granted() -> None:
    row = Row("b", 4, NOW + timedelta(microseconds=1))

    assert grant_lease("beat", "a", TTL, row=row, now=NOW) is None


@pytest.mark.parametrize("value,expected", [(0, 1), (41, 42), (COUNTER_MAX - 1, COUNTER_MAX),
                                            (COUNTER_MAX, 1), (-3, 1), ("7", 1), (True, 1)])
def test_a_counter_at_its_limit_or_written_by_hand_starts_again(value: object,
                                                                expected: int) -> None:
    assert next_counter(value) == expected


def test_the_fence_holds_for_the_current_unexpired_grant() -> None:
    assert fence_holds(GRANT, Row("a", 4, NOW + timedelta(microseconds=1)), NOW)
    check_fence(GRANT, Row("a", 4, NOW + TTL), NOW)


@pytest.mark.parametrize("row", [None, Row("b", 4, NOW + TTL), Row("a", 5, NOW + TTL),
                                 Row("a", 4, NOW), Row("a", 4, None), Row(None, 4, NOW + TTL)],
                         ids=["no-row", "other-holder", "newer-token", "expired-at-now",
                              "released", "no-holder"])
def test_the_fence_fails_with_one_message_for_every_stale_grant(row: Row | None) -> None:
    assert not fence_holds(GRANT, row, NOW)
    with pytest.raises(LeaseLost, match=r"lease 'beat': token 4 is no longer current"):
        check_fence(GRANT, row, NOW)


@pytest.mark.parametrize(("holder", "expires_at", "live"), [
    ("a", NOW + timedelta(microseconds=1), True), ("a", NOW, False), ("a", None, False),
    (None, NOW + TTL, False)], ids=["ahead", "expired-at-now", "no-expiry", "released"])
def test_a_lease_is_live_while_held_and_its_expiry_is_ahead(
        holder: str | None, expires_at: datetime | None, live: bool) -> None:
    assert lease_live(holder, expires_at, NOW) is live
    info = LeaseInfo(name="beat", holder=holder, token=4, acquired_at=None,
                     expires_at=expires_at, store_now=NOW)
    assert info.held is live


@dataclass
class ClockedRow(Row):
    now: datetime = NOW


def test_the_fence_read_with_the_lease_row_gives_its_clock_or_fails_without_one() -> None:
    assert fenced_clock(GRANT, ClockedRow("a", 4, NOW + TTL)) == NOW
    for row in (None, ClockedRow("a", 4, NOW)):
        with pytest.raises(LeaseLost, match=r"lease 'beat': token 4 is no longer current"):
            fenced_clock(GRANT, row)


# -- columns written by hand ---------------------------------------------------------------
def test_a_column_of_another_type_reads_as_unset_and_is_named_as_damage() -> None:
    damage: list[Problem] = []
    assert stored_value(7, int, None, "max_runs", damage) == 7
    assert stored_value(None, int, None, "max_runs", damage) is None
    assert damage == []
    assert stored_value(True, int, None, "max_runs", damage) is None  # a bool is no integer
    assert stored_value("x" * 100, str, "", "task", damage, what="a task name") == "x" * 100
    assert stored_value(None, int, -1, "version", damage, required=True) == -1
    assert stored_value(1.5, str, None, "description", damage) is None
    assert [str(problem) for problem in damage] == [
        "max_runs: True is not an integer", "version: None is not an integer",
        "description: 1.5 is not text"]


# -- setting a schedule aside --------------------------------------------------------------
def aside(version: int | None = None, retry_at: datetime | None = None) -> SetAside:
    return SetAside(schedule_name="report", version=version, reason="refused",
                    retry_at=retry_at)


def test_a_first_set_aside_records_the_fault_now_and_retries_after_the_first_delay() -> None:
    write = plan_set_aside(aside(), version=3, faults=0, fault_at=None, next_run_at=None,
                           now=NOW)

    assert write is not None
    assert (write.name, write.fault, write.fault_at, write.faults, write.version) == (
        "report", "refused", NOW, 1, 4)
    assert write.next_run_at == NOW + set_aside_delay(0)


def test_a_set_aside_still_in_force_keeps_its_first_instant_and_waits_longer() -> None:
    since = NOW - timedelta(hours=2)
    write = plan_set_aside(aside(), version=3, faults=2, fault_at=since, next_run_at=None,
                           now=NOW)

    assert write is not None
    assert (write.fault_at, write.faults) == (since, 3)
    assert write.next_run_at == NOW + set_aside_delay(2)


def test_a_set_aside_never_brings_the_next_run_forward() -> None:
    later = NOW + timedelta(days=1)
    write = plan_set_aside(aside(retry_at=NOW + MINUTE), version=3, faults=0, fault_at=None,
                           next_run_at=later, now=NOW)

    assert write is not None and write.next_run_at == later


def test_a_set_aside_with_a_version_applies_only_while_the_schedule_has_it() -> None:
    assert plan_set_aside(aside(version=2), version=3, faults=0, fault_at=None,
                          next_run_at=None, now=NOW) is None
    assert plan_set_aside(aside(version=3), version=3, faults=0, fault_at=None,
                          next_run_at=None, now=NOW) is not None


@pytest.mark.parametrize("faults,version,expected", [
    (FAULTS_MAX, 3, (FAULTS_MAX, 4)),
    (-5, 3, (1, 4)),
    ("many", "x", (1, 1)),
    (0, COUNTER_MAX, (1, 1)),
], ids=["faults-at-limit", "negative-faults", "not-integers", "version-at-limit"])
def test_counts_written_by_hand_are_bounded_when_set_aside(
        faults: object, version: object, expected: tuple[int, int]) -> None:
    write = plan_set_aside(aside(), version=version, faults=faults, fault_at=None,
                           next_run_at=None, now=NOW)

    assert write is not None and (write.faults, write.version) == expected
