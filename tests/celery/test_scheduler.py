"""goatbeat_celery.Scheduler inside a Celery app, with an in-process worker
(celery.contrib.pytest fixtures, memory broker) and the SQLite store."""

from __future__ import annotations

import gc
import os
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from goatbeat_celery import occurrence_of
from goatbeat_celery.beat.scheduler import (
    BURST_GEN0_THRESHOLD,
    PYTHON_GEN0_THRESHOLD,
    Scheduler,
    _bound_broker_sockets,
    app_given,
    broker_warning,
)
from goatbeat_celery.beat.submitter import CelerySubmitter
from goatbeat_celery.config import GoatbeatConfig
from goatbeat_celery.core.types.claims import Dispatch
from goatbeat_celery.core.types.execution import Execution, ExecutionState, idempotency_key
from goatbeat_celery.store import open_store
from tests.conftest import empty_database
from tests.support.waiting import wait_for


@pytest.fixture
def received(celery_app: Celery) -> list[dict[str, Any]]:
    """Registers the recording task (before the worker starts) and returns what it saw."""
    seen: list[dict[str, Any]] = []
    lock = threading.Lock()

    @celery_app.task(bind=True, name="rec.record")
    def record(self: Any, label: str) -> None:
        with lock:
            seen.append({"id": self.request.id, "label": label,
                         "schedule": getattr(self.request, "goatbeat_schedule", None),
                         "occurrence": getattr(self.request, "goatbeat_occurrence", None),
                         "token": getattr(self.request, "goatbeat_token", None),
                         "run": occurrence_of(self)})

    return seen


def test_the_lazy_instance_opens_no_store_and_takes_no_lease(celery_app: Celery, tmp_path: Path):
    target = tmp_path / "never" / "created.sqlite3"
    celery_app.conf.goatbeat_database_url = f"sqlite:///{target}"
    scheduler = Scheduler(app=celery_app, lazy=True)
    assert scheduler.engine is None
    assert "goatbeat store -> sqlite:///" in scheduler.info
    assert "ttl 3.0s" in scheduler.info
    scheduler.close()
    assert not target.parent.exists()


def test_scheduler_sends_each_occurrence_with_its_key_as_task_id(
        celery_app: Celery, received: list[dict[str, Any]], celery_worker: Any,
        database_url: str):
    scheduler = Scheduler(app=celery_app)
    try:
        def two_runs() -> bool:
            scheduler.tick()
            return len(received) >= 2
        wait_for(two_runs, timeout=10, what="two runs of the interval schedule")
    finally:
        scheduler.close()
    for record in received:
        occurrence = datetime.fromisoformat(record["occurrence"])
        assert record["id"] == idempotency_key("every-second", occurrence)
        assert record["schedule"] == "every-second"
        assert record["label"] == "tick"
        assert occurrence.microsecond == 0
        run = record["run"]
        assert (run.key, run.schedule, run.at, run.manual) == (
            record["id"], "every-second", occurrence, False)
        assert run.token == record["token"] and isinstance(run.token, int)
    store = open_store(database_url)
    try:
        states = {e.key: e.state for e in store.executions(schedule_name="every-second")}
    finally:
        store.close()
    assert {r["id"] for r in received} <= set(states)


def test_close_is_idempotent_and_hands_the_lease_over_at_once(celery_app: Celery,
                                                              database_url: str):
    scheduler = Scheduler(app=celery_app)

    # Ticked until it leads: a first tick slower than the lease's local validity (2 s here,
    # seen on a loaded machine) ends with the lease no longer trusted, and the next takes it.
    def leading() -> bool:
        scheduler.tick()
        return scheduler.engine is not None and scheduler.engine.is_leader()
    wait_for(leading, timeout=30, what="the scheduler to lead")
    engine = scheduler.engine
    assert engine is not None
    token = engine.grant.token if engine.grant else 0
    scheduler.close()
    scheduler.close()
    store = open_store(database_url)
    try:
        grant = store.acquire("default", "standby", timedelta(seconds=3))
    finally:
        store.close()
    assert grant is not None and grant.token == token + 1


