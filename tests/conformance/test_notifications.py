"""wait/notify: what the ScheduleStore contract says notifies (a schedule created, edited,
paused, resumed or deleted, a manual run, a calendar created or replaced, a backfill created,
a lease release) wakes a replica waiting on the store."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.rules.backfill import BackfillRequest
from goatbeat_celery.core.rules.calendars import Calendar

from .conftest import Backend, Store
from .support import LONG_TTL, create_due, interval_spec

#: A waiter that hears nothing for this long has missed the change.
WAIT_LIMIT = 20.0
#: Changes are made every POLL seconds until the waiter hears one: at most this many.
POLL = 0.2
MOST_CHANGES = int(WAIT_LIMIT / POLL) + 1


def _nothing(backend: Backend) -> None:
    pass


def _create(backend: Backend) -> None:
    backend.store.create_schedule(interval_spec(f"new-{next(_created)}"),
                                  next_occurrence_at=None, next_run_at=None)


_created = itertools.count()


def _prepare_deletes(backend: Backend) -> None:
    # Created before the waiter listens, so that only the deletes can wake it.
    for index in range(MOST_CHANGES):
        backend.store.create_schedule(interval_spec(f"doomed-{index}"),
                                      next_occurrence_at=None, next_run_at=None)


def _delete(backend: Backend) -> None:
    backend.store.delete_schedule(backend.store.list_schedules(prefix="doomed-", limit=1)[0].name)


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


def _create_calendar(backend: Backend) -> None:
    backend.store.create_calendar(Calendar(name=f"calendar-{next(_created)}"))


def _prepare_calendar(backend: Backend) -> None:
    backend.store.create_calendar(Calendar(name="holidays"))


def _replace_calendar(backend: Backend) -> None:
    store = backend.store
    current = store.get_calendar("holidays")
    store.replace_calendar(replace(current, description=f"edit {next(_created)}"))


def _create_backfill(backend: Backend) -> None:
    now = backend.store.now()
    backend.store.create_backfill(BackfillRequest(
        schedule_name="report", start=now - timedelta(minutes=5), end=now, total=5))


def _pause_or_resume(backend: Backend) -> None:
    schedules = Schedules(backend.store)
    if schedules.get("report").spec.enabled:
        schedules.pause("report")
    else:
        schedules.resume("report")


#: Each change by id: what prepares it (before anyone waits), and the change itself.
CHANGES: dict[str, tuple[Callable[[Backend], None], Callable[[Backend], None]]] = {
    "create": (_nothing, _create),
    "edit": (_nothing, _edit),
    "pause-resume": (_nothing, _pause_or_resume),
    "delete": (_prepare_deletes, _delete),
    "manual-run": (_nothing, _manual_run),
    "create-calendar": (_nothing, _create_calendar),
    "replace-calendar": (_prepare_calendar, _replace_calendar),
    "create-backfill": (_nothing, _create_backfill),
    "lease-release": (_nothing, _release),
}


def heard(waiter: Store, change: Callable[[], None]) -> float:
    """Seconds until ``waiter``, waiting on the store, is woken while ``change`` is made every
    POLL seconds (the first may land before it listens); fails past WAIT_LIMIT."""
    woken = threading.Event()
    outcome: list[bool] = []

    def wait() -> None:
        outcome.append(waiter.wait(WAIT_LIMIT))
        woken.set()

    thread = threading.Thread(target=wait)
    started = time.monotonic()
    thread.start()
    while not woken.wait(POLL):
        assert time.monotonic() - started < WAIT_LIMIT
        change()
    thread.join()
    assert outcome == [True]
    return time.monotonic() - started


@pytest.mark.parametrize("prepare,change", list(CHANGES.values()), ids=list(CHANGES))
def test_a_change_wakes_a_replica_waiting_on_the_store(
    backend: Backend, prepare: Callable[[Backend], None], change: Callable[[Backend], None]
) -> None:
    store = backend.store
    store.create_schedule(interval_spec("report"), next_occurrence_at=None, next_run_at=None)
    prepare(backend)
    waiter = backend.open_peer()
    waiter.wait(0)  # forget anything announced before this replica started waiting
    assert waiter.wait(0.1) is False, "woken although nothing changed"
    # The waiter may not be listening yet when the first change lands: change again until it
    # hears one (each change is real, and one is enough).
    assert heard(waiter, lambda: change(backend)) < WAIT_LIMIT / 2


def test_the_end_of_a_run_a_policy_waits_on_wakes_a_store_that_hears_every_change(
        backend: Backend) -> None:
    from .support import claim, lease, report

    store = backend.store
    if not store.wakes_on_every_change:
        # Its leader looks every max_interval instead (tests/unit/test_engine.py pins that).
        assert backend.name in ("memory", "sqlite", "mysql")
        return
    grant = lease(store)
    awaited = [create_due(store, f"awaited-{index}") for index in range(MOST_CHANGES)]
    keys = []
    for schedule in awaited:
        (run,) = store.claim([claim(schedule, settle=True)], lease=grant).dispatches
        keys.append(run.key)
    store.mark_submitted(keys)
    plain = create_due(store, "plain")
    (unawaited,) = store.claim([claim(plain)], lease=grant).dispatches
    store.mark_submitted([unawaited.key])
    waiter = backend.open_peer()
    waiter.wait(0)

    report(store, unawaited.key)  # no policy waits on this one: nobody is woken
    assert waiter.wait(0.5) is False, "woken by the end of a run nothing waits on"

    ends = iter(keys)  # one end is enough once the waiter listens
    assert heard(waiter, lambda: report(store, next(ends))) < WAIT_LIMIT / 2
