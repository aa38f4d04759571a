"""The tracker's Celery signal handlers, in a real in-process worker (memory broker, solo and
threads pools), writing to the memory store: what each kind of run leaves in its execution's
run columns, and that tasks goatbeat did not send are left alone.

One worker per pool serves every test of the module (stopping one takes seconds: its consumer
waits out a 2 s poll), with one tracker connected before it starts, as ``track_runs`` is in a
real worker; each test gets a store and a log of its own (:func:`log`)."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from celery.contrib.testing.app import TestApp, setup_default_app
from celery.contrib.testing.worker import start_worker
from celery.exceptions import Reject

from goatbeat_celery.core.rules.runs import RunEventKind, RunState, RunTimes
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from goatbeat_celery.headers import OCCURRENCE, SCHEDULE
from goatbeat_celery.testing import MemoryStore
from goatbeat_celery.worker.tracking import RunTracker, track_runs
from goatbeat_celery.worker.tracking.writer import _noted
from tests.support.waiting import wait_for
from tests.tracking.support import RecordingLog, constant

#: The in-process worker runs a task within milliseconds of its sending, and the writer writes
#: within a flush interval (20 ms here); ten seconds is for a busy two-core machine.
SETTLE = 10.0
HEARTBEAT = timedelta(seconds=0.05)

#: How far apart two instants of one run may be read by the writer and the store.
CLOCK_READINGS = timedelta(seconds=0.02)


def app_config(directory: Path) -> dict[str, Any]:
    # The memory broker is polled: every 50 ms rather than every second, so that a test
    # waits for its run, not for the worker's next look.
    return {"broker_url": "memory://", "result_backend": "cache+memory://",
            "broker_transport_options": {"polling_interval": 0.05},
            "goatbeat_database_url": f"sqlite:///{directory / 'goatbeat.sqlite3'}"}


@pytest.fixture
def celery_config(tmp_path: Path) -> dict[str, Any]:
    return app_config(tmp_path)


class Tasks:
    def __init__(self, app: Celery) -> None:
        #: What ``hold`` waits for; each test gets a new one (:func:`tasks`).
        self.release = threading.Event()
        self.seen_running: list[list[str]] = []

        # Not shared: they belong to this app alone, which outlives a test.
        @app.task(name="t.ok", shared=False)
        def ok(seconds: float = 0.0) -> str:
            time.sleep(seconds)
            return "done"

        @app.task(name="t.fail", shared=False)
        def fail() -> None:
            raise ValueError("boom")

        @app.task(name="t.reject", shared=False)
        def reject() -> None:
            raise Reject("not for me", requeue=False)

        @app.task(bind=True, name="t.flaky", max_retries=3, shared=False)
        def flaky(task: Any) -> str:
            if task.request.retries == 0:
                raise task.retry(countdown=0, exc=ConnectionError("try again"))
            return "second time"

        @app.task(name="t.hold", shared=False)
        def hold() -> None:
            self.release.wait(SETTLE)

        self.ok, self.fail, self.reject, self.flaky, self.hold = ok, fail, reject, flaky, hold


@dataclass
class Served:
    """One pool's in-process worker, its app and tasks, and the tracker connected before it
    started, writing to a log each test gives a store of its own."""

    app: Celery
    worker: Any
    tasks: Tasks
    tracker: RunTracker
    log: RecordingLog


@pytest.fixture(scope="module", params=["solo", "threads"])
def served(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    app = TestApp(config=app_config(tmp_path_factory.mktemp("tracker")))
    log = RecordingLog(store=MemoryStore())
    # Starting a worker sets the root logger to the worker's level: given back at the end.
    level = logging.root.level
    with setup_default_app(app):
        tasks = Tasks(app)  # registered before the worker starts
        tracker = RunTracker(app, open_log=constant(log), flush_interval=0.02,
                             times=RunTimes(heartbeat_interval=HEARTBEAT,
                                            run_lost_after=HEARTBEAT * 3))
        tracker.connect()
        try:
            with start_worker(app, pool=str(request.param)) as worker:
                yield Served(app, worker, tasks, tracker, log)
        finally:
            tracker.disconnect()
            tracker.stop(timeout=2)
            logging.root.setLevel(level)


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def log(served: Served, store: MemoryStore) -> Iterator[RecordingLog]:
    """The module's log, emptied and handing on to this test's store; what the worker noted
    for this test is written before the next test's turn."""
    served.log.restart(store)
    yield served.log
    assert served.tracker.writer.flush(SETTLE), "the writer did not catch up"


