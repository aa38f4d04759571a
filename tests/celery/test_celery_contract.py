"""``goatbeat_celery.Scheduler`` keeps the contract of ``celery.beat.Scheduler``: what Celery's
own beat tests check of a scheduler (ticks due and pending, ``max_interval``, ``send_task`` and
its errors seen by ``apply_entry``, the entries a hook is handed, ``Service`` and
``EmbeddedService``), checked here on goatbeat's, with a SQLite store and the memory broker."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from celery import Celery, beat, current_app, signals
from celery.schedules import schedstate

from goatbeat_celery.beat.context import app_current
from goatbeat_celery.beat.entries import GoatbeatEntry
from goatbeat_celery.beat.scheduler import Scheduler
from goatbeat_celery.store import open_store
from tests.celery.support import (
    EVERY_SECOND,
    HOURLY,
    TIMEOUT,
    app_for,
    executions,
    submitted,
)
from tests.support.waiting import wait_for


# -- max_interval -----------------------------------------------------------------------------
@pytest.mark.parametrize(("given", "conf", "expected"), [
    ({"max_interval": 7}, {"beat_max_loop_interval": 9}, 7),
    ({}, {"beat_max_loop_interval": 9}, 9),
    ({}, {}, beat.DEFAULT_MAX_INTERVAL),
], ids=["argument", "beat_max_loop_interval", "celerys_default"])
def test_max_interval_is_the_one_celery_gives_whatever_goatbeat_max_interval_says(
        tmp_path: Path, given: dict[str, Any], conf: dict[str, Any], expected: float) -> None:
    app = app_for(tmp_path, HOURLY, goatbeat_max_interval=4, **conf)
    scheduler = Scheduler(app=app, lazy=True, **given)
    try:
        assert scheduler.max_interval == expected
    finally:
        scheduler.close()


def test_a_tick_waits_no_longer_than_max_interval(tmp_path: Path) -> None:
    """Nothing is due for an hour and the lease is renewed every 10 s: only Celery's
    max_interval of 0.3 s ends the wait."""
    app = app_for(tmp_path, HOURLY, goatbeat_lease_ttl=30, goatbeat_lease_renew_interval=10,
                  goatbeat_max_interval=60)
    scheduler = Scheduler(app=app, max_interval=0.3)
    try:
        scheduler.tick()  # takes the lease and syncs the config
        for _ in range(3):
            started = time.monotonic()
            assert scheduler.tick() == 0.0
            elapsed = time.monotonic() - started
            # 0.3 s of wait, and a second of margin for a busy 2-core machine: far from the
            # 10 s until the renewal the engine would have slept.
            assert elapsed < 0.3 + 1.0, f"a tick waited {elapsed:.1f}s with max_interval 0.3"
    finally:
        scheduler.close()


class Immediate(Scheduler):
    """A host's loop that sleeps what tick returns, as Celery's own tick is used."""

    tick_waits = False


def test_a_tick_that_does_not_wait_returns_at_once_the_seconds_until_the_next_due_run(
        tmp_path: Path) -> None:
    app = app_for(tmp_path, {"every-2s": {"task": "contract.work", "schedule": 2.0}},
                  goatbeat_lease_ttl=30, goatbeat_lease_renew_interval=10,
                  goatbeat_max_interval=60)
    scheduler = Immediate(app=app, max_interval=60)
    try:
        engine = scheduler.engine
        assert engine is not None
        # The host's loop sleeps what tick returns (a little at a time here, so that the wait
        # ends as soon as the first run is sent, not when the second falls due).
        wait_for(lambda: submitted(app, "every-2s"), "the first run",
                 tick=lambda: time.sleep(min(scheduler.tick(), 0.05)), timeout=TIMEOUT)
        # A tick now returns at once the seconds left until the store's next run. (Right
        # after start-up a tick may return 0: the first run fell due while it looked.)
        started = time.monotonic()
        pending = scheduler.tick()
        assert time.monotonic() - started < 0.5, "a pending tick returned at once"
        next_run = engine.store.get_schedule("every-2s").next_run_at
        assert next_run is not None
        until = (next_run - datetime.now(timezone.utc)).total_seconds()
        assert 0.0 < pending <= 2.0, pending
        # The same instant as the store's, within what a busy machine may spend between the
        # tick and the read (0.5 s).
        assert abs(pending - until) < 0.5, (pending, until)

        # Due: sleeping what it returned, the next tick sends the run.
        before = len(submitted(app, "every-2s"))
        time.sleep(pending)
        wait_for(lambda: len(submitted(app, "every-2s")) > before, "the due run",
                 tick=scheduler.tick, timeout=TIMEOUT)
    finally:
        scheduler.close()


def test_a_tick_of_the_lazy_instance_returns_max_interval(tmp_path: Path) -> None:
    scheduler = Scheduler(app=app_for(tmp_path, HOURLY), lazy=True, max_interval=2)
    assert scheduler.tick() == 2
    scheduler.close()


# -- send_task and its errors -----------------------------------------------------------------
class OwnSendTask(Scheduler):
    """A subclass that sends through its own ``send_task``, as Celery's beat calls it for a
    task this process does not import."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.sent: list[tuple[str, str]] = []
        self.fail = False
        super().__init__(*args, **kwargs)

    def send_task(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self.sent.append((name, kwargs["task_id"]))
        if self.fail:
            raise RuntimeError("no route to the broker today")
        return super().send_task(name, *args, **kwargs)


def test_a_task_beat_does_not_import_goes_through_the_schedulers_send_task(
        tmp_path: Path) -> None:
    app = app_for(tmp_path, {"elsewhere": {"task": "other.service.work", "schedule": 1.0}})
    scheduler = OwnSendTask(app=app, max_interval=0.2)
    try:
        wait_for(lambda: submitted(app, "elsewhere"), "a run sent", tick=scheduler.tick,
                 timeout=TIMEOUT)
    finally:
        scheduler.close()
    sent_keys = {key for name, key in scheduler.sent if name == "other.service.work"}
    assert {e.key for e in submitted(app, "elsewhere")} <= sent_keys


def test_a_send_task_error_is_logged_by_apply_entry_and_fails_that_run_alone(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    app = app_for(tmp_path, {"elsewhere": {"task": "other.service.work", "schedule": 1.0},
                             "here": {"task": "contract.work", "schedule": 1.0}})

    @app.task(name="contract.work", shared=False)
    def work() -> None:
        """Known here: sent through its own apply_async."""

    scheduler = OwnSendTask(app=app, max_interval=0.2)
    scheduler.fail = True
    try:
        with caplog.at_level(logging.ERROR, logger="celery.beat"):
            wait_for(lambda: [e for e in executions(app, "elsewhere") if e.last_error]
                     and submitted(app, "here"), "a refused run beside a sent one",
                     tick=scheduler.tick, timeout=TIMEOUT)
    finally:
        scheduler.close()
    # Celery's apply_entry logged the error and did not raise it.
    logged = [r for r in caplog.records if r.name == "celery.beat"
              and r.getMessage().startswith("Message Error")]
    assert logged and "no route to the broker today" in logged[0].getMessage()
    refused = [e for e in executions(app, "elsewhere") if e.last_error]
    assert all("no route to the broker today" in (e.last_error or "") for e in refused)
    assert not submitted(app, "elsewhere")


# -- the beat's app is current where it sends -------------------------------------------------
def test_a_before_task_publish_handler_sees_the_beats_app_current(tmp_path: Path) -> None:
    app = app_for(tmp_path, {"here": {"task": "contract.private", "schedule": 1.0}})

    @app.task(name="contract.private", shared=False)
    def private() -> None:
        """Registered on this app only: the default app's registry has no such task."""

    seen: list[tuple[str, bool, str]] = []

    def handler(sender: Any = None, **kwargs: Any) -> None:
        if sender == "contract.private":
            seen.append((current_app.main, sender in current_app.tasks,
                         threading.current_thread().name))

    signals.before_task_publish.connect(handler, weak=False)
    scheduler = Scheduler(app=app, max_interval=0.2)
    try:
        wait_for(lambda: seen, "a publish of the private task", tick=scheduler.tick,
                 timeout=TIMEOUT)
    finally:
        scheduler.close()
        signals.before_task_publish.disconnect(handler)
    assert seen[0][:2] == (app.main, True)


def test_the_app_is_current_for_the_block_only_and_the_thread_gets_its_own_back() -> None:
    app = Celery("beatsapp", set_as_current=False)
    before: list[Any] = []
    inside: list[Any] = []
    after: list[Any] = []

    def on_a_fresh_thread() -> None:
        before.append(current_app._get_current_object())
        with app_current(app):
            inside.append(current_app._get_current_object())
        after.append(current_app._get_current_object())

    thread = threading.Thread(target=on_a_fresh_thread)
    thread.start()
    thread.join(TIMEOUT)
    assert inside == [app]
    assert after == before and before[0] is not app


# -- the entries a hook is handed -------------------------------------------------------------
class Reserving(Scheduler):
    """A hook that reserves each entry (as Celery's apply_async does with advance=True) and
    reads it as Celery's beat would have it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.seen: list[tuple[GoatbeatEntry, Any, Any, bool]] = []
        super().__init__(*args, **kwargs)

    def apply_entry(self, entry: Any, producer: Any = None) -> None:
        upcoming = self.reserve(entry)
        stored = self.schedule.get(entry.name) is upcoming
        self.seen.append((entry, upcoming, entry.is_due(), stored))
        super().apply_entry(entry, producer=producer)


def test_a_hook_that_reserves_the_entry_gets_the_next_one_and_the_run_is_sent(
        tmp_path: Path) -> None:
    app = app_for(tmp_path, EVERY_SECOND)
    scheduler = Reserving(app=app, max_interval=0.2)
    try:
        wait_for(lambda: len(submitted(app, "every-second")) >= 2, "two runs sent",
                 tick=scheduler.tick, timeout=TIMEOUT)
    finally:
        scheduler.close()
    assert not [e for e in executions(app, "every-second") if e.last_error]
    entry, upcoming, due, stored = scheduler.seen[0]
    # next(entry), as Celery's: the same call, one run more, last run this occurrence.
    assert isinstance(upcoming, beat.ScheduleEntry) and not isinstance(upcoming, GoatbeatEntry)
    assert (upcoming.name, upcoming.task, upcoming.args, upcoming.kwargs) == (
        entry.name, entry.task, entry.args, entry.kwargs)
    assert upcoming.schedule is entry.schedule
    assert upcoming.total_run_count == entry.total_run_count + 1
    assert upcoming.last_run_at == entry.occurrence_at
    # goatbeat's own headers belong to this run, not to the next.
    assert "goatbeat_schedule" in entry.options["headers"]
    assert "goatbeat_schedule" not in (upcoming.options.get("headers") or {})
    assert next(entry) == upcoming and next(entry).total_run_count == upcoming.total_run_count
    # Handed over because it is due, with the seconds until the run after it.
    assert isinstance(due, schedstate) and due.is_due is True
    assert 0.0 <= due.next <= 1.0
    # The store advanced the schedule at the claim: reserve() wrote nothing into `schedule`.
    assert not stored


# -- Service and EmbeddedService --------------------------------------------------------------
def lease_holder(app: Celery) -> str | None:
    store = open_store(app.conf.goatbeat_database_url)
    try:
        info = store.inspect("default")
    finally:
        store.close()
    return None if info is None or info.holder is None else info.holder


def test_service_starts_sends_and_stops_releasing_the_lease(tmp_path: Path) -> None:
    app = app_for(tmp_path, EVERY_SECOND)
    service = beat.Service(app, max_interval=0.5, scheduler_cls=Scheduler,
                           remote_control=False)
    thread = threading.Thread(target=service.start, name="service", daemon=True)
    thread.start()
    try:
        wait_for(lambda: submitted(app, "every-second"), "a run sent by the service",
                 timeout=TIMEOUT)
    finally:
        service.stop(wait=True)  # waits for Service.sync(), which closes the scheduler
    thread.join(TIMEOUT)
    assert not thread.is_alive()
    assert lease_holder(app) is None, "the lease was released at stop"


def test_an_embedded_thread_service_stops_within_celerys_second(tmp_path: Path) -> None:
    """EmbeddedService(thread=True) asks for a max_interval of 1 s so that it can stop in time;
    goatbeat_max_interval is left at its default (5 s)."""
    app = app_for(tmp_path, EVERY_SECOND)
    embedded = beat.EmbeddedService(app, thread=True, scheduler_cls=Scheduler)
    embedded.start()
    try:
        wait_for(lambda: submitted(app, "every-second"), "a run sent by the embedded beat",
                 timeout=TIMEOUT)
        assert embedded.service.scheduler.max_interval == 1
    finally:
        started = time.monotonic()
        embedded.stop()
        elapsed = time.monotonic() - started
    # Celery's 1 s wait, then a tick begun before the stop was seen (a claim and a send on
    # SQLite) and closing the store and releasing the lease: 2.4 s on a 2-core machine at a
    # load average of 10, so two seconds for those. Under 3 s, where a wait of
    # goatbeat_max_interval alone may take 5.
    assert elapsed < 1.0 + 2.0, f"stop() took {elapsed:.1f}s"
    assert lease_holder(app) is None


#: What a process that embeds beat as a child process runs (as ``celery worker -B`` does): it
#: starts the child, waits for a run it sent, stops it and reports how the child ended.
_EMBEDDING = """
import sys, time
from celery import Celery, beat
from goatbeat_celery.beat.scheduler import Scheduler
from goatbeat_celery.core.types.execution import ExecutionState
from goatbeat_celery.store import open_store

app = Celery("embedding", broker="memory://", set_as_current=False)
app.conf.update(task_default_queue="embedding", goatbeat_database_url=sys.argv[1],
                goatbeat_lease_ttl=3, goatbeat_lease_renew_interval=1,
                beat_schedule={"every-second": {"task": "contract.work", "schedule": 1.0}})
embedded = beat.EmbeddedService(app, scheduler_cls=Scheduler, max_interval=0.5)
assert isinstance(embedded, beat._Process)
embedded.start()
deadline = time.monotonic() + float(sys.argv[2])
sent = False
while not sent and time.monotonic() < deadline:
    store = open_store(sys.argv[1])
    try:
        sent = any(e.state is ExecutionState.SUBMITTED
                   for e in store.executions(schedule_name="every-second"))
    finally:
        store.close()
    time.sleep(0.1)
embedded.stop()
deadline = time.monotonic() + float(sys.argv[2])
while embedded.is_alive() and time.monotonic() < deadline:
    time.sleep(0.05)
print(f"sent={sent} alive={embedded.is_alive()} exitcode={embedded.exitcode}")
"""


def test_an_embedded_process_service_sends_and_stops(tmp_path: Path) -> None:
    # In a process of its own, as a worker that embeds beat is: a pytest worker that ran
    # thousands of tests first is not what the child is forked from in use.
    database = f"sqlite:///{tmp_path / 'goatbeat.sqlite3'}"
    # The script bounds its own waits (TIMEOUT to send, TIMEOUT to stop); this bound only
    # guards against a hang, with room for its start and imports on a starved machine. In a
    # session of its own, so that a hang kills the embedded beat process too (killed alone,
    # the script left it ticking, orphaned, through the rest of the suite).
    script = subprocess.Popen([sys.executable, "-c", _EMBEDDING, database, str(TIMEOUT)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        stdout, stderr = script.communicate(timeout=6 * TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(script.pid, signal.SIGKILL)
        stdout, stderr = script.communicate()
        pytest.fail(f"the embedding script hung past {6 * TIMEOUT:.0f}s:\n{stderr[-3000:]}")
    assert script.returncode == 0, stderr[-3000:]
    sent, alive, exitcode = (part.split("=")[1] for part in stdout.split()[-3:])
    assert sent == "True", "the embedded process sent no run"
    assert alive == "False", f"the embedded beat process outlived its SIGTERM by {TIMEOUT:.0f}s"
    assert exitcode != "None"
