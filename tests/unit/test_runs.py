"""The run-tracking rule (goatbeat_celery.core.rules.runs): what each worker report changes in
the run columns, and when a run counts as lost. Pure functions, tested by tables of cases."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from goatbeat_celery.core.rules.runs import (
    MAX_ATTEMPTS,
    MAX_ERROR_LENGTH,
    RUN_COLUMNS,
    RunEvent,
    RunOutcome,
    RunRecord,
    RunState,
    RunTimes,
    apply_event,
    apply_events,
    error_summary,
    lost_after_problem,
    lost_verdict,
)
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.settings import Settings

NOW = datetime(2026, 3, 1, 12, 0, 0, 250_000, tzinfo=UTC)
KEY = "report:2026-03-01T12:00:00+00:00"
A, B = "celery@a", "celery@b"


def s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def started(run: str = "r1", worker: str = A, age: float = 0.0) -> RunEvent:
    return RunEvent.started(KEY, run=run, worker=worker, age=s(age))


def finished(run: str | None = "r1", worker: str = A, age: float = 0.0,
             outcome: RunOutcome = RunOutcome.SUCCEEDED, runtime: float | None = 1.5,
             error: str | None = None, started_age: float | None = None) -> RunEvent:
    return RunEvent.finished(KEY, run=run, worker=worker, age=s(age), outcome=outcome,
                             runtime=None if runtime is None else s(runtime), error=error,
                             started_age=None if started_age is None else s(started_age))


def retried(run: str | None = "r1", worker: str = A, age: float = 0.0,
            started_age: float | None = None) -> RunEvent:
    return RunEvent.retried(KEY, run=run, worker=worker, age=s(age), runtime=s(0.5),
                            error="Retry: in 5s",
                            started_age=None if started_age is None else s(started_age))


def running(run: str = "r1", worker: str = A, started_before: float = 10.0,
            attempts: int = 1, heartbeat_before: float | None = None) -> RunRecord:
    beat = started_before if heartbeat_before is None else heartbeat_before
    return RunRecord(run_state=RunState.RUNNING, run_id=run, worker=worker,
                     run_attempts=attempts, started_at=NOW - s(started_before),
                     heartbeat_at=NOW - s(beat))


# -- starts ----------------------------------------------------------------------------------
def test_a_start_makes_a_new_attempt_running_with_instants_from_the_store_clock() -> None:
    after = apply_event(RunRecord(), started(age=2.5), NOW)

    assert after == RunRecord(run_state=RunState.RUNNING, run_id="r1", worker=A, run_attempts=1,
                              started_at=NOW - s(2.5), heartbeat_at=NOW)


def test_a_start_clears_what_the_previous_attempt_left() -> None:
    before = RunRecord(run_state=RunState.FAILED, run_id="r0", worker=B, run_attempts=1,
                       started_at=NOW - s(60), finished_at=NOW - s(50), heartbeat_at=NOW - s(55),
                       runtime=s(10), run_error="ValueError: boom")

    after = apply_event(before, started(run="r1", age=1), NOW)

    assert after == RunRecord(run_state=RunState.RUNNING, run_id="r1", worker=A, run_attempts=2,
                              started_at=NOW - s(1), heartbeat_at=NOW)


def test_a_replayed_start_changes_nothing() -> None:
    once = apply_event(RunRecord(), started(age=1), NOW)

    assert apply_event(once, started(age=0.5), NOW + s(0.5)) is once


def test_a_start_older_than_the_attempt_shown_is_counted_but_changes_nothing_else() -> None:
    # Worker B's redelivery was reported first; worker A's earlier start arrives late.
    shown = running(run="rb", worker=B, started_before=1)

    after = apply_event(shown, started(run="ra", worker=A, age=5), NOW)

    assert after == RunRecord(**{**shown.values(), "run_attempts": 2})


def test_attempts_stop_growing_at_their_limit() -> None:
    at_limit = RunRecord(run_attempts=MAX_ATTEMPTS, started_at=NOW - s(9))

    assert apply_event(at_limit, started(), NOW).run_attempts == MAX_ATTEMPTS


# -- ends of the attempt shown ---------------------------------------------------------------
@pytest.mark.parametrize("outcome", list(RunOutcome))
def test_the_end_of_the_attempt_shown_sets_outcome_instant_runtime_and_error(
        outcome: RunOutcome) -> None:
    before = running(started_before=3)

    after = apply_event(before, finished(outcome=outcome, age=0.25, runtime=2.75, error="E: x"),
                        NOW)

    assert after == RunRecord(**{**before.values(), "run_state": outcome.state,
                                 "finished_at": NOW - s(0.25), "runtime": s(2.75),
                                 "run_error": "E: x"})


def test_an_end_placed_before_the_start_shown_by_another_writes_clock_ends_at_the_start() -> None:
    """A quick run's start and end written apart: the end's write placed it 40 us before the
    start's did (each write's delay after the worker measured the age differs)."""
    before = running(started_before=0.00004)

    for report in (finished(age=0.0001, runtime=0.00001), retried(age=0.0001)):
        after = apply_event(before, report, NOW)

        assert after.finished_at == before.started_at, report.kind
        assert after.run_state is (RunState.SUCCEEDED if report.outcome else RunState.RETRYING)


def test_a_replayed_end_leaves_the_same_row() -> None:
    row = apply_events(RunRecord(), [started(age=2), finished(age=1, runtime=1)], NOW)
    again = apply_events(row, [started(age=2), finished(age=1, runtime=1)], NOW)

    assert again == row
    assert row.run_attempts == 1 and row.run_state is RunState.SUCCEEDED


def test_a_run_marked_lost_takes_the_outcome_its_worker_reports_later() -> None:
    lost = RunRecord(**{**running().values(), "run_state": RunState.LOST,
                        "finished_at": NOW - s(1), "run_error": "worker silent for 60s"})

    after = apply_event(lost, finished(runtime=70), NOW)

    assert (after.run_state, after.run_error, after.runtime, after.finished_at) == \
        (RunState.SUCCEEDED, None, s(70), NOW)


def test_a_retry_makes_the_row_retrying_from_the_instant_it_was_asked() -> None:
    after = apply_event(running(), retried(age=0.5), NOW)

    assert after.run_state is RunState.RETRYING
    assert after.finished_at == after.heartbeat_at == NOW - s(0.5)
    assert (after.runtime, after.run_error) == (s(0.5), "Retry: in 5s")


def test_a_retry_then_its_next_attempt_count_two_attempts_of_one_key() -> None:
    row = apply_events(RunRecord(), [started("r1", age=9), retried("r1", age=8),
                                     started("r2", worker=B, age=3),
                                     finished("r2", worker=B, age=1, runtime=2)], NOW)

    assert (row.run_state, row.run_id, row.worker, row.run_attempts) == \
        (RunState.SUCCEEDED, "r2", B, 2)
    assert (row.started_at, row.finished_at, row.runtime) == (NOW - s(3), NOW - s(1), s(2))


# -- ends of other attempts ------------------------------------------------------------------
def test_the_late_end_of_an_attempt_a_later_one_replaced_changes_nothing() -> None:
    # A retried at t-8; B started the retry at t-3; A's report of its retry arrives now.
    shown = running(run="rb", worker=B, started_before=3, attempts=2)

    assert apply_event(shown, retried("ra", age=8, started_age=9), NOW) is shown
    assert apply_event(shown, finished("ra", age=8, started_age=9), NOW) is shown


def test_an_end_whose_start_was_dropped_counts_as_its_start_and_end() -> None:
    after = apply_event(RunRecord(), finished(age=1, runtime=4, started_age=5), NOW)

    assert after == RunRecord(run_state=RunState.SUCCEEDED, run_id="r1", worker=A,
                              run_attempts=1, started_at=NOW - s(5), finished_at=NOW - s(1),
                              heartbeat_at=NOW, runtime=s(4))


@pytest.mark.parametrize("before", [
    RunRecord(),
    RunRecord(run_state=RunState.FAILED, run_id="r0", worker=B, run_attempts=1,
              started_at=NOW - s(60), finished_at=NOW - s(59), heartbeat_at=NOW - s(59)),
    running(run="r0", worker=B, started_before=30),
    running(run="later", worker=B, started_before=1),
], ids=["not-started", "older-ended", "older-running", "later-running"])
@pytest.mark.parametrize("end", [
    finished(age=1, runtime=4, started_age=5, outcome=RunOutcome.FAILED, error="E: x"),
    retried(age=1, started_age=5),
], ids=["finished", "retried"])
def test_an_end_carrying_its_start_is_its_start_then_its_end(before: RunRecord,
                                                             end: RunEvent) -> None:
    # What lets a writer send the end of a run alone when it holds its start too.
    alone = apply_event(before, end, NOW)
    both = apply_events(before, [started(age=5), end], NOW)

    if before.run_id == "later":
        assert alone is before  # only the count of an older attempt differs
        assert both == RunRecord(**{**before.values(), "run_attempts": 2})
    else:
        assert alone == both


def test_an_end_whose_start_was_dropped_replaces_an_older_attempt() -> None:
    older = RunRecord(run_state=RunState.FAILED, run_id="r0", worker=B, run_attempts=1,
                      started_at=NOW - s(60), finished_at=NOW - s(59), runtime=s(1))

    after = apply_event(older, finished("r1", age=1, runtime=4, started_age=5), NOW)

    assert (after.run_state, after.run_id, after.run_attempts, after.started_at) == \
        (RunState.SUCCEEDED, "r1", 2, NOW - s(5))


def test_an_end_of_another_attempt_that_never_started_in_its_process_is_ignored() -> None:
    shown = running()

    assert apply_event(shown, finished("other", started_age=None), NOW) is shown


# -- ends reported by a process that did not run the attempt ---------------------------------
@pytest.mark.parametrize("state", [None, RunState.RETRYING, RunState.LOST])
def test_a_revocation_ends_a_run_not_started_retrying_or_lost(state: RunState | None) -> None:
    before = RunRecord(run_state=state, run_id="r1" if state else None,
                       run_attempts=1 if state else 0)

    after = apply_event(before, finished(None, outcome=RunOutcome.REVOKED, runtime=None,
                                         error="expired before it started"), NOW)

    assert (after.run_state, after.run_error, after.finished_at) == \
        (RunState.REVOKED, "expired before it started", NOW)
    assert (after.run_id, after.run_attempts) == (before.run_id, before.run_attempts)


def test_the_main_process_ends_the_run_its_own_pool_process_was_running() -> None:
    after = apply_event(running(worker=A), finished(None, worker=A, outcome=RunOutcome.FAILED,
                                                    runtime=None, error="WorkerLostError: x"),
                        NOW)

    assert (after.run_state, after.run_error, after.run_id) == \
        (RunState.FAILED, "WorkerLostError: x", "r1")


@pytest.mark.parametrize("shown", [
    running(worker=B),
    RunRecord(run_state=RunState.SUCCEEDED, run_id="r1", worker=A, run_attempts=1),
    RunRecord(run_state=RunState.FAILED, run_id="r1", worker=A, run_attempts=1),
], ids=["running-elsewhere", "succeeded", "failed"])
def test_a_report_of_no_particular_attempt_never_ends_another_workers_run_or_an_end(
        shown: RunRecord) -> None:
    report = finished(None, worker=A, outcome=RunOutcome.REVOKED, runtime=None)

    assert apply_event(shown, report, NOW) is shown


def test_a_retry_of_no_particular_attempt_applies_only_to_that_workers_running_run() -> None:
    assert apply_event(RunRecord(), retried(None), NOW) == RunRecord()
    assert apply_event(running(), retried(None), NOW).run_state is RunState.RETRYING


# -- lost -------------------------------------------------------------------------------------
SILENT, UNSTARTED = s(60), s(600)


#: The workers track runs since long before NOW (the leader's lease began then).
TRACKED_SINCE = NOW - s(86_400)


def verdict(record: RunRecord, dispatched_before: float | None = None, *,
            tracked_since: datetime | None = TRACKED_SINCE) -> RunRecord | None:
    dispatched = None if dispatched_before is None else NOW - s(dispatched_before)
    return lost_verdict(record, dispatched_at=dispatched, now=NOW, silent_for=SILENT,
                        unstarted_for=UNSTARTED, tracked_since=tracked_since)


def test_a_running_run_is_lost_only_once_its_heartbeat_is_strictly_older_than_silent_for(
        ) -> None:
    at_bound = running(heartbeat_before=60)
    past_bound = RunRecord(**{**at_bound.values(),
                              "heartbeat_at": NOW - s(60) - timedelta(microseconds=1)})

    assert verdict(at_bound) is None
    lost = verdict(past_bound)
    assert lost == RunRecord(**{**past_bound.values(), "run_state": RunState.LOST,
                                "finished_at": NOW, "run_error": "worker silent for 60s"})


def test_a_running_run_with_a_recent_heartbeat_is_not_lost_however_long_it_runs() -> None:
    assert verdict(running(started_before=86_400, heartbeat_before=5)) is None


def test_a_run_never_started_is_lost_past_the_start_timeout_after_the_broker_took_it() -> None:
    assert verdict(RunRecord(), dispatched_before=600) is None
    lost = verdict(RunRecord(), dispatched_before=600.001)
    assert lost is not None
    assert (lost.run_state, lost.run_error, lost.finished_at) == \
        (RunState.LOST, "never started within 600s", NOW)


def test_without_tracking_a_run_never_started_is_of_unknown_outcome_past_the_start_timeout(
        ) -> None:
    assert verdict(RunRecord(), dispatched_before=600, tracked_since=None) is None
    ended = verdict(RunRecord(), dispatched_before=600.001, tracked_since=None)
    assert ended == RunRecord(run_state=RunState.UNKNOWN, finished_at=NOW,
                              run_error="workers do not track runs (goatbeat_track_runs is off)")
    assert ended is not None and not ended.run_state.live  # nothing waits on it any longer


def test_a_run_sent_before_tracking_was_known_to_be_on_is_never_lost() -> None:
    # Sent 700 s ago, while the workers did not track runs: its report was never to come.
    since = NOW - s(650)
    ended = verdict(RunRecord(), dispatched_before=700, tracked_since=since)
    assert ended is not None
    assert (ended.run_state, ended.run_error) == (
        RunState.UNKNOWN, "sent before the workers were known to track runs")
    # Sent at the instant tracking began: judged on the workers' evidence.
    at_start = lost_verdict(RunRecord(), dispatched_at=since, now=since + s(600.001),
                            silent_for=SILENT, unstarted_for=UNSTARTED, tracked_since=since)
    assert at_start is not None and at_start.run_state is RunState.LOST


@pytest.mark.parametrize("tracked_since", [None, TRACKED_SINCE], ids=["untracked", "tracked"])
def test_a_silent_worker_s_run_is_lost_whatever_the_leader_knows_of_tracking(
        tracked_since: datetime | None) -> None:
    # Its worker reported the start: that evidence is a tracking worker's own.
    lost = verdict(running(heartbeat_before=61), tracked_since=tracked_since)
    assert lost is not None and lost.run_state is RunState.LOST
    retry = RunRecord(run_state=RunState.RETRYING, run_id="r1", worker="celery@a",
                      run_attempts=1, heartbeat_at=NOW - s(601))
    lost = verdict(retry, tracked_since=tracked_since)
    assert lost is not None and lost.run_state is RunState.LOST


@pytest.mark.parametrize("outcome", list(RunOutcome))
def test_a_report_replaces_an_unknown_outcome(outcome: RunOutcome) -> None:
    unknown = verdict(RunRecord(), dispatched_before=601, tracked_since=None)
    assert unknown is not None
    ended = apply_event(unknown, RunEvent.finished("k", run=None, worker="celery@a",
                                                   age=s(0), outcome=outcome), NOW)
    assert ended.run_state is outcome.state
    started = apply_event(unknown, RunEvent.started("k", run="r1", worker="celery@a",
                                                    age=s(0)), NOW)
    assert (started.run_state, started.run_attempts) == (RunState.RUNNING, 1)


def test_a_run_not_yet_sent_is_never_lost() -> None:
    assert verdict(RunRecord(), dispatched_before=None) is None


def test_a_retry_that_never_starts_is_lost_past_the_start_timeout() -> None:
    waiting = apply_event(running(), retried(age=600), NOW)
    assert verdict(waiting) is None
    late = apply_event(running(), retried(age=600.5), NOW)
    lost = verdict(late)
    assert lost is not None and lost.run_error == "retry never started within 600s"


@pytest.mark.parametrize("state", [RunState.SUCCEEDED, RunState.FAILED, RunState.REVOKED,
                                   RunState.REJECTED, RunState.LOST])
def test_an_ended_run_is_never_judged_again(state: RunState) -> None:
    ended = RunRecord(run_state=state, run_id="r1", worker=A, run_attempts=1,
                      started_at=NOW - s(86_400), heartbeat_at=NOW - s(86_400))

    assert verdict(ended, dispatched_before=86_400) is None


def test_a_lost_run_that_starts_again_is_a_new_attempt() -> None:
    lost = verdict(running(heartbeat_before=120))
    assert lost is not None

    after = apply_event(lost, started("r2", worker=B), NOW)

    assert (after.run_state, after.run_attempts, after.run_error, after.finished_at) == \
        (RunState.RUNNING, 2, None, None)


# -- errors and settings ---------------------------------------------------------------------
def test_an_error_summary_is_one_short_line_naming_the_exception_type() -> None:
    assert error_summary(ValueError("bad\n value\tthere")) == "ValueError: bad value there"
    assert error_summary(KeyError()) == "KeyError"
    assert error_summary(None) is None
    long = error_summary(RuntimeError("x" * 1000))
    assert long is not None and len(long) == MAX_ERROR_LENGTH and long.endswith("...")
    assert error_summary("bell\x07") == "bell\\u0007"


def test_an_exception_whose_str_fails_still_gets_a_summary() -> None:
    class Awkward(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert error_summary(Awkward()) == "Awkward"


def test_the_run_columns_are_named_as_the_record_fields() -> None:
    assert RUN_COLUMNS == ("run_state", "run_id", "worker", "run_attempts", "started_at",
                           "finished_at", "heartbeat_at", "runtime", "run_error", "run_traceback")
    record = running()
    assert RunRecord.of(record) == record
    assert set(record.values()) == set(RUN_COLUMNS)


def test_run_times_default_to_ten_seconds_a_minute_and_ten_minutes() -> None:
    times = RunTimes()

    assert (times.heartbeat_interval, times.run_lost_after, times.run_start_timeout) == \
        (s(10), s(60), s(600))


def test_run_times_report_every_problem_at_once() -> None:
    with pytest.raises(ConfigurationError) as raised:
        RunTimes(heartbeat_interval=s(0), run_lost_after=s(-1), run_start_timeout=s(8 * 86400))

    assert raised.value.problems == (
        "heartbeat_interval: must be > 0s, got 0s",
        "run_lost_after: must be > 0s, got -1s",
        "run_start_timeout: must be at most 7 days, got 8 days",
    )


def test_run_lost_after_must_cover_three_heartbeats() -> None:
    with pytest.raises(ConfigurationError) as raised:
        RunTimes(heartbeat_interval=s(10), run_lost_after=s(29))

    assert raised.value.problems == (
        "run_lost_after: 29s must be at least 3 heartbeat intervals (30s), so that one late "
        "heartbeat never marks a live run lost",)
    assert RunTimes(heartbeat_interval=s(1), run_lost_after=s(3)).run_lost_after == s(3)
    assert lost_after_problem(s(1), s(3)) is None


def test_the_engine_settings_carry_the_run_times_as_given_or_printed() -> None:
    settings = Settings(heartbeat_interval="5s", run_lost_after=15, run_start_timeout="1h")

    assert settings.run_times == RunTimes(heartbeat_interval=s(5), run_lost_after=s(15),
                                          run_start_timeout=s(3600))
    assert Settings().run_times == RunTimes()


def test_the_engine_settings_refuse_a_lost_after_shorter_than_three_heartbeats() -> None:
    with pytest.raises(ConfigurationError) as raised:
        Settings(heartbeat_interval=30, run_start_timeout=0)

    assert raised.value.problems == (
        "run_start_timeout: must be > 0s, got 0s",
        "run_lost_after: 60s must be at least 3 heartbeat intervals (90s), so that one late "
        "heartbeat never marks a live run lost",
    )