def test_the_heap_built_at_start_up_is_frozen_after_the_first_tick_and_thawed_at_close(
        celery_app: Celery, database_url: str) -> None:
    scheduler = Scheduler(app=celery_app)
    try:
        scheduler.tick()
        # Celery's, the app's and the store's objects are out of the collector's way...
        frozen = gc.get_freeze_count()
        assert frozen > 10_000
        # ... and a second tick freezes nothing more (frozen objects freed since leave it).
        scheduler.tick()
        assert gc.get_freeze_count() <= frozen
    finally:
        scheduler.close()
    assert gc.get_freeze_count() == 0


@pytest.mark.parametrize("chosen", [None, (2_000, 5, 5)])
def test_the_youngest_generation_is_collected_less_often_unless_the_app_chose_thresholds(
        celery_app: Celery, database_url: str, chosen: tuple[int, int, int] | None) -> None:
    before = gc.get_threshold()
    gc.set_threshold(*(chosen or (PYTHON_GEN0_THRESHOLD, *before[1:])))
    try:
        expected = gc.get_threshold()
        scheduler = Scheduler(app=celery_app)
        try:
            scheduler.tick()
            if chosen is None:
                assert gc.get_threshold() == (BURST_GEN0_THRESHOLD, *expected[1:])
            else:
                assert gc.get_threshold() == chosen
        finally:
            scheduler.close()
        assert gc.get_threshold() == expected
    finally:
        gc.set_threshold(*before)


def test_a_bad_config_raises_system_exit_naming_every_problem(celery_app: Celery):
    celery_app.conf.goatbeat_misfire_policy = "sometimes"
    celery_app.conf.beat_schedule = {"neg": {"task": "t", "schedule": -1}}
    with pytest.raises(SystemExit) as caught:
        Scheduler(app=celery_app, lazy=True)
    message = str(caught.value.code)
    assert "goatbeat_misfire_policy" in message and "sometimes" in message
    assert "beat_schedule['neg'].schedule" in message


def test_submitting_to_an_unreachable_broker_fails_within_the_timeout():
    app = Celery("down", broker="redis://127.0.0.1:1/0", set_as_current=False)
    app.conf.broker_transport_options = {"socket_connect_timeout": 1, "socket_timeout": 1}
    now = datetime.now(timezone.utc)
    execution = Execution(key=idempotency_key("s", now), schedule_name="s", occurrence_at=now,
                          due_at=now, token=1, state=ExecutionState.CLAIMED, claimed_at=now)
    dispatch = Dispatch(execution=execution, task="t", args=(), kwargs={}, options={})
    started = time.monotonic()
    result = CelerySubmitter(app).submit([dispatch], token=1, timeout=2.0)
    elapsed = time.monotonic() - started
    assert result.accepted == [] and result.rejected == {}
    assert list(result.failed) == [dispatch.key]
    # The batch's budget is 2 s; one connect attempt may start just before it runs out and
    # take its own 1 s connect timeout. 6 s is twice that sum, for a busy two-core machine.
    assert elapsed < 2 * (2.0 + 1.0), f"submission took {elapsed:.1f}s despite a 2s budget"


# kombu's SQLAlchemy transport still uses a loader strategy SQLAlchemy 2.1 deprecates.
@pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy is deprecated")
def test_a_sqlalchemy_broker_accepts_messages_from_the_scheduler(tmp_path: Path,
                                                                 database_url: str):
    """Socket timeouts are only set on Redis transports; other brokers keep working."""
    app = Celery("sqla", broker=f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}",
                 set_as_current=False)
    # The default lease: a send may take until the lease's local deadline, and kombu's first
    # publish on this transport creates its tables, several seconds on a loaded machine.
    app.conf.update(goatbeat_database_url=database_url,
                    beat_schedule={"s": {"task": "t", "schedule": 1.0}})
    scheduler = Scheduler(app=app)
    try:
        store = scheduler.engine.store if scheduler.engine else None
        assert store is not None

        def submitted() -> bool:
            scheduler.tick()
            return any(e.state is ExecutionState.SUBMITTED
                       for e in store.executions(schedule_name="s"))
        wait_for(submitted, timeout=10, what="a message accepted by the sqla broker")
        assert [e.last_error for e in store.executions(schedule_name="s") if e.last_error] == []
    finally:
        scheduler.close()


