"""Celery's call graph: each claimed occurrence goes through the scheduler's ``apply_entry`` and
``apply_async`` with an entry a monitoring tool can read, and a hook's failure stays with its
message."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery, Task
from celery.beat import ScheduleEntry
from celery.schedules import BaseSchedule, crontab, schedule
from sentry_sdk.integrations.celery.beat import _get_monitor_config

from goatbeat_celery import headers
from goatbeat_celery.beat.entries import GoatbeatEntry, celery_schedule, once, zoned_crontab
from goatbeat_celery.beat.scheduler import Scheduler
from goatbeat_celery.beat.submitter import CelerySubmitter
from goatbeat_celery.core.types.claims import Dispatch
from tests.celery.support import dispatch
from tests.support.waiting import wait_for


class Watching(Scheduler):
    """A user's subclass: records each entry it is handed and adds a header of its own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.entries: list[GoatbeatEntry] = []
        super().__init__(*args, **kwargs)

    def apply_entry(self, entry: Any, producer: Any = None) -> None:
        self.entries.append(entry)
        entry.options.setdefault("headers", {})["x-watched-by"] = "subclass"
        super().apply_entry(entry, producer=producer)


@pytest.fixture
def seen(celery_app: Celery) -> list[dict[str, Any]]:
    """Registers a task (before the worker starts) that keeps its id and headers."""
    found: list[dict[str, Any]] = []
    lock = threading.Lock()

    @celery_app.task(bind=True, name="rec.record")
    def record(self: Any, label: str) -> None:
        with lock:
            found.append({"id": self.request.id, "watched": getattr(
                self.request, "x-watched-by", None) or (self.request.headers or {}).get(
                "x-watched-by"), "schedule": getattr(self.request, "goatbeat_schedule", None)})

    return found


def test_a_subclass_apply_entry_sees_each_run_once_on_the_leader_only(
        celery_app: Celery, seen: list[dict[str, Any]], celery_worker: Any):
    leader = Watching(app=celery_app)
    leader.tick()
    standby = Watching(app=celery_app)
    try:
        def two_runs() -> tuple[GoatbeatEntry, GoatbeatEntry] | None:
            leader.tick()
            standby.tick()
            return first_sends_in_a_row(leader.entries) if len(seen) >= 2 else None
        # A stalled machine can leave a claim unsent past the lease's local deadline: its
        # message goes on the next send (attempt 2), counted as the store reads it then.
        pair = wait_for(two_runs, timeout=20,
                        what="two runs of the interval schedule sent in a row")
        assert pair is not None
        first, then = pair
    finally:
        standby.close()
        leader.close()
    assert standby.entries == []
    keys = [entry.key for entry in leader.entries]
    assert len(keys) == len(set(keys)), "each run handed over once"
    assert {record["id"] for record in seen} <= set(keys)
    # What the subclass added to entry.options reached the message, beside goatbeat's headers.
    assert all(record["watched"] == "subclass" for record in seen)
    assert all(record["schedule"] == "every-second" for record in seen)
    entry = leader.entries[0]
    assert isinstance(entry, ScheduleEntry)
    assert (entry.name, entry.task, entry.args, entry.kwargs) == (
        "every-second", "rec.record", ["tick"], {})
    assert entry.options["priority"] == 5
    assert entry.options["headers"]["goatbeat_schedule"] == "every-second"
    assert entry.schedule == schedule(1.0) and isinstance(entry.schedule, schedule)
    assert entry.last_run_at == entry.occurrence_at
    assert entry.key == f"every-second:{entry.occurrence_at.isoformat()}"
    assert then.total_run_count == first.total_run_count + 1


def first_sends_in_a_row(entries: list[GoatbeatEntry]
                         ) -> tuple[GoatbeatEntry, GoatbeatEntry] | None:
    """Two entries handed over one after the other, each on its first send."""
    for one, other in zip(entries, entries[1:], strict=False):
        if all(entry.options["headers"][headers.SEND] == 1 for entry in (one, other)):
            return one, other
    return None


class Hooked(Scheduler):
    """Hooks that fail on some entries: one raises, one returns without sending."""

    def apply_entry(self, entry: Any, producer: Any = None) -> None:
        if entry.name == "raises":
            raise RuntimeError("the monitor is down")
        if entry.name == "swallows":
            return
        super().apply_entry(entry, producer=producer)


@pytest.fixture
def hooked(broker: tuple[Celery, redis.Redis, str],
           tmp_path: Path) -> Hooked:
    app = broker[0]
    app.conf.goatbeat_database_url = f"sqlite:///{tmp_path / 'never-opened.sqlite3'}"
    return Hooked(app=app, lazy=True)


