"""``Scheduler.schedule`` as Celery's scheduler API has it: a view of every schedule the replica
would send, and the door through which ``add``, ``update_from_dict``, ``merge_inplace`` and a
subclass's ``setup_schedule`` declare config entries that are then claimed and sent.

The checks follow what Celery's own beat tests ask of ``celery.beat.Scheduler``; a real
in-process worker (memory broker) receives what is sent, and the store is SQLite.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from celery import Celery, beat
from celery.schedules import crontab, schedule

from goatbeat_celery.api import Schedules
from goatbeat_celery.beat.scheduler import Scheduler
from goatbeat_celery.config import GoatbeatConfig
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.execution import idempotency_key
from goatbeat_celery.core.types.spec import ScheduleSource
from goatbeat_celery.store import open_store
from tests.support.waiting import wait_for

#: Every bound below waits on a 0.2 s loop (goatbeat_max_interval) and a 1 s schedule; 10 s
#: leave a busy 2-core machine several seconds for the worker's pick-up.
SENT_WITHIN = 10.0


@pytest.fixture
def celery_config(database_url: str) -> dict[str, Any]:
    return {
        "broker_url": "memory://",
        "result_backend": "cache+memory://",
        "goatbeat_database_url": database_url,
        # No test here hands over: a long lease keeps a tick slowed by a busy machine inside
        # the local deadline (ttl - renew), so the leader asserted after it still leads.
        "goatbeat_lease_ttl": 30,
        "goatbeat_lease_renew_interval": 10,
        "goatbeat_max_interval": 0.2,
        "beat_schedule": {"every-10s": {
            "task": "rec.record", "schedule": 10.0, "args": ["config"],
            "options": {"priority": 5, "goatbeat": {"misfire_policy": "latest"}}}},
    }


@pytest.fixture
def received(celery_app: Celery) -> list[str]:
    """Registers the recording task (before the worker starts); the labels it received."""
    seen: list[str] = []
    lock = threading.Lock()

    @celery_app.task(bind=True, name="rec.record")
    def record(self: Any, label: str) -> None:
        with lock:
            seen.append(f"{label}:{self.request.id}")

    return seen


def stored(database_url: str) -> dict[str, Any]:
    store = open_store(database_url)
    try:
        return {row.name: row for row in store.list_schedules()}
    finally:
        store.close()


def ticked_until(scheduler: Scheduler, received: list[str], label: str) -> list[str]:
    """Tick until the worker received a run labelled ``label``; those runs' task ids."""
    def sent() -> list[str]:
        scheduler.tick()
        return [item.split(":", 1)[1] for item in list(received)
                if item.split(":", 1)[0] == label]
    return wait_for(sent, timeout=SENT_WITHIN, what=f"a run of {label!r}")  # type: ignore[no-any-return]


def test_the_schedule_names_and_describes_what_celerys_scheduler_does(celery_app: Celery):
    ours = Scheduler(app=celery_app)
    theirs = beat.Scheduler(app=celery_app)
    try:
        assert sorted(ours.schedule) == sorted(theirs.schedule) == ["every-10s"]
        assert isinstance(ours.schedule, dict)
        entry, celerys = ours.schedule["every-10s"], theirs.schedule["every-10s"]
        assert isinstance(entry, beat.ScheduleEntry)
        assert (entry.name, entry.task, entry.args, entry.kwargs, entry.options) == (
            celerys.name, celerys.task, celerys.args, celerys.kwargs, celerys.options)
        assert entry.schedule == celerys.schedule == schedule(timedelta(seconds=10))
        assert entry.total_run_count == 0
    finally:
        ours.close()


def test_an_entry_added_before_the_first_tick_is_sent_with_its_key_as_task_id(
        celery_app: Celery, received: list[str], celery_worker: Any, database_url: str):
    scheduler = Scheduler(app=celery_app)
    try:
        entry = scheduler.add(name="added", task="rec.record", schedule=1.0, args=["added"])
        assert isinstance(entry, beat.ScheduleEntry)
        assert (entry.name, entry.task, entry.args) == ("added", "rec.record", ["added"])
        assert "added" in scheduler.schedule
        ids = ticked_until(scheduler, received, "added")
    finally:
        scheduler.close()
    row = stored(database_url)["added"]
    assert row.spec.source is ScheduleSource.CONFIG
    store = open_store(database_url)
    try:
        runs = store.executions(schedule_name="added")
    finally:
        store.close()
    assert set(ids) <= {run.key for run in runs}
    assert all(run.key == idempotency_key("added", run.occurrence_at) for run in runs)


