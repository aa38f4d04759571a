"""What a claim writes under the run policies (core.rules.claims with core.rules.policies): the
overlap policy turns occurrences into claimed, held or skipped rows, and a fixed-delay claim with a
run in flight is postponed. Every store executes these rules; the conformance suite checks that."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from goatbeat_celery.core.rules.claims import InFlight, in_flight, plan_claims
from goatbeat_celery.core.rules.policies import OverlapPolicy
from goatbeat_celery.core.types.claims import Dispatch, PlannedClaim
from goatbeat_celery.core.types.execution import Execution, ExecutionState, idempotency_key
from goatbeat_celery.core.types.instants import UTC

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
CLAIMED, HELD, SKIPPED = ExecutionState.CLAIMED, ExecutionState.HELD, ExecutionState.SKIPPED


def claim(*, overlap: OverlapPolicy = OverlapPolicy.ALLOW, count: int = 1,
          delay: timedelta | None = None, settle: bool = False) -> PlannedClaim:
    occurrences = tuple((NOW - MINUTE * (count - i), NOW - MINUTE * (count - i))
                        for i in range(count))
    return PlannedClaim(schedule_name="report", version=3, occurrences=occurrences, missed=0,
                        next_occurrence_at=NOW + MINUTE, next_run_at=NOW + MINUTE,
                        overlap=overlap, delay=delay, settle=settle)


def states(planned: PlannedClaim, flight: InFlight | None = None) -> list[ExecutionState]:
    plan = plan_claims([planned], {"report": 3}, token=7, now=NOW,
                       in_flight={} if flight is None else {"report": flight})
    return [e.state for e in plan.executions]


def dispatch(execution: Execution) -> Dispatch:
    return Dispatch(execution=execution, task="proj.tasks.report", args=(), kwargs={},
                    options={})


RUNNING = InFlight(unfinished="report:old")


def test_allow_claims_next_to_a_run_in_flight() -> None:
    assert states(claim(count=2), RUNNING) == [CLAIMED, CLAIMED]


def test_skip_records_an_occurrence_whose_previous_run_has_not_finished() -> None:
    assert states(claim(overlap=OverlapPolicy.SKIP), RUNNING) == [SKIPPED]


def test_skip_claims_when_nothing_is_in_flight() -> None:
    assert states(claim(overlap=OverlapPolicy.SKIP)) == [CLAIMED]


def test_skip_claims_one_of_a_catch_up_and_skips_the_others() -> None:
    # Under the misfire policy ``all`` one claim may carry several occurrences: the first one
    # runs, and the others would overlap it.
    assert states(claim(overlap=OverlapPolicy.SKIP, count=3)) == [CLAIMED, SKIPPED, SKIPPED]


def test_buffer_one_holds_exactly_one_behind_a_run_in_flight() -> None:
    assert states(claim(overlap=OverlapPolicy.BUFFER_ONE, count=3), RUNNING) == [
        HELD, SKIPPED, SKIPPED]


def test_buffer_one_skips_while_one_is_already_held() -> None:
    flight = InFlight(unfinished="report:old", waiting="report:held")
    assert states(claim(overlap=OverlapPolicy.BUFFER_ONE), flight) == [SKIPPED]


def test_buffer_one_claims_one_and_holds_the_next_of_a_catch_up() -> None:
    assert states(claim(overlap=OverlapPolicy.BUFFER_ONE, count=3)) == [CLAIMED, HELD, SKIPPED]


def test_a_skipped_row_carries_its_reason_and_no_attempt() -> None:
    plan = plan_claims([claim(overlap=OverlapPolicy.SKIP, settle=True)], {"report": 3},
                       token=7, now=NOW, in_flight={"report": RUNNING})
    (row,) = plan.executions
    assert row.key == idempotency_key("report", NOW - MINUTE)
    assert (row.state, row.attempts, row.last_error, row.settled) == (
        SKIPPED, 0, "run report:old had not finished", None)


def test_a_held_row_has_no_attempt_yet_and_waits_to_be_settled() -> None:
    plan = plan_claims([claim(overlap=OverlapPolicy.BUFFER_ONE, settle=True)], {"report": 3},
                       token=7, now=NOW, in_flight={"report": RUNNING})
    (row,) = plan.executions
    assert (row.state, row.attempts, row.settled) == (HELD, 0, False)


def test_runs_and_skips_are_counted_apart_and_only_claimed_rows_are_dispatched() -> None:
    plan = plan_claims([claim(overlap=OverlapPolicy.BUFFER_ONE, count=3)], {"report": 3},
                       token=7, now=NOW)
    inserted = {e.key for e in plan.executions}
    (advance,) = plan.counted(inserted)
    assert (advance.runs, advance.skipped) == (2, 1)
    result = plan.result(inserted, dispatch)
    assert [d.execution.state for d in result.dispatches] == [CLAIMED]
    assert [e.state for e in result.held] == [HELD]
    assert [e.state for e in result.skipped] == [SKIPPED]
    assert result.duplicates == 0


def test_a_skipped_key_that_existed_is_neither_counted_nor_reported() -> None:
    plan = plan_claims([claim(overlap=OverlapPolicy.SKIP)], {"report": 3}, token=7, now=NOW,
                       in_flight={"report": RUNNING})
    (advance,) = plan.counted(set())
    assert advance.skipped == 0
    assert plan.result(set(), dispatch).skipped == ()


def test_a_fixed_delay_claim_with_a_run_in_flight_is_postponed_by_the_delay() -> None:
    planned = claim(delay=5 * MINUTE, settle=True)
    plan = plan_claims([planned], {"report": 3}, token=7, now=NOW,
                       in_flight={"report": RUNNING})
    assert plan.executions == ()
    (advance,) = plan.advances
    assert (advance.next_occurrence_at, advance.next_run_at) == (NOW + 5 * MINUTE,
                                                                 NOW + 5 * MINUTE)
    assert (advance.runs, advance.skipped, advance.last_occurrence_at) == (0, 0, None)


def test_a_fixed_delay_claim_with_nothing_in_flight_runs_and_waits_to_be_settled() -> None:
    plan = plan_claims([claim(delay=5 * MINUTE, settle=True)], {"report": 3}, token=7, now=NOW)
    (row,) = plan.executions
    assert (row.state, row.settled) == (CLAIMED, False)
    assert plan.advances[0].next_run_at == NOW + MINUTE  # as planned by the engine


def test_claims_without_a_policy_ignore_what_is_in_flight() -> None:
    planned = replace(claim(count=2), settle=False)
    plan = plan_claims([planned], {"report": 3}, token=7, now=NOW,
                       in_flight={"report": RUNNING})
    assert [(e.state, e.settled) for e in plan.executions] == [(CLAIMED, None)] * 2


@pytest.mark.parametrize(("rows", "expected"), [
    ([], InFlight()),
    ([("a", "submitted", None)], InFlight(unfinished="a")),
    ([("a", "claimed", None)], InFlight(unfinished="a")),  # not sent yet: it will run
    ([("a", "submitted", "running"), ("b", "held", None)], InFlight(unfinished="a",
                                                                     waiting="b")),
    ([("a", "submitted", "retrying")], InFlight(unfinished="a")),
    ([("a", "submitted", "succeeded"), ("b", "held", None)], InFlight(waiting="b")),
    ([("a", "submitted", "lost")], InFlight()),  # lost ends the wait
    ([("a", "expired", None), ("b", "skipped", None)], InFlight()),
    ([("a", "submitted", None), ("b", "submitted", "running")], InFlight(unfinished="a")),
])
def test_in_flight_table(rows: list[tuple[str, str, str | None]], expected: InFlight) -> None:
    assert in_flight(rows) == expected
