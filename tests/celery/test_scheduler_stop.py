"""A stop signal (SIGTERM, SIGINT) that arrives while a tick claims and sends is handled once
the tick has recorded what it sent, so a clean stop never leaves a sent batch ``claimed`` for
the next leader to send again."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from goatbeat_celery.beat.scheduler import Scheduler
from goatbeat_celery.beat.stopsignals import StopSignals
from goatbeat_celery.core.types.execution import ExecutionState
from goatbeat_celery.store import open_store


def beat_for(tmp_path: Path) -> tuple[Scheduler, str]:
    url = f"sqlite:///{tmp_path / 'goatbeat.sqlite3'}"
    app = Celery("stop", broker="memory://", set_as_current=False)
    app.conf.update(
        goatbeat_database_url=url, goatbeat_lease_ttl=3, goatbeat_lease_renew_interval=1,
        goatbeat_max_interval=0.2,
        beat_schedule={"every-second": {"task": "stop.noop", "schedule": 1.0}},
    )
    return Scheduler(app=app), url


def tick_until_stopped(scheduler: Scheduler, after_signal: list[str]) -> list[int]:
    """Tick until a send makes the process signal itself, with a handler like the one celery
    beat installs (close the scheduler, leave the loop); returns the signals it handled."""
    engine = scheduler.engine
    assert engine is not None
    send = engine.submitter.submit

    def send_then_be_told_to_stop(dispatches: Any, *, token: int, timeout: float) -> Any:
        sent = send(dispatches, token=token, timeout=timeout)
        if not after_signal:  # once: a tick made long by a busy machine may send again
            signal_self()
        after_signal.append("went on sending")
        return sent

    engine.submitter.submit = send_then_be_told_to_stop  # type: ignore[method-assign]
    handled: list[int] = []

    def celery_beat_handler(signum: int, frame: Any) -> None:
        scheduler.close()
        handled.append(signum)
        raise SystemExit()

    previous = signal.signal(signal.SIGTERM, celery_beat_handler)
    try:
        with pytest.raises(SystemExit):
            for _ in range(100):
                scheduler.tick()
    finally:
        signal.signal(signal.SIGTERM, previous)
        scheduler.close()
    return handled


def signal_self() -> None:
    # As an operator's `kill` landing just then, sent to the main thread (the one that runs
    # Python's signal handlers).
    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGTERM)


def states(url: str) -> set[ExecutionState]:
    store = open_store(url)
    try:
        return {e.state for e in store.executions()}
    finally:
        store.close()


def test_sigterm_right_after_a_send_is_handled_once_the_batch_is_marked_submitted(
        tmp_path: Path) -> None:
    scheduler, url = beat_for(tmp_path)
    after: list[str] = []
    assert tick_until_stopped(scheduler, after) == [signal.SIGTERM]
    assert after and set(after) == {"went on sending"}
    assert states(url) == {ExecutionState.SUBMITTED}


def test_a_second_stop_signal_while_one_is_held_is_handled_at_once() -> None:
    # The way out for a tick stuck on a call that never returns.
    handled: list[int] = []
    went_on: list[int] = []

    def celery_beat_handler(signum: int, frame: Any) -> None:
        handled.append(signum)
        raise SystemExit()

    def carry_on(step: int) -> None:  # entering a function runs the handlers pending
        went_on.append(step)

    previous = signal.signal(signal.SIGTERM, celery_beat_handler)
    try:
        with pytest.raises(SystemExit):
            with StopSignals().held():
                signal_self()
                carry_on(1)
                signal_self()
                carry_on(2)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert handled == [signal.SIGTERM]
    assert went_on == [1]


def test_between_blocks_a_stop_signal_is_handed_over_at_once_and_restore_puts_back_the_handler(
        ) -> None:
    handled: list[str] = []

    def celery_beat_handler(signum: int, frame: Any) -> None:
        handled.append("stop")

    def carry_on(step: str) -> None:  # entering a function runs the handlers pending
        handled.append(step)

    previous = signal.signal(signal.SIGTERM, celery_beat_handler)
    stops = StopSignals()
    try:
        with stops.held():
            signal_self()
            carry_on("in the block")
        carry_on("after the block")
        signal_self()  # between ticks: Celery's handler runs as if nothing were in front of it
        carry_on("between blocks")
        assert signal.getsignal(signal.SIGTERM) != celery_beat_handler, "held by StopSignals"

        stops.restore()

        assert signal.getsignal(signal.SIGTERM) == celery_beat_handler
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert handled == ["in the block", "stop", "after the block", "stop", "between blocks"]


def test_restore_leaves_a_handler_set_after_its_own_in_place() -> None:
    def first(signum: int, frame: Any) -> None: ...

    def later(signum: int, frame: Any) -> None: ...

    previous = signal.signal(signal.SIGTERM, first)
    stops = StopSignals()
    try:
        with stops.held():
            pass
        signal.signal(signal.SIGTERM, later)

        stops.restore()

        assert signal.getsignal(signal.SIGTERM) == later
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("reading_on", [False, True], ids=["waiting-for-the-send",
                                                          "reading-the-next-batch"])
def test_a_second_stop_signal_stops_a_tick_whose_send_never_returns_without_waiting_on_it(
        tmp_path: Path, reading_on: bool) -> None:
    # As behind a connection that swallows traffic: the batch's thread never comes back, and
    # (reading-the-next-batch) nor does the loop's own next read. The operator's second signal
    # stops the tick at once, and closing asks nothing of the store (its release could hang as
    # the send did): the lease stays with this replica.
    scheduler, url = beat_for(tmp_path)
    engine = scheduler.engine
    assert engine is not None
    stuck, freed = threading.Event(), threading.Event()
    main_stuck = threading.Event()

    def send_that_never_returns(dispatches: Any, *, token: int, timeout: float) -> Any:
        stuck.set()
        freed.wait()
        raise RuntimeError("unblocked by the test's teardown")

    engine.submitter.submit = send_that_never_returns  # type: ignore[method-assign]
    if reading_on:
        read = engine.store.due_schedules
        claimed: list[bool] = []

        def read_that_never_returns_once_a_send_is_stuck(*args: Any, **kwargs: Any) -> Any:
            if claimed:  # the read after the one that found the batch now on the wire
                stuck.wait()
                main_stuck.set()
                while not freed.wait(0.1):  # as psycopg waits: signals are run between slices
                    pass
            batch = read(*args, **kwargs)
            if batch.schedules:
                claimed.append(True)
            return batch

        engine.store.due_schedules = read_that_never_returns_once_a_send_is_stuck  # type: ignore[method-assign]
    else:
        main_stuck.set()

    def operator() -> None:
        stuck.wait()
        main_stuck.wait()
        # Two different signals, so that neither is lost in the other while pending: whichever
        # is handled first is held, the other is the second one.
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGTERM)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    handled: list[int] = []

    def celery_beat_handler(signum: int, frame: Any) -> None:
        scheduler.close()
        handled.append(signum)
        raise SystemExit()

    previous = {number: signal.signal(number, celery_beat_handler)
                for number in (signal.SIGTERM, signal.SIGINT)}
    threading.Thread(target=operator, daemon=True).start()
    try:
        with pytest.raises(SystemExit):
            for _ in range(100):
                scheduler.tick()
        scheduler.close()  # as Celery's service does once its loop has ended
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        freed.set()
        scheduler.close()
    assert len(handled) == 1 and stuck.is_set()
    store = open_store(url)
    try:
        leases = store.list_leases("")
        assert leases and {lease.holder for lease in leases} == {engine.holder}
        assert {e.state for e in store.executions()} == {ExecutionState.CLAIMED}
    finally:
        store.close()
