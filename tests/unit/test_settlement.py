"""How the end of a run is fitted to its stored schedule (core.settlement)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from goatbeat_celery.core.claims import InFlight
from goatbeat_celery.core.misfire import first_occurrence
from goatbeat_celery.core.model import (
    UTC,
    Execution,
    ExecutionState,
    FinishedRun,
    Schedule,
    ScheduleSource,
    ScheduleSpec,
    SyncEntry,
    TriggerSpec,
)
from goatbeat_celery.core.policies import ScheduleMode
from goatbeat_celery.core.runs import RunState
from goatbeat_celery.core.settlement import held_to_release, settlement_of
from goatbeat_celery.core.sync import StoredSummary, plan_config_sync
from goatbeat_celery.core.triggers import IntervalTrigger

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)
GRID = IntervalTrigger(60 * S)


def grid_after(instant: datetime) -> tuple[datetime | None, datetime | None]:
    return first_occurrence(GRID, instant)


def schedule(**spec: object) -> Schedule:
    base = ScheduleSpec(name="report", task="proj.tasks.report",
                        trigger=TriggerSpec(kind="interval", params={"every": 60.0}))
    return Schedule(spec=replace(base, **spec), next_occurrence_at=T0 + 60 * S,
                    next_run_at=T0 + 60 * S, version=4, consecutive_failures=1)


def run(state: RunState | None, *, finished: float = 5,
        exec_state: ExecutionState = ExecutionState.SUBMITTED) -> Execution:
    return Execution(key="report:x", schedule_name="report", occurrence_at=T0, due_at=T0,
                     token=1, state=exec_state, claimed_at=T0, submitted_at=T0,
                     run_state=state, finished_at=None if state is None else T0 + finished * S,
                     run_error="ValueError: no" if state is RunState.FAILED else None,
                     settled=False)


def test_a_failure_with_a_backoff_moves_the_next_run_to_the_grid_point_it_permits() -> None:
    settled = settlement_of(FinishedRun(execution=run(RunState.FAILED),
                                        schedule=schedule(failure_backoff=60 * S)), grid_after)
    # The second failure in a row: 120 s from 12:00:05 → the grid point 12:03.
    assert (settled.version, settled.consecutive_failures) == (4, 2)
    assert settled.next_run_at == settled.next_occurrence_at == T0 + 180 * S
    assert settled.backoff == 120 * S


def test_the_pause_reason_names_the_failures_and_the_last_error() -> None:
    settled = settlement_of(FinishedRun(execution=run(RunState.FAILED),
                                        schedule=schedule(pause_after_failures=2)), grid_after)
    assert settled.paused_reason == ("paused after 2 failed runs in a row; last error: "
                                     "ValueError: no")


def test_a_fixed_delay_counts_from_the_reported_end() -> None:
    settled = settlement_of(FinishedRun(execution=run(RunState.SUCCEEDED, finished=70),
                                        schedule=schedule(mode=ScheduleMode.FIXED_DELAY)),
                            grid_after)
    assert settled.next_run_at == T0 + 130 * S
    assert settled.consecutive_failures == 0


def test_a_run_never_sent_ends_the_wait_from_its_claim() -> None:
    settled = settlement_of(FinishedRun(execution=run(None, exec_state=ExecutionState.EXPIRED),
                                        schedule=schedule(mode=ScheduleMode.FIXED_DELAY)),
                            grid_after)
    assert settled.next_run_at == T0 + 60 * S
    assert settled.consecutive_failures == 1  # neither a success nor a failure


def test_a_run_of_a_deleted_schedule_is_only_marked_settled() -> None:
    settled = settlement_of(FinishedRun(execution=run(RunState.FAILED), schedule=None),
                            grid_after)
    assert (settled.version, settled.schedule_name) == (None, "report")


def test_a_paused_schedule_keeps_its_times_and_count() -> None:
    stored = schedule(enabled=False, failure_backoff=60 * S, pause_after_failures=1)
    settled = settlement_of(FinishedRun(execution=run(RunState.FAILED), schedule=stored),
                            grid_after)
    assert (settled.consecutive_failures, settled.next_run_at, settled.paused_reason) == (
        1, stored.next_run_at, None)


def test_a_held_claim_is_released_once_nothing_runs_before_it() -> None:
    assert held_to_release(InFlight(waiting="report:b")) == "report:b"
    assert held_to_release(InFlight(unfinished="report:a", waiting="report:b")) is None
    assert held_to_release(InFlight(unfinished="report:a")) is None
    assert held_to_release(InFlight()) is None


# -- config sync of a schedule that paused itself ----------------------------------------------
def sync_entry(spec: ScheduleSpec) -> SyncEntry:
    return SyncEntry(spec=spec, next_occurrence_at=T0, next_run_at=T0)


def summary(spec: ScheduleSpec, *, enabled: bool, paused: bool) -> StoredSummary:
    return StoredSummary(spec_hash=spec.spec_hash(), enabled=enabled,
                         source=ScheduleSource.CONFIG, paused=paused)


def test_config_sync_leaves_a_schedule_that_paused_itself_paused_while_its_entry_is_unchanged(
) -> None:
    spec = schedule(pause_after_failures=3, source=ScheduleSource.CONFIG).spec
    plan = plan_config_sync({"report": summary(spec, enabled=False, paused=True)},
                            [sync_entry(spec)])
    assert plan.report.unchanged == ("report",)


def test_config_sync_runs_a_schedule_that_paused_itself_again_once_its_entry_changed() -> None:
    spec = schedule(pause_after_failures=3, source=ScheduleSource.CONFIG).spec
    fixed = replace(spec, kwargs={"retries": 1})
    plan = plan_config_sync({"report": summary(spec, enabled=False, paused=True)},
                            [sync_entry(fixed)])
    assert plan.report.updated == ("report",)


def test_config_sync_still_enables_a_schedule_paused_by_hand() -> None:
    spec = schedule(source=ScheduleSource.CONFIG).spec
    plan = plan_config_sync({"report": summary(spec, enabled=False, paused=False)},
                            [sync_entry(spec)])
    assert plan.report.updated == ("report",)