def test_a_hook_that_raises_or_sends_nothing_fails_its_message_alone(
        broker: tuple[Celery, redis.Redis, str], hooked: Hooked):
    app, client, queue = broker
    good = [dispatch(f"good-{index}") for index in range(3)]
    raises, swallows = dispatch("raises"), dispatch("swallows")
    submitter = CelerySubmitter(app, scheduler=hooked)

    result = submitter.submit([raises, good[0], swallows, *good[1:]], token=1, timeout=5.0)

    assert result.accepted == [d.key for d in good]
    assert result.failed == {}
    assert result.rejected == {
        raises.key: "apply_entry raised RuntimeError: the monitor is down",
        swallows.key: "apply_entry returned without calling apply_async: the run was not sent",
    }
    assert client.llen(queue) == len(good)
    ids = {json.loads(raw)["headers"]["id"] for raw in client.lrange(queue, 0, -1)}
    assert ids == {d.key for d in good}


def test_the_broker_failing_under_apply_entry_still_stops_the_batch(
        broker: tuple[Celery, redis.Redis, str], hooked: Hooked):
    """Celery's apply_entry logs and swallows a publish error; the submitter still sees it, and
    a broker error leaves the batch waiting for the next try, as before."""
    app = broker[0]

    class Unreachable(Task):  # type: ignore[misc]
        def apply_async(self, *args: Any, **options: Any) -> Any:
            raise ConnectionRefusedError("the broker went away")

    @app.task(base=Unreachable, name="app.unreachable", shared=False)
    def unreachable() -> None:  # pragma: no cover - never run here
        pass

    first = dispatch("first")
    down = dispatch("down")
    down = Dispatch(execution=down.execution, task="app.unreachable", args=(), kwargs={},
                    options={})
    after = dispatch("after")

    result = CelerySubmitter(app, scheduler=hooked).submit([first, down, after], token=1,
                                                           timeout=5.0)

    # The first message went alone in the batch's first flush, before the outage; the rest
    # wait for the next try.
    assert result.accepted == [first.key]
    assert set(result.failed) == {down.key, after.key}
    assert "ConnectionRefusedError: the broker went away" in result.failed[down.key]
    assert result.rejected == {}


def test_an_entry_is_sent_with_what_hooks_left_in_its_options_and_goatbeat_headers_kept(
        broker: tuple[Celery, redis.Redis, str], tmp_path: Path):
    app, client, queue = broker
    app.conf.goatbeat_database_url = f"sqlite:///{tmp_path / 'never-opened.sqlite3'}"

    class Rewriting(Scheduler):
        def apply_entry(self, entry: Any, producer: Any = None) -> None:
            # As Sentry does: pop the headers, add its own, put them back; and a priority.
            headers = entry.options.pop("headers", {})
            headers.update({"sentry-monitor-slug": entry.name, "goatbeat_token": "forged"})
            entry.options["headers"] = headers
            entry.options["expires"] = 3600
            super().apply_entry(entry, producer=producer)

    one = dispatch("rewritten", {"headers": {"mine": 1}})
    result = CelerySubmitter(app, scheduler=Rewriting(app=app, lazy=True)).submit(
        [one], token=4, timeout=5.0)

    assert result.accepted == [one.key]
    [raw] = client.lrange(queue, 0, -1)
    message = json.loads(raw)
    headers = message["headers"]
    assert headers["id"] == one.key
    assert headers["sentry-monitor-slug"] == "rewritten" and headers["mine"] == 1
    assert headers["goatbeat_token"] == 4, "goatbeat's own headers are its own"
    assert headers["expires"] is not None


def test_a_config_crontab_keeps_its_fields_and_gains_its_zone(celery_app: Celery):
    configured = crontab(minute="*/15", hour="8-18", day_of_week="mon-fri")
    made = celery_schedule({"kind": "cron", "expression": "*/15 8-18 * * mon-fri",
                            "timezone": "Europe/Paris", "day_or": False}, celery_app, configured)
    assert isinstance(made, crontab)
    assert (made._orig_minute, made._orig_hour, made._orig_day_of_week) == (
        "*/15", "8-18", "mon-fri")
    assert str(made.tz) == "Europe/Paris"
    assert _get_monitor_config(made, celery_app, "job") == {
        "schedule": {"type": "crontab", "value": "*/15 8-18 * * mon-fri"},
        "timezone": "Europe/Paris"}


