"""wait/notify: an edit, a manual run or a lease release wakes a replica waiting on the store."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from .conftest import Backend
from .support import LONG_TTL, interval_spec

#: A waiter that hears nothing for this long has missed the change.
WAIT_LIMIT = 20.0


def _edit(backend: Backend) -> None:
    store = backend.store
    current = store.get_schedule("report")
    store.replace_schedule(current.spec, next_occurrence_at=current.next_occurrence_at,
                           next_run_at=current.next_run_at)


def _manual_run(backend: Backend) -> None:
    backend.clock.advance(0.001)  # a manual run's key is its instant: one per instant
    backend.store.request_run("report")


def _release(backend: Backend) -> None:
    grant = backend.store.acquire("beat", "leader", LONG_TTL)
    assert grant is not None and backend.store.release(grant)


CHANGES: dict[str, Callable[[Backend], None]] = {
    "edit": _edit,
    "manual-run": _manual_run,
    "lease-release": _release,
}


@pytest.mark.parametrize("change", list(CHANGES.values()), ids=list(CHANGES))
def test_a_change_wakes_a_replica_waiting_on_the_store(
    backend: Backend, change: Callable[[Backend], None]
) -> None:
    store = backend.store
    store.create_schedule(interval_spec("report"), next_occurrence_at=None, next_run_at=None)
    waiter = backend.open_peer()
    waiter.wait(0)  # forget anything announced before this replica started waiting
    assert waiter.wait(0.1) is False, "woken although nothing changed"
    woken = threading.Event()
    outcome: list[bool] = []

    def wait() -> None:
        outcome.append(waiter.wait(WAIT_LIMIT))
        woken.set()

    thread = threading.Thread(target=wait)
    started = time.monotonic()
    thread.start()
    # The waiter may not be listening yet when the first change lands: change again until it
    # hears one (each change is real, and one is enough).
    while not woken.wait(0.2):
        assert time.monotonic() - started < WAIT_LIMIT
        change(backend)
    thread.join()

    assert outcome == [True]
    assert time.monotonic() - started < WAIT_LIMIT / 2
