"""The worker's duplicate check (goatbeat_celery.worker.tracking.duplicates) on the memory store:
which deliveries it reads the database for, what it says of each, what it knows without the
database, and that a check that fails runs the task."""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

import pytest
from celery import Celery
from celery.worker import state as worker_state
from celery.worker.request import Request

from goatbeat_celery import signals
from goatbeat_celery.core.protocols import RunLog
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome, RunTimes
from goatbeat_celery.core.types.errors import StoreUnavailable
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from goatbeat_celery.headers import OCCURRENCE, SCHEDULE, SEND
from goatbeat_celery.testing import MemoryStore
from goatbeat_celery.worker.tracking.duplicates import DuplicateCheck, install, request_class

TIMES = RunTimes(heartbeat_interval=timedelta(seconds=1), run_lost_after=timedelta(seconds=4))


class Opener:
    """Opens the memory store as the check's RunLog, counting how often; ``failing`` makes
    every read fail as an unreachable database does."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.opened = 0
        self.failing = False

    def __call__(self) -> RunLog:
        self.opened += 1
        return self  # type: ignore[return-value]

    def read_runs(self, keys: Any) -> Any:
        if self.failing:
            raise StoreUnavailable("read runs: database unavailable: connection refused")
        return self.store.read_runs(keys)


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def opener(store: MemoryStore) -> Opener:
    return Opener(store)


@pytest.fixture
def check(opener: Opener) -> DuplicateCheck:
    return DuplicateCheck(opener, lambda: TIMES, lambda: "celery@here")


def sent(store: MemoryStore) -> str:
    """The key of a run the broker took."""
    grant = store.acquire("default", "beat", timedelta(minutes=1))
    assert grant is not None
    later = store.now() + timedelta(hours=1)
    store.create_schedule(ScheduleSpec(name="hourly", task="t.hourly", trigger=TriggerSpec(
        kind="interval", params={"every": 3600})), next_occurrence_at=later, next_run_at=later)
    key = store.request_run("hourly").key
    (dispatch,) = store.take_pending(lease=grant, limit=1)
    store.mark_submitted([dispatch.key])
    return key


def headers(key: str, send: int | None = None) -> dict[str, Any]:
    """goatbeat's headers on the message of the run whose key is ``key``."""
    occurrence = key.removeprefix("hourly:").removesuffix(":manual")
    found: dict[str, Any] = {SCHEDULE: "hourly", OCCURRENCE: occurrence}
    if send is not None:
        found[SEND] = send
    return found


def test_a_first_send_delivered_once_is_never_checked(check: DuplicateCheck, opener: Opener,
                                                      store: MemoryStore) -> None:
    key = sent(store)
    store.record_runs([RunEvent.finished(key, run="r1", worker="w", age=timedelta(0),
                                         outcome=RunOutcome.SUCCEEDED, started_age=timedelta(0))])

    assert check.reason(key, headers(key, 1), {"redelivered": False}) is None
    assert check.reason(key, headers(key), {}) is None  # sent by an older beat: no header
    assert check.reason(key, {"id": key}, {"redelivered": True}) is None  # not goatbeat's
    assert opener.opened == 0


def test_a_later_send_or_a_redelivery_of_a_run_that_ended_is_a_duplicate(
        check: DuplicateCheck, store: MemoryStore) -> None:
    key = sent(store)
    assert check.reason(key, headers(key, 2), {}) is None  # not started: it runs
    store.record_runs([RunEvent.finished(key, run="r1", worker="w", age=timedelta(0),
                                         outcome=RunOutcome.SUCCEEDED, started_age=timedelta(0))])

    assert check.reason(key, headers(key, 2), {}) == "the run already succeeded"
    assert check.reason(key, headers(key, 1), {"redelivered": True}) == "the run already succeeded"


def test_a_copy_of_a_run_beating_elsewhere_is_a_duplicate_unless_the_broker_redelivers_it(
        check: DuplicateCheck, store: MemoryStore) -> None:
    key = sent(store)
    store.record_runs([RunEvent.started(key, run="r1", worker="celery@a", age=timedelta(0))])

    assert check.reason(key, headers(key, 2), {}) == "the run is running on celery@a"
    assert check.reason(key, headers(key, 1), {"redelivered": True}) is None


def test_a_run_ended_in_this_worker_is_known_before_the_database_knows_it(
        check: DuplicateCheck, opener: Opener, store: MemoryStore) -> None:
    key = sent(store)
    check.ended(key, at=time.monotonic())

    assert check.reason(key, headers(key, 2), {}) == "the run already ended in this worker"
    assert opener.opened == 0


class _Request:
    def __init__(self, id: str) -> None:
        self.id = id


def test_another_copy_received_in_this_worker_is_a_duplicate_but_not_the_delivery_itself(
        check: DuplicateCheck, store: MemoryStore) -> None:
    key = sent(store)
    first, second = _Request(key), _Request(key)
    worker_state.reserved_requests.add(first)
    try:
        assert check.reason(key, headers(key, 2), {}, first) is None
        assert check.reason(key, headers(key, 2), {}, second) == \
            "another copy is received in this worker"
    finally:
        worker_state.reserved_requests.discard(first)


def test_a_check_that_cannot_reach_the_database_runs_the_task(
        check: DuplicateCheck, opener: Opener, store: MemoryStore,
        caplog: pytest.LogCaptureFixture) -> None:
    key = sent(store)
    store.record_runs([RunEvent.finished(key, run="r1", worker="w", age=timedelta(0),
                                         outcome=RunOutcome.SUCCEEDED, started_age=timedelta(0))])
    opener.failing = True

    with caplog.at_level(logging.WARNING):
        assert check.reason(key, headers(key, 2), {}) is None

    (record,) = [r for r in caplog.records if getattr(r, "action", None)
                 == "duplicate_check_failed"]
    assert key in record.getMessage()
    # The next deliveries run unchecked for a while rather than each wait on the database.
    opener.failing = False
    assert check.reason(key, headers(key, 2), {}) is None


def test_a_suppressed_delivery_is_logged_and_signalled(
        check: DuplicateCheck, caplog: pytest.LogCaptureFixture) -> None:
    heard: list[dict[str, Any]] = []

    def receiver(sender: Any = None, **kwargs: Any) -> None:
        heard.append(kwargs)

    signals.run_duplicate_suppressed.connect(receiver, weak=False)
    try:
        with caplog.at_level(logging.INFO):
            check.suppressed("hourly:x", headers("hourly:x", 2), "the run already succeeded")
    finally:
        signals.run_duplicate_suppressed.disconnect(receiver)

    assert [(h["key"], h["schedule_name"], h["reason"], h["worker"]) for h in heard] == \
        [("hourly:x", "hourly", "the run already succeeded", "celery@here")]
    assert [r.getMessage() for r in caplog.records
            if getattr(r, "action", None) == "duplicate_suppressed"] == \
        ["goatbeat: delivery of hourly:x acknowledged and not run: the run already succeeded"]


def test_install_gives_the_checking_request_to_tasks_on_celerys_own_only(
        check: DuplicateCheck) -> None:
    app = Celery("duplicates", set_as_current=False)

    @app.task(name="plain")
    def plain() -> None: ...

    @app.task(name="custom", Request="some.module:OwnRequest")
    def custom() -> None: ...

    installed = install(app, check)

    assert app.tasks["plain"].Request.__name__ == "GoatbeatRequest"
    assert app.tasks["custom"].Request == "some.module:OwnRequest"
    assert installed == len([t for t in app.tasks.values()
                             if getattr(t.Request, "__name__", "") == "GoatbeatRequest"])
    assert issubclass(request_class(check), Request)