class OwnSchedule(schedule):  # type: ignore[misc]
    """A schedule class of a user's own (not Celery's ``schedule`` itself)."""


def test_entries_declared_while_leading_are_synced_at_the_next_tick_and_sent(
        celery_app: Celery, received: list[str], celery_worker: Any):
    scheduler = Scheduler(app=celery_app)
    try:
        scheduler.tick()
        engine = scheduler.engine
        assert engine is not None and engine.is_leader()
        scheduler.update_from_dict({
            "from-dict": {"task": "rec.record", "schedule": 1.0, "args": ["from-dict"]},
            "as-entry": beat.ScheduleEntry(name="as-entry", task="rec.record",
                                           schedule=schedule(1.0), args=["as-entry"],
                                           app=celery_app)})
        scheduler.schedule["assigned"] = {"task": "rec.record", "schedule": 1.0,
                                          "args": ["assigned"]}
        # A schedule class of the user's: its trigger asks the object, which beat now knows.
        scheduler.add(name="own-class", task="rec.record", schedule=OwnSchedule(1.0),
                      args=["own-class"])
        for label in ("from-dict", "as-entry", "assigned", "own-class"):
            ticked_until(scheduler, received, label)
        assert sorted(scheduler.schedule) == [
            "as-entry", "assigned", "every-10s", "from-dict", "own-class"]
        assert isinstance(scheduler.schedule["own-class"].schedule, OwnSchedule)
    finally:
        scheduler.close()


def test_merge_inplace_keeps_only_the_entries_given_and_disables_the_others(
        celery_app: Celery, database_url: str):
    scheduler = Scheduler(app=celery_app)
    other = beat.Scheduler(app=celery_app)
    try:
        scheduler.update_from_dict({
            "foo": {"task": "rec.record", "schedule": 10.0},
            "bar": {"task": "rec.record", "schedule": 20.0}})
        other.update_from_dict({
            "bar": {"task": "rec.record", "schedule": 40.0},
            "baz": {"task": "rec.record", "schedule": crontab(minute="*/5")}})
        scheduler.tick()  # leads: what is declared is synced
        assert {name for name, row in stored(database_url).items() if row.spec.enabled} == {
            "every-10s", "foo", "bar"}
        scheduler.merge_inplace(other.schedule)  # Celery's: beat_schedule's, bar and baz
        assert sorted(scheduler.schedule) == sorted(other.schedule) == [
            "bar", "baz", "every-10s"]
        assert scheduler.schedule["bar"].schedule == schedule(timedelta(seconds=40))
        scheduler.tick()
    finally:
        scheduler.close()
    rows = stored(database_url)
    assert {name for name, row in rows.items() if row.spec.enabled} == {
        "bar", "baz", "every-10s"}
    assert not rows["foo"].spec.enabled
    assert rows["bar"].spec.trigger.params["every"] == 40.0
    assert rows["baz"].spec.trigger.kind == "cron"


def test_an_entry_deleted_from_the_schedule_is_disabled_as_a_removed_config_entry(
        celery_app: Celery, database_url: str):
    scheduler = Scheduler(app=celery_app)
    try:
        scheduler.tick()
        del scheduler.schedule["every-10s"]
        assert "every-10s" not in scheduler.schedule
        scheduler.tick()
    finally:
        scheduler.close()
    row = stored(database_url)["every-10s"]
    assert row.spec.source is ScheduleSource.CONFIG and not row.spec.enabled


def test_entries_with_problems_declare_nothing_and_every_problem_is_named(celery_app: Celery):
    scheduler = Scheduler(app=celery_app, lazy=True)
    with pytest.raises(ConfigurationError) as raised:
        scheduler.update_from_dict({
            "fine": {"task": "rec.record", "schedule": 5.0},
            "no-task": {"schedule": 5.0},
            "no-schedule": {"task": "rec.record"},
            "bad-option": {"task": "rec.record", "schedule": 5.0,
                           "options": {"goatbeat": {"misfire_policy": "sometimes"}}}})
    text = str(raised.value)
    for where in ("beat_schedule['no-task'].task",
                  "beat_schedule['no-schedule'].schedule",
                  "beat_schedule['bad-option'].options.goatbeat.misfire_policy"):
        assert where in text
    assert "fine" not in scheduler.schedule
    with pytest.raises(ConfigurationError, match="name"):
        scheduler.add(task="rec.record", schedule=5.0)
    assert sorted(scheduler.schedule) == ["every-10s"]


