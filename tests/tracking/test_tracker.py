"""The tracker's Celery signal handlers, in a real in-process worker (memory broker, solo and
threads pools): which reports each kind of run produces, and that tasks goatbeat did not send
are left alone."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from celery import Celery
from celery.exceptions import Reject

from goatbeat_celery.core.model import idempotency_key
from goatbeat_celery.core.runs import RunEvent, RunEventKind, RunOutcome, RunTimes
from goatbeat_celery.headers import OCCURRENCE, SCHEDULE
from goatbeat_celery.tracking import RunTracker, _Noted, track_runs
from tests.tracking.support import RecordingLog, constant, wait_for

#: The in-process worker runs a task within milliseconds of its sending, and the writer writes
#: within a flush interval (20 ms here); ten seconds is for a busy two-core machine.
SETTLE = 10.0


@pytest.fixture(params=["solo", "threads"])
def celery_worker_pool(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def celery_config(tmp_path: Any) -> dict[str, Any]:
    return {"broker_url": "memory://", "result_backend": "cache+memory://",
            "goatbeat_database_url": f"sqlite:///{tmp_path / 'goatbeat.sqlite3'}"}


@pytest.fixture
def log() -> RecordingLog:
    return RecordingLog()


@pytest.fixture
def tracker(celery_app: Celery, log: RecordingLog) -> Iterator[RunTracker]:
    made = RunTracker(celery_app, open_log=constant(log), flush_interval=0.02,
                      times=RunTimes(heartbeat_interval=timedelta(seconds=0.05),
                                     run_lost_after=timedelta(seconds=1)))
    made.connect()
    yield made
    made.disconnect()
    made.stop(timeout=2)


class Tasks:
    def __init__(self, app: Celery) -> None:
        self.release = threading.Event()
        self.seen_running: list[list[str]] = []

        @app.task(name="t.ok")
        def ok(seconds: float = 0.0) -> str:
            time.sleep(seconds)
            return "done"

        @app.task(name="t.fail")
        def fail() -> None:
            raise ValueError("boom")

        @app.task(name="t.reject")
        def reject() -> None:
            raise Reject("not for me", requeue=False)

        @app.task(bind=True, name="t.flaky", max_retries=3)
        def flaky(task: Any) -> str:
            if task.request.retries == 0:
                raise task.retry(countdown=0, exc=ConnectionError("try again"))
            return "second time"

        @app.task(name="t.hold")
        def hold() -> None:
            self.release.wait(SETTLE)

        self.ok, self.fail, self.reject, self.flaky, self.hold = ok, fail, reject, flaky, hold


@pytest.fixture
def tasks(celery_app: Celery) -> Tasks:
    return Tasks(celery_app)  # registered before the worker starts


def goatbeat_send(task: Any, **options: Any) -> str:
    """Send ``task`` as goatbeat does: its key as task id, goatbeat's headers. Each key is new:
    the worker's revoked ids and the memory broker outlive a test."""
    schedule, occurrence = unique_occurrence()
    key = idempotency_key(schedule, occurrence)
    task.apply_async(task_id=key, headers={SCHEDULE: schedule,
                                           OCCURRENCE: occurrence.isoformat()}, **options)
    return key


def unique_occurrence() -> tuple[str, datetime]:
    return f"nightly-{next(_names)}", datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


_names = itertools.count()


def reports(log: RecordingLog, count: int) -> list[RunEvent]:
    return wait_for(lambda: log.events if len(log.events) >= count else None,
                    timeout=SETTLE, what=f"{count} run reports")


def test_a_run_that_succeeds_reports_its_start_and_its_end_with_the_worker_and_runtime(
        tracker: RunTracker, tasks: Tasks, celery_worker: Any, log: RecordingLog) -> None:
    key = goatbeat_send(tasks.ok, args=(0.05,))

    start, end = reports(log, 2)

    assert (start.key, start.kind, end.key, end.kind, end.outcome) == \
        (key, RunEventKind.STARTED, key, RunEventKind.FINISHED, RunOutcome.SUCCEEDED)
    assert start.run is not None and end.run == start.run
    assert start.worker == end.worker == celery_worker.hostname
    assert end.runtime is not None and end.runtime >= timedelta(seconds=0.05)
    assert end.error is None


def test_a_failed_run_reports_the_exception_in_one_short_line(
        tracker: RunTracker, tasks: Tasks, celery_worker: Any, log: RecordingLog) -> None:
    goatbeat_send(tasks.fail)

    _, end = reports(log, 2)

    assert (end.outcome, end.error) == (RunOutcome.FAILED, "ValueError: boom")