@pytest.fixture
def tracker(served: Served, log: RecordingLog) -> RunTracker:
    return served.tracker


@pytest.fixture
def celery_worker(served: Served) -> Any:
    return served.worker


@pytest.fixture
def tasks(served: Served) -> Tasks:
    served.tasks.release = threading.Event()
    return served.tasks


_names = itertools.count()


def goatbeat_send(store: MemoryStore, task: Any, **options: Any) -> str:
    """Send ``task`` as goatbeat does, for a new execution the broker took: its key as the task
    id, goatbeat's headers. Each key is new: the worker's revoked ids and the memory broker
    outlive a test."""
    [sent] = goatbeat_runs(store, 1, task=str(task.name))
    task.apply_async(task_id=sent.key, headers=sent.headers, **options)
    return sent.key


def run_of(store: MemoryStore, key: str) -> Execution:
    return next(e for e in store.executions(limit=1000) if e.key == key)


def ended(store: MemoryStore, key: str) -> Execution:
    """The execution once its run ended (any state but running or retrying)."""
    def done() -> Execution | None:
        run = run_of(store, key)
        return run if run.run_state is not None and not run.run_state.live else None
    return wait_for(done, timeout=SETTLE, what=f"the run of {key} to end")


def test_a_run_that_succeeds_is_recorded_with_the_worker_and_runtime(
        tracker: RunTracker, tasks: Tasks, celery_worker: Any, store: MemoryStore) -> None:
    key = goatbeat_send(store, tasks.ok, args=(0.05,))

    run = ended(store, key)

    assert (run.run_state, run.worker, run.run_attempts, run.run_error) == \
        (RunState.SUCCEEDED, celery_worker.hostname, 1, None)
    assert run.runtime is not None and run.runtime >= timedelta(seconds=0.05)
    assert run.started_at is not None and run.finished_at is not None
    # The instants are ages put on the store's clock when each report is written: each is late
    # by the moments between the writer's reading and the store's, milliseconds on a busy
    # machine (ci13: 48.4 ms apart for a 50 ms run). The runtime above is exact.
    assert run.finished_at - run.started_at >= timedelta(seconds=0.05) - CLOCK_READINGS


def test_a_failed_run_is_recorded_with_the_exception_in_one_short_line(
        tracker: RunTracker, tasks: Tasks, celery_worker: Any, store: MemoryStore) -> None:
    key = goatbeat_send(store, tasks.fail)

    run = ended(store, key)

    assert (run.run_state, run.run_error, run.run_attempts) == \
        (RunState.FAILED, "ValueError: boom", 1)


def test_a_run_that_rejects_its_message_is_recorded_rejected(
        tracker: RunTracker, tasks: Tasks, celery_worker: Any, store: MemoryStore) -> None:
    key = goatbeat_send(store, tasks.reject)

    run = ended(store, key)

    assert run.run_state is RunState.REJECTED
    assert run.run_error is not None and run.run_error.startswith("Reject")


def test_a_retry_is_another_attempt_of_the_same_key(
        tracker: RunTracker, tasks: Tasks, celery_worker: Any, store: MemoryStore,
        log: RecordingLog) -> None:
    key = goatbeat_send(store, tasks.flaky)

    run = ended(store, key)

    assert (run.run_state, run.run_attempts, run.run_error) == (RunState.SUCCEEDED, 2, None)
    ends = [e for e in log.events if e.kind is not RunEventKind.STARTED]
    assert [e.kind for e in ends] == [RunEventKind.RETRIED, RunEventKind.FINISHED]
    assert ends[0].run != ends[1].run == run.run_id
    assert ends[0].error is not None and "try again" in ends[0].error


def test_a_message_that_expired_before_it_started_is_recorded_revoked_by_the_worker(
        tracker: RunTracker, tasks: Tasks, celery_worker: Any, store: MemoryStore,
        log: RecordingLog) -> None:
    key = goatbeat_send(store, tasks.ok, expires=-1.0)

    run = ended(store, key)

    assert (run.run_state, run.run_error, run.run_attempts, run.started_at) == \
        (RunState.REVOKED, "expired before it started", 0, None)
    assert [e.run for e in log.events] == [None]  # reported by the process that received it