def test_after_a_sync_the_entries_carry_the_run_state_of_the_store(
        celery_app: Celery, received: list[str], celery_worker: Any, database_url: str):
    scheduler = Scheduler(app=celery_app)
    try:
        scheduler.add(name="counted", task="rec.record", schedule=1.0, args=["counted"])
        wait_for(lambda: len(ticked_until(scheduler, received, "counted")) >= 2,
                 timeout=SENT_WITHIN, what="two runs")
        scheduler.sync()
        entry = scheduler.schedule["counted"]
    finally:
        scheduler.close()
    row = stored(database_url)["counted"]
    assert entry.total_run_count == row.total_runs >= 2
    assert entry.last_run_at == row.last_occurrence_at


def test_api_schedules_are_listed_while_enabled(celery_app: Celery, database_url: str):
    scheduler = Scheduler(app=celery_app)
    api = Schedules(open_store(database_url), config=GoatbeatConfig(database_url=database_url))
    try:
        api.create("from-api", "rec.record", every=30, args=("api",))
        api.create("off", "rec.record", cron="0 4 * * *", enabled=False)
        api.create("taken", "rec.other", every=60)
        scheduler.add(name="taken", task="rec.record", schedule=5.0)  # left alone by sync
        scheduler.sync()
        assert scheduler.schedule["taken"].task == "rec.other"
        entry = scheduler.schedule["from-api"]
        assert (entry.task, entry.args) == ("rec.record", ("api",))
        assert entry.schedule == schedule(timedelta(seconds=30))
        assert "off" not in scheduler.schedule
        with pytest.raises(KeyError, match="API"):
            del scheduler.schedule["from-api"]
    finally:
        scheduler.close()
        api.close()


class AddingScheduler(Scheduler):
    """The usual shape of a custom scheduler: entries added in ``setup_schedule``."""

    def setup_schedule(self) -> None:
        self.add(name="before-super", task="rec.record", schedule=1.0, args=["before"])
        super().setup_schedule()
        self.update_from_dict({"after-super": {"task": "rec.record", "schedule": 1.0,
                                               "args": ["after"]}})


def test_a_subclass_adding_entries_in_setup_schedule_has_them_sent(
        celery_app: Celery, received: list[str], celery_worker: Any):
    scheduler = AddingScheduler(app=celery_app)
    try:
        assert sorted(scheduler.schedule) == ["after-super", "before-super", "every-10s"]
        ticked_until(scheduler, received, "before")
        ticked_until(scheduler, received, "after")
    finally:
        scheduler.close()


def test_setting_up_twice_keeps_the_one_engine(celery_app: Celery):
    scheduler = Scheduler(app=celery_app)
    try:
        engine = scheduler.engine
        scheduler.sync()
        scheduler.setup_schedule()
        assert scheduler.engine is engine
    finally:
        scheduler.close()


def test_every_write_to_the_schedule_declares_and_is_seen_at_once(celery_app: Celery):
    scheduler = Scheduler(app=celery_app, lazy=True)
    fields = {"task": "rec.record", "schedule": 5.0}
    scheduler.schedule = {"a": fields, "b": fields}  # Celery's set_schedule: all of them
    assert sorted(scheduler.schedule) == ["a", "b"]
    view = scheduler.schedule
    view.setdefault("c", fields)
    view.update(d=fields)
    assert sorted(view) == sorted(scheduler.schedule) == ["a", "b", "c", "d"]
    assert view.pop("a").task == "rec.record"
    assert view.pop("a", None) is None
    assert sorted(scheduler.schedule) == ["b", "c", "d"]
    with pytest.raises(ConfigurationError):
        view["e"] = {"task": "rec.record", "schedule": "now and then"}
    assert "e" not in view and "e" not in scheduler.schedule
    view.clear()
    assert scheduler.schedule == {}