def test_a_run_that_rejects_its_message_reports_rejected(
        tracker: RunTracker, tasks: Tasks, celery_worker: Any, log: RecordingLog) -> None:
    goatbeat_send(tasks.reject)

    _, end = reports(log, 2)

    assert end.outcome is RunOutcome.REJECTED
    assert end.error is not None and end.error.startswith("Reject")


def test_a_retry_reports_the_attempt_retried_then_the_next_attempt_under_the_same_key(
        tracker: RunTracker, tasks: Tasks, celery_worker: Any, log: RecordingLog) -> None:
    key = goatbeat_send(tasks.flaky)

    first, retried, second, end = reports(log, 4)

    assert [e.kind for e in (first, retried, second, end)] == [
        RunEventKind.STARTED, RunEventKind.RETRIED, RunEventKind.STARTED,
        RunEventKind.FINISHED]
    assert {e.key for e in (first, retried, second, end)} == {key}
    assert retried.run == first.run and end.run == second.run != first.run
    assert retried.error is not None and "try again" in retried.error
    assert end.outcome is RunOutcome.SUCCEEDED


def test_a_message_that_expired_before_it_started_is_reported_revoked_by_the_worker(
        tracker: RunTracker, tasks: Tasks, celery_worker: Any, log: RecordingLog) -> None:
    key = goatbeat_send(tasks.ok, expires=datetime.now(timezone.utc) - timedelta(seconds=1))

    (end,) = reports(log, 1)

    assert (end.key, end.kind, end.run, end.outcome, end.error) == \
        (key, RunEventKind.FINISHED, None, RunOutcome.REVOKED, "expired before it started")


def test_a_task_the_worker_does_not_know_is_reported_rejected(
        tracker: RunTracker, celery_app: Celery, celery_worker: Any,
        log: RecordingLog) -> None:
    schedule, occurrence = unique_occurrence()
    key = idempotency_key(schedule, occurrence)
    celery_app.send_task("t.missing", task_id=key,
                         headers={SCHEDULE: schedule, OCCURRENCE: occurrence.isoformat()})

    (end,) = reports(log, 1)

    assert (end.key, end.run, end.outcome, end.error) == \
        (key, None, RunOutcome.REJECTED, "unregistered task 't.missing'")


def test_tasks_goatbeat_did_not_send_are_left_alone(
        tracker: RunTracker, tasks: Tasks, celery_worker: Any, log: RecordingLog) -> None:
    tasks.ok.apply_async(task_id="plain-1")
    tasks.fail.apply_async(task_id="plain-2", headers={"other": "x"})
    key = goatbeat_send(tasks.ok)  # a marker: once its reports are in, the others would be

    events = reports(log, 2)

    assert {event.key for event in events} == {key}
    assert tracker.writer.stats.written == 2


def test_a_running_run_is_in_its_process_heartbeat_until_it_ends(
        tracker: RunTracker, tasks: Tasks, celery_worker: Any, log: RecordingLog) -> None:
    key = goatbeat_send(tasks.hold)
    wait_for(lambda: log.heartbeats, timeout=SETTLE, what="a heartbeat")
    assert tracker.running_keys() == [key]
    assert set(log.heartbeats) == {(key,)}

    tasks.release.set()

    reports(log, 2)
    assert tracker.running_keys() == []


def test_the_heartbeat_interval_is_read_from_the_app_configuration(
        celery_app: Celery, log: RecordingLog) -> None:
    celery_app.conf.goatbeat_heartbeat_interval = "2s"
    celery_app.conf.goatbeat_run_lost_after = 6

    tracker = RunTracker(celery_app, open_log=constant(log))

    assert tracker.writer._heartbeat_interval == 2.0


def test_an_invalid_configuration_turns_tracking_off_and_says_so(
        celery_app: Celery, caplog: pytest.LogCaptureFixture) -> None:
    celery_app.conf.goatbeat_heartbeat_interval = 30  # run_lost_after 60 s < 3 x 30 s
    tracker = RunTracker(celery_app)

    tracker._on_worker_init(sender=None)
    tracker._note(_Noted(RunEventKind.STARTED, "k", "r", "celery@a", 0.0))

    (record,) = [r for r in caplog.records
                 if getattr(r, "action", None) == "run_tracking_disabled"]
    assert "goatbeat_run_lost_after: 60s must be at least 3 heartbeat intervals" in \
        record.getMessage()
    assert tracker._writer is None  # nothing held, no thread started


def test_track_runs_connects_one_tracker_per_app(celery_app: Celery) -> None:
    first = track_runs(celery_app)
    try:
        assert track_runs(celery_app) is first
    finally:
        first.disconnect()