def test_a_sqlite_store_says_at_start_and_in_the_banner_that_it_serves_one_host(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)  # the default file is made in the working directory
    app = Celery("onehost", broker="memory://", set_as_current=False)
    with caplog.at_level("WARNING", logger="goatbeat_celery.beat.scheduler"):
        scheduler = Scheduler(app)
        try:
            banner = scheduler.info
        finally:
            scheduler.close()

    [warning] = [r for r in caplog.records if getattr(r, "action", None) == "one_host_store"]
    message = warning.getMessage()
    assert "goatbeat_database_url is not set" in message
    assert str(tmp_path / "goatbeat.sqlite3") in message
    assert "(one host only)" in banner


def test_a_postgresql_store_gives_no_one_host_warning(pg_url: str) -> None:
    assert GoatbeatConfig(database_url=pg_url).store_warning() is None
    assert "several hosts" in (GoatbeatConfig(database_url="sqlite:///x.db").store_warning()
                               or "")


@pytest.mark.parametrize(("argv", "app"), [
    (["celery", "-A", "myproj.celery", "beat"], "myproj.celery"),
    (["celery", "--app", "pkg:app", "beat"], "pkg:app"),
    (["celery", "--app=pkg", "beat"], "pkg"),
    (["celery", "-Apkg", "beat"], "pkg"),
    (["celery", "beat"], None),
], ids=str)
def test_the_app_given_on_the_command_line_is_found(argv: list[str], app: str | None):
    assert app_given(argv) == app


def test_beat_on_an_unmigrated_database_names_its_own_app_in_the_migrate_hint(
        pg_server_url: Any, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("sys.argv", ["celery", "-A", "shop.tasks", "beat"])
    with empty_database(pg_server_url, f"goatbeat_unmigrated_{os.getpid()}") as url:
        app = Celery("shop", broker="memory://", set_as_current=False)
        app.conf.goatbeat_database_url = url
        with pytest.raises(SystemExit) as raised:
            Scheduler(app)
    assert "`celery -A shop.tasks goatbeat migrate`" in str(raised.value)
    assert "-A proj" not in str(raised.value)


def test_a_broker_refusing_connections_fails_a_batch_at_once_not_after_a_back_off():
    """The claim loop waits for each batch it hands to the broker: kombu's default retry waits
    2 s first, which held every claim that long at each try during an outage. A refused
    connection is answered at once, so a second is a wide margin on a busy machine."""
    app = Celery("refused", broker="redis://127.0.0.1:1/0", set_as_current=False)
    now = datetime.now(timezone.utc)
    execution = Execution(key=idempotency_key("s", now), schedule_name="s", occurrence_at=now,
                          due_at=now, token=1, state=ExecutionState.CLAIMED, claimed_at=now)
    dispatch = Dispatch(execution=execution, task="t", args=(), kwargs={}, options={})
    submitter = CelerySubmitter(app)
    budget = 5.0
    submitter.submit([dispatch], token=1, timeout=budget)  # the first try opens the pool

    started = time.monotonic()
    result = submitter.submit([dispatch], token=1, timeout=budget)
    elapsed = time.monotonic() - started

    assert list(result.failed) == [dispatch.key]
    # Refused at once, it fails at once: retrying until the budget ran out would take it all.
    # Half of it is the margin for a busy two-core machine.
    assert elapsed < budget / 2, f"a refused connection held the batch {elapsed:.1f}s"


@pytest.mark.parametrize(("url", "expected"), [
    ("amqp://guest:guest@127.0.0.1:5672//", {"confirm_publish": True, "read_timeout": 5.0,
                                             "write_timeout": 5.0}),
    ("pyamqp://127.0.0.1//", {"confirm_publish": True, "read_timeout": 5.0,
                              "write_timeout": 5.0}),
    ("redis://127.0.0.1:6379/0", {"socket_timeout": 5.0, "socket_connect_timeout": 5.0}),
    ("memory://", {}),
], ids=str)
def test_beat_asks_an_amqp_broker_to_confirm_every_publish(url: str,
                                                          expected: dict[str, Any]):
    app = Celery("confirms", broker=url, set_as_current=False)
    _bound_broker_sockets(app)
    assert dict(app.conf.broker_transport_options or {}) == expected
    assert broker_warning(app) is None


def test_confirms_turned_off_by_the_user_are_kept_and_warned_about():
    app = Celery("unconfirmed", broker="amqp://127.0.0.1//", set_as_current=False)
    app.conf.broker_transport_options = {"confirm_publish": False}
    _bound_broker_sockets(app)
    assert app.conf.broker_transport_options["confirm_publish"] is False
    assert "confirm_publish=False" in (broker_warning(app) or "")
