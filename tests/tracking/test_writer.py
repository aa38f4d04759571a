"""The worker's run writer: a bounded buffer filled by task threads, drained in batches by one
thread per process. A database that is down, hung or refusing never makes a task wait; what
cannot be written is held up to the bound, then dropped oldest first, counted and logged."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from goatbeat_celery.core.rules.runs import RunEventKind, RunOutcome
from goatbeat_celery.worker.tracking.writer import RunWriter, _event, _Noted, _noted
from tests.support.waiting import wait_for
from tests.tracking.support import RecordingLog, constant

#: Fast enough for tests, slow enough that batches form: the writer wakes every 20 ms.
FLUSH = 0.02
#: After a failed write the writer waits 20 ms, doubling up to 80 ms.
BACKOFF_MAX = 0.08
#: How long a test waits for the writer to catch up: hundreds of its wake-ups, which a busy
#: two-core machine still delivers within a few seconds.
CATCH_UP = 10.0


def started(key: str, at: float | None = None) -> _Noted:
    return _noted(RunEventKind.STARTED, key, f"run-{key}", "celery@a",
                  time.monotonic() if at is None else at)


@pytest.fixture
def log() -> RecordingLog:
    return RecordingLog()


@pytest.fixture
def make_writer(log: RecordingLog) -> Iterator[Callable[..., RunWriter]]:
    made: list[RunWriter] = []

    def make(**options: Any) -> RunWriter:
        settings: dict[str, Any] = {"heartbeat_interval": 60.0, "flush_interval": FLUSH,
                                    "backoff_max": BACKOFF_MAX, **options}
        writer = RunWriter(constant(log), **settings)
        made.append(writer)
        return writer

    yield make
    log.down = False
    log.refusing = False
    if log.hang is not None:
        log.hang.set()
    for writer in made:
        writer.stop(timeout=2)


def keys(log: RecordingLog) -> list[str]:
    return [event.key for event in log.events]


@pytest.fixture(autouse=True)
def _tracking_logs(caplog: pytest.LogCaptureFixture) -> None:
    # The writer's log lines are part of what these tests check: capture them whatever level
    # an earlier test left on the root logger (an in-process Celery worker sets ERROR).
    caplog.set_level(logging.INFO, logger="goatbeat_celery.worker.tracking")


def actions(caplog: pytest.LogCaptureFixture, action: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "action", None) == action]


# -- writing ---------------------------------------------------------------------------------
def test_events_are_written_in_order_in_batches_by_the_writer_thread(
        make_writer: Callable[..., RunWriter], log: RecordingLog) -> None:
    writer = make_writer(batch_size=10)
    threads: set[str] = set()
    record = log.record_runs

    def noting_thread(events: Any) -> int:
        threads.add(threading.current_thread().name)
        return record(events)

    log.record_runs = noting_thread  # type: ignore[method-assign]
    for index in range(25):
        writer.put(started(f"k{index:02d}"))

    assert writer.flush(CATCH_UP)
    assert keys(log) == [f"k{index:02d}" for index in range(25)]
    assert all(len(batch) <= 10 for batch in log.batches)
    assert threads == {"goatbeat-run-writer"}
    assert (writer.stats.written, writer.stats.dropped) == (25, 0)


def test_a_run_that_starts_and_ends_within_a_batch_is_sent_as_its_end_alone(
        make_writer: Callable[..., RunWriter], log: RecordingLog) -> None:
    writer = make_writer(flush_interval=60)  # everything goes in the stop's one batch
    now = time.monotonic()
    writer.put(_noted(RunEventKind.STARTED, "quick", "r1", "celery@a", now - 1))
    writer.put(_noted(RunEventKind.STARTED, "slow", "r2", "celery@a", now - 1))
    writer.put(_noted(RunEventKind.FINISHED, "quick", "r1", "celery@a", now,
                      RunOutcome.SUCCEEDED, 1.0, None, now - 1))
    writer.put(_noted(RunEventKind.FINISHED, "gone", None, "celery@a", now,
                      RunOutcome.REVOKED, None, "expired before it started", None))

    assert writer.stop(timeout=CATCH_UP)

    assert [(e.key, e.kind) for e in log.events] == [
        ("slow", RunEventKind.STARTED), ("quick", RunEventKind.FINISHED),
        ("gone", RunEventKind.FINISHED)]
    assert log.events[1].started_age is not None  # the end carries its start


def test_a_noted_event_becomes_ages_measured_when_it_is_written() -> None:
    noted = _noted(RunEventKind.FINISHED, "k", "r", "celery@a", at=100.0,
                   outcome=RunOutcome.FAILED, runtime=1.25, error="ValueError: x",
                   started=98.75)

    event = _event(noted, now=102.5)

    assert (event.key, event.kind, event.run, event.worker, event.outcome, event.error) == \
        ("k", RunEventKind.FINISHED, "r", "celery@a", RunOutcome.FAILED, "ValueError: x")
    assert (event.age, event.started_age, event.runtime) == \
        (timedelta(seconds=2.5), timedelta(seconds=3.75), timedelta(seconds=1.25))


def test_events_noted_before_the_writer_caught_up_carry_how_long_ago_they_happened(
        make_writer: Callable[..., RunWriter], log: RecordingLog) -> None:
    writer = make_writer()
    writer.put(started("old", at=time.monotonic() - 30))

    assert writer.flush(CATCH_UP)
    (event,) = log.events
    # 30 s ago when noted; written within CATCH_UP of that.
    assert timedelta(seconds=30) <= event.age < timedelta(seconds=30 + CATCH_UP)


def test_events_naming_no_execution_are_counted_and_reported(
        make_writer: Callable[..., RunWriter], caplog: pytest.LogCaptureFixture) -> None:
    log = RecordingLog(unknown={"gone"})
    writer = RunWriter(constant(log), heartbeat_interval=60, flush_interval=FLUSH)
    try:
        writer.put(started("gone"))
        writer.put(started("here"))
        assert writer.flush(CATCH_UP)
    finally:
        writer.stop(2)

    assert writer.stats.unknown == 1
    (record,) = actions(caplog, "run_events_unknown")
    assert record.levelno == logging.WARNING and getattr(record, "count", None) == 1


# -- the task never waits ----------------------------------------------------------------------
def test_noting_never_waits_for_a_hung_database(make_writer: Callable[..., RunWriter],
                                                log: RecordingLog) -> None:
    log.hang = threading.Event()
    writer = make_writer(max_events=100)
    writer.put(started("first"))
    wait_for(lambda: log.calls, timeout=CATCH_UP, what="the writer to be stuck in a write")

    def note() -> None:
        for index in range(1000):
            writer.put(started(f"k{index}"))
        noted.set()

    noted = threading.Event()
    threading.Thread(target=note, daemon=True).start()
    # The write stays hung until the end of the test: a put that waited for it would never
    # return (what a put costs shows in benchmarks/tracking.py, not in a timed test).
    assert noted.wait(CATCH_UP), "a put waited for the hung database"
    assert not log.hang.is_set()
    assert writer.stats.dropped == 1000 - 100
    log.hang.set()
    assert writer.flush(CATCH_UP)
    assert keys(log)[0] == "first" and len(log.events) == 101


def test_an_outage_holds_events_and_writes_them_in_order_once_the_database_is_back(
        make_writer: Callable[..., RunWriter], log: RecordingLog,
        caplog: pytest.LogCaptureFixture) -> None:
    log.down = True
    writer = make_writer(batch_size=8)
    for index in range(30):
        writer.put(started(f"k{index:02d}"))
    wait_for(lambda: writer.stats.failed_writes >= 3, timeout=CATCH_UP,
             what="three failed writes")
    assert log.events == [] and writer.pending == 30

    log.down = False

    assert writer.flush(CATCH_UP)
    assert keys(log) == [f"k{index:02d}" for index in range(30)]
    assert writer.stats.dropped == 0
    assert len(actions(caplog, "run_tracking_unavailable")) == 1
    wait_for(lambda: actions(caplog, "run_tracking_recovered"), timeout=CATCH_UP,
             what="the recovery to be logged")


def test_a_failing_database_is_retried_with_a_capped_backoff(
        make_writer: Callable[..., RunWriter], log: RecordingLog) -> None:
    log.down = True
    writer = make_writer()
    writer.put(started("k"))
    wait_for(lambda: writer.stats.failed_writes >= 2, timeout=CATCH_UP, what="two failures")
    calls, began = writer.stats.failed_writes, time.monotonic()
    wait_for(lambda: writer.stats.failed_writes >= calls + 5, timeout=CATCH_UP,
             what="five more failures")
    elapsed = time.monotonic() - began

    # Five retries at the cap (80 ms) take 0.4 s; each is at least a flush interval apart.
    assert elapsed >= 4 * FLUSH
    for index in range(2000):  # a full buffer must not make it retry sooner
        writer.put(started(f"more{index}"))
    calls, began = writer.stats.failed_writes, time.monotonic()
    wait_for(lambda: writer.stats.failed_writes >= calls + 3, timeout=CATCH_UP,
             what="three more failures")
    assert time.monotonic() - began >= 2 * FLUSH


def test_past_its_bound_the_buffer_drops_the_oldest_events_counted_and_logged(
        make_writer: Callable[..., RunWriter], log: RecordingLog,
        caplog: pytest.LogCaptureFixture) -> None:
    log.down = True
    writer = make_writer(max_events=100, batch_size=40)
    for index in range(250):
        writer.put(started(f"k{index:03d}"))
    wait_for(lambda: writer.stats.failed_writes >= 2, timeout=CATCH_UP, what="failed writes")
    assert writer.stats.dropped == 150
    dropped = wait_for(lambda: actions(caplog, "run_events_dropped"), timeout=CATCH_UP,
                       what="the drops to be logged")
    assert dropped[0].levelno == logging.WARNING and getattr(dropped[0], "count", 0) >= 150

    log.down = False

    assert writer.flush(CATCH_UP)
    assert keys(log) == [f"k{index:03d}" for index in range(150, 250)]


def test_a_batch_the_database_refuses_is_dropped_after_three_tries_and_the_rest_go_on(
        make_writer: Callable[..., RunWriter], log: RecordingLog,
        caplog: pytest.LogCaptureFixture) -> None:
    log.refusing = True
    writer = make_writer(batch_size=5)
    for index in range(5):
        writer.put(started(f"bad{index}"))
    wait_for(lambda: writer.stats.dropped == 5, timeout=CATCH_UP, what="the batch dropped")
    assert writer.stats.failed_writes == 3
    assert any(r.levelno == logging.ERROR for r in actions(caplog, "run_events_dropped"))

    log.refusing = False
    writer.put(started("good"))

    assert writer.flush(CATCH_UP)
    assert keys(log) == ["good"]


# -- heartbeats ------------------------------------------------------------------------------
def test_the_writer_sends_one_heartbeat_per_interval_for_the_runs_of_its_process(
        make_writer: Callable[..., RunWriter], log: RecordingLog) -> None:
    writer = make_writer(heartbeat_interval=0.05, running=lambda: ["k1", "k2", "k1"])
    writer.start()

    wait_for(lambda: len(log.heartbeats) >= 3, timeout=CATCH_UP, what="three heartbeats")
    assert set(log.heartbeats) == {("k1", "k2")}
    assert writer.stats.heartbeats >= 3


def test_no_heartbeat_is_sent_while_the_process_runs_nothing(log: RecordingLog) -> None:
    writer = RunWriter(constant(log), heartbeat_interval=60, running=tuple)

    writer._heartbeat()

    assert log.heartbeats == [] and log.calls == 0


def test_a_failed_heartbeat_is_counted_and_tried_again_next_interval(
        make_writer: Callable[..., RunWriter], log: RecordingLog) -> None:
    log.down = True
    writer = make_writer(heartbeat_interval=0.05, running=lambda: ["k1"])
    writer.start()
    wait_for(lambda: writer.stats.failed_writes >= 2, timeout=CATCH_UP, what="failures")

    log.down = False

    wait_for(lambda: log.heartbeats, timeout=CATCH_UP, what="a heartbeat once back")


# -- stopping --------------------------------------------------------------------------------
def test_stop_writes_what_is_held_and_closes_the_log(make_writer: Callable[..., RunWriter],
                                                     log: RecordingLog) -> None:
    writer = make_writer(flush_interval=60)  # nothing would be written before the stop
    for index in range(10):
        writer.put(started(f"k{index}"))

    assert writer.stop(timeout=CATCH_UP)
    assert len(log.events) == 10
    assert log.closed


def test_stop_gives_up_within_its_timeout_while_the_database_is_down(
        make_writer: Callable[..., RunWriter], log: RecordingLog,
        caplog: pytest.LogCaptureFixture) -> None:
    log.down = True
    writer = make_writer()
    writer.put(started("k"))
    began = time.monotonic()

    assert not writer.stop(timeout=0.5)
    # The join waits 0.5 s; the rest is the thread switch on a busy machine.
    assert time.monotonic() - began < 0.5 + 1.0
    assert actions(caplog, "run_events_dropped")


def test_a_writer_that_never_started_stops_at_once(log: RecordingLog) -> None:
    writer = RunWriter(constant(log), heartbeat_interval=60)

    assert writer.stop(timeout=0.1)
    assert log.calls == 0
