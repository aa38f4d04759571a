"""How the end of a run is fitted to its stored schedule (core.rules.settlement), and the
leader's settle pass (core.loop.settlement)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from goatbeat_celery.core.loop.settlement import RunSettler
from goatbeat_celery.core.rules.claims import InFlight
from goatbeat_celery.core.rules.misfire import first_occurrence
from goatbeat_celery.core.rules.policies import GridAfter, OverlapPolicy, ScheduleMode
from goatbeat_celery.core.rules.runs import RunState
from goatbeat_celery.core.rules.settlement import (
    claim_policies,
    fixed_delay_claim,
    held_to_release,
    settlement_of,
)
from goatbeat_celery.core.rules.sync import StoredSummary, plan_config_sync
from goatbeat_celery.core.rules.triggers import IntervalTrigger
from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.settlement import FinishedRun, RunSettlement, SettleReport
from goatbeat_celery.core.types.spec import ScheduleSource, ScheduleSpec, SyncEntry, TriggerSpec
from goatbeat_celery.testing import RecordingObserver

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)
GRID = IntervalTrigger(60 * S)


def grid_after(instant: datetime) -> tuple[datetime | None, datetime | None]:
    return first_occurrence(GRID, instant)


def schedule(**spec: object) -> Schedule:
    base = ScheduleSpec(name="report", task="proj.tasks.report",
                        trigger=TriggerSpec(kind="interval", params={"every": 60.0}))
    return Schedule(spec=replace(base, **spec), next_occurrence_at=T0 + 60 * S,
                    next_run_at=T0 + 60 * S, row_version=4, consecutive_failures=1)


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
    expired = replace(run(None, exec_state=ExecutionState.EXPIRED), claimed_at=T0 + 10 * S,
                      submitted_at=None)
    settled = settlement_of(FinishedRun(execution=expired,
                                        schedule=schedule(mode=ScheduleMode.FIXED_DELAY)),
                            grid_after)
    assert settled.next_run_at == T0 + 70 * S
    assert settled.consecutive_failures == 1  # neither a success nor a failure


def test_a_run_of_a_deleted_schedule_is_only_marked_settled() -> None:
    settled = settlement_of(FinishedRun(execution=run(RunState.FAILED), schedule=None),
                            grid_after)
    assert (settled.version, settled.schedule_name) == (None, "report")


def test_a_run_of_a_paused_schedule_is_only_marked_settled() -> None:
    stored = schedule(enabled=False, failure_backoff=60 * S, pause_after_failures=1)
    settled = settlement_of(FinishedRun(execution=run(RunState.FAILED), schedule=stored),
                            grid_after)
    assert (settled.version, settled.paused_reason) == (None, None)


def test_an_end_that_changes_nothing_on_its_schedule_is_only_marked_settled() -> None:
    # Fixed rate without a backoff, one failure in a row already, a lost run: nothing moves.
    settled = settlement_of(FinishedRun(execution=run(RunState.LOST), schedule=schedule()),
                            grid_after)
    assert settled.version is None


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


# -- the engine's side -------------------------------------------------------------------------
class SettlingDouble:
    """A store's two settle operations, recording what it is asked to write."""

    def __init__(self, runs: list[FinishedRun]) -> None:
        self.runs = runs
        self.written: list[RunSettlement] = []

    def finished_runs(self, limit: int) -> list[FinishedRun]:
        return self.runs[:limit]

    def settle_runs(self, settlements: Sequence[RunSettlement], *,
                    lease: LeaseGrant) -> SettleReport:
        self.written.extend(settlements)
        paused = tuple((s.schedule_name, s.paused_reason) for s in settlements
                       if s.paused_reason is not None)
        return SettleReport(settled=tuple(s.key for s in settlements), paused=paused)


LEASE = LeaseGrant(name="default", holder="a", token=1, expires_at=T0 + 30 * S)


def test_a_settle_pass_reports_a_pause_with_a_stable_action_and_to_the_observer(
        caplog: pytest.LogCaptureFixture) -> None:
    store = SettlingDouble([FinishedRun(execution=run(RunState.FAILED),
                                        schedule=schedule(pause_after_failures=2))])
    observer = RecordingObserver()
    settler = RunSettler(store=store, grid_after=lambda s: grid_after, observer=observer,
                         batch_size=10)
    with caplog.at_level(logging.INFO):
        settler.settle(LEASE)
    assert observer.of("paused") == [("report", "paused after 2 failed runs in a row; "
                                                "last error: ValueError: no")]
    assert [r.action for r in caplog.records] == ["schedule_paused"]  # type: ignore[attr-defined]


def test_a_settle_pass_logs_a_backoff(caplog: pytest.LogCaptureFixture) -> None:
    store = SettlingDouble([FinishedRun(execution=run(RunState.FAILED),
                                        schedule=schedule(failure_backoff=60 * S))])
    settler = RunSettler(store=store, grid_after=lambda s: grid_after,
                         observer=RecordingObserver(), batch_size=10)
    with caplog.at_level(logging.INFO):
        settler.settle(LEASE)
    assert [r.action for r in caplog.records] == ["run_backoff"]  # type: ignore[attr-defined]


def test_a_run_whose_schedule_cannot_build_its_grid_is_still_settled() -> None:
    def broken(schedule: Schedule) -> GridAfter:
        raise ValueError("unknown trigger")

    store = SettlingDouble([FinishedRun(execution=run(RunState.FAILED),
                                        schedule=schedule(failure_backoff=60 * S))])
    RunSettler(store=store, grid_after=broken, observer=RecordingObserver(),
               batch_size=10).settle(LEASE)
    assert [(s.key, s.version) for s in store.written] == [("report:x", None)]


def test_an_idle_settle_pass_writes_nothing() -> None:
    store = SettlingDouble([])
    assert RunSettler(store=store, grid_after=lambda s: grid_after,
                      observer=RecordingObserver(), batch_size=10).settle(LEASE) \
        == SettleReport()
    assert store.written == []


def test_claim_policies_resolve_the_global_overlap_and_which_runs_wait_to_be_settled() -> None:
    default = OverlapPolicy.SKIP
    assert claim_policies(schedule().spec, default) == {
        "overlap": OverlapPolicy.SKIP, "delay": None, "settle": False}
    assert claim_policies(schedule(overlap=OverlapPolicy.BUFFER_ONE).spec, default)["settle"]
    assert claim_policies(schedule(pause_after_failures=1).spec, default)["settle"]
    assert claim_policies(schedule(mode=ScheduleMode.FIXED_DELAY).spec, default) == {
        "overlap": OverlapPolicy.SKIP, "delay": 60 * S, "settle": True}


def test_a_late_fixed_delay_claim_runs_once_and_looks_again_one_delay_after_now() -> None:
    stored = schedule(mode=ScheduleMode.FIXED_DELAY)
    claim = fixed_delay_claim(stored, T0 + 3600 * S, expires_after=None,
                              default_overlap=OverlapPolicy.ALLOW)
    assert claim.occurrences == ((T0 + 60 * S, T0 + 60 * S),)
    assert (claim.missed, claim.next_run_at, claim.delay) == (0, T0 + 3660 * S, 60 * S)