def test_a_task_the_worker_does_not_know_is_recorded_rejected(
        tracker: RunTracker, served: Served, celery_worker: Any, store: MemoryStore) -> None:
    missing = served.app.signature("t.missing")
    key = goatbeat_send(store, missing)

    run = ended(store, key)

    assert (run.run_state, run.run_error) == (RunState.REJECTED,
                                              "unregistered task 't.missing'")


def test_tasks_goatbeat_did_not_send_are_left_alone(
        tracker: RunTracker, tasks: Tasks, celery_worker: Any, store: MemoryStore,
        log: RecordingLog) -> None:
    tasks.ok.apply_async(task_id="plain-1")
    tasks.fail.apply_async(task_id="plain-2", headers={"other": "x"})
    key = goatbeat_send(store, tasks.ok)  # a marker: once it ended, the others ran too

    ended(store, key)

    assert {event.key for event in log.events} == {key}


def test_a_message_whose_id_is_another_schedule_s_run_key_writes_nothing_to_that_run(
        tracker: RunTracker, tasks: Tasks, served: Served, celery_worker: Any,
        store: MemoryStore, log: RecordingLog) -> None:
    """What a schedule's headers could once do: its message sent under the key of another
    schedule's run, with goatbeat's headers naming its own schedule and occurrence (or that
    schedule under another occurrence). Failing, expiring or unknown, it reports nothing."""
    [own] = goatbeat_runs(store, 1)
    forged = [(tasks.fail, {}), (tasks.reject, {}), (tasks.ok, {"expires": -1.0}),
              (served.app.signature("t.missing"), {})]
    victims = goatbeat_runs(store, len(forged))
    for index, ((task, options), victim) in enumerate(zip(forged, victims, strict=True)):
        headers = [own.headers, {**victim.headers, OCCURRENCE: own.headers[OCCURRENCE]}]
        task.apply_async(task_id=victim.key, headers=headers[index % 2], **options)
    key = goatbeat_send(store, tasks.ok)  # a marker: once it ended, the others ran too

    ended(store, key)

    assert {event.key for event in log.events} == {key}
    for run in (own, *victims):
        assert run_of(store, run.key).run_state is None


@dataclass
class Sent:
    key: str
    headers: dict[str, str]


def goatbeat_runs(store: MemoryStore, count: int, task: str = "t.ok") -> list[Sent]:
    """``count`` runs the broker took, not sent here: their keys and the goatbeat headers
    their messages carry."""
    found = []
    for _ in range(count):
        name = f"nightly-{next(_names)}"
        store.create_schedule(ScheduleSpec(name=name, task=task, trigger=TriggerSpec(
            kind="interval", params={"every": 3600})), next_occurrence_at=None,
            next_run_at=None)
        execution = store.request_run(name)
        store.mark_submitted([execution.key])
        found.append(Sent(execution.key, {SCHEDULE: name,
                                          OCCURRENCE: execution.occurrence_at.isoformat()}))
    return found


def test_a_running_run_is_in_its_process_heartbeat_until_it_ends(
        tracker: RunTracker, tasks: Tasks, celery_worker: Any, store: MemoryStore,
        log: RecordingLog) -> None:
    key = goatbeat_send(store, tasks.hold)
    wait_for(lambda: log.heartbeats, timeout=SETTLE, what="a heartbeat")
    assert tracker.running_keys() == [key]
    assert set(log.heartbeats) == {(key,)}
    running = run_of(store, key)
    assert running.run_state is RunState.RUNNING
    wait_for(lambda: run_of(store, key).heartbeat_at != running.heartbeat_at,
             timeout=SETTLE, what="the heartbeat to move heartbeat_at on")

    tasks.release.set()

    assert ended(store, key).run_state is RunState.SUCCEEDED
    assert tracker.running_keys() == []


def test_the_heartbeat_interval_is_read_from_the_app_configuration(
        celery_app: Celery) -> None:
    celery_app.conf.goatbeat_heartbeat_interval = "2s"
    celery_app.conf.goatbeat_run_lost_after = 6

    tracker = RunTracker(celery_app, open_log=constant(RecordingLog()))

    assert tracker.writer._heartbeat_interval == 2.0


def test_an_invalid_configuration_turns_tracking_off_and_says_so(
        celery_app: Celery, caplog: pytest.LogCaptureFixture) -> None:
    celery_app.conf.goatbeat_heartbeat_interval = 30  # run_lost_after 60 s < 3 x 30 s
    tracker = RunTracker(celery_app)

    tracker._on_worker_init(sender=None)
    tracker._note(_noted(RunEventKind.STARTED, "k", "r", "celery@a", 0.0))

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