def test_an_api_cron_becomes_a_crontab_in_its_zone(celery_app: Celery):
    made = celery_schedule({"kind": "cron", "expression": "30 2 * * 1-5",
                            "timezone": "America/New_York"}, celery_app)
    assert isinstance(made, zoned_crontab)
    assert _get_monitor_config(made, celery_app, "job") == {
        "schedule": {"type": "crontab", "value": "30 2 * * 1-5"},
        "timezone": "America/New_York"}
    # Evaluated in its zone, as goatbeat runs it: it survives a pickle round trip too.
    assert pickle.loads(pickle.dumps(made)) == made
    assert str(pickle.loads(pickle.dumps(made)).tz) == "America/New_York"
    macro = celery_schedule({"kind": "cron", "expression": "@hourly"}, celery_app)
    assert (macro._orig_minute, macro._orig_hour, str(macro.tz)) == ("0", "*", "UTC")


def test_an_interval_becomes_a_schedule_and_an_instant_a_once(celery_app: Celery):
    made = celery_schedule({"kind": "interval", "every": 300.0}, celery_app)
    assert type(made) is schedule and made.seconds == 300
    assert _get_monitor_config(made, celery_app, "job") == {
        "schedule": {"type": "interval", "value": 5, "unit": "minute"}, "timezone": "UTC"}
    at = celery_schedule({"kind": "once", "at": "2030-01-01T00:00:00+00:00"}, celery_app)
    assert isinstance(at, once) and at.is_due(at.at)[0] is False
    passed = celery_schedule({"kind": "once", "at": "2020-01-01T00:00:00+00:00"}, celery_app)
    assert passed.is_due(passed.at)[0] is True
    assert pickle.loads(pickle.dumps(passed)).at == passed.at


def test_a_config_schedule_of_its_own_class_is_handed_over_as_given(celery_app: Celery):
    class Weekdays(BaseSchedule):  # type: ignore[misc]
        """A user's own schedule class."""

    sun = Weekdays()
    assert celery_schedule({"kind": "celery", "entry": "sun", "repr": repr(sun)}, celery_app,
                           sun) is sun


def test_a_schedule_edited_by_hand_hands_over_an_entry_without_a_schedule(celery_app: Celery):
    submitter = CelerySubmitter(celery_app)
    assert submitter.schedules.get("broken", {"kind": "cron", "expression": "not cron"}) is None
    assert submitter.schedules.get("none", None) is None


def test_a_hook_that_raises_after_the_send_leaves_the_run_sent_once(
        broker: tuple[Celery, redis.Redis, str], tmp_path: Path,
        caplog: pytest.LogCaptureFixture):
    app, client, queue = broker
    app.conf.goatbeat_database_url = f"sqlite:///{tmp_path / 'never-opened.sqlite3'}"

    class RaisingAfter(Scheduler):
        def apply_entry(self, entry: Any, producer: Any = None) -> None:
            entry.options["task_id"] = "a hook's own id"
            super().apply_entry(entry, producer=producer)
            raise RuntimeError("the monitor is down")

    one = dispatch("after-send")
    with caplog.at_level("WARNING", logger="goatbeat_celery.beat.submitter"):
        result = CelerySubmitter(app, scheduler=RaisingAfter(app=app, lazy=True)).submit(
            [one], token=1, timeout=5.0)

    # The broker took it: marked sent, not sent again under a failure.
    assert result.accepted == [one.key] and result.rejected == {} and result.failed == {}
    [raw] = client.lrange(queue, 0, -1)
    assert json.loads(raw)["headers"]["id"] == one.key, "the key stays the task id"
    [warning] = [r for r in caplog.records if getattr(r, "action", None) == "hook_failed"]
    assert "the monitor is down" in warning.getMessage()


def test_without_opentelemetry_beat_opens_no_span_and_sends_as_before():
    # In a process of its own, where importing opentelemetry fails as if it were not installed.
    code = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None\n"
        "from celery import Celery\n"
        "from goatbeat_celery.beat import tracing\n"
        "from goatbeat_celery.beat.submitter import CelerySubmitter\n"
        "from tests.celery.support import dispatch\n"
        "assert not tracing.available()\n"
        "app = Celery('plain', broker='memory://', set_as_current=False)\n"
        "one = dispatch('plain')\n"
        "result = CelerySubmitter(app).submit([one], token=1, timeout=5.0)\n"
        "assert result.accepted == [one.key], result\n"
        "print('sent without opentelemetry')\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                          text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert done.stdout.strip() == "sent without opentelemetry", done.stderr[-2000:]
