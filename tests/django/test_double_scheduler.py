"""The leading beat notices django-celery-beat's DatabaseScheduler sending what goatbeat sends:
a real DatabaseScheduler runs beside a goatbeat leader on the same database, and the leader's
watch (goatbeat_celery.django_handover.HandoverWatch) logs a WARNING, rate-limited, until it
stops."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.django_handover import WARN_EVERY, HandoverWatch
from tests.django.support import import_tasks_ok
from tests.support.waiting import wait_for

LOGGER = "goatbeat_celery.django_handover"


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def both_enabled(api: Schedules) -> Iterator[None]:
    """``ping`` enabled in django-celery-beat (every second) and, imported, in goatbeat; its
    lease held by goatbeat's leader."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    PeriodicTask.objects.all().delete()
    every = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.SECONDS)[0]
    PeriodicTask.objects.create(name="ping", task="shop.ping", interval=every,
                                last_run_at=datetime.now(timezone.utc) - timedelta(minutes=5))
    import_tasks_ok()
    assert api.get("ping").spec.enabled
    assert api.store.acquire("default", "leader", timedelta(seconds=30)) is not None  # type: ignore[attr-defined]
    yield
    PeriodicTask.objects.all().delete()


def run_database_scheduler() -> None:
    """django-celery-beat's own DatabaseScheduler, as its beat runs it: one tick sends the due
    task, and its sync writes the task's last run."""
    from django_celery_beat.models import PeriodicTask
    from django_celery_beat.schedulers import DatabaseScheduler

    from tests.django.testproj.celery import app

    before = PeriodicTask.objects.get(name="ping").last_run_at
    scheduler = DatabaseScheduler(app=app)
    try:
        scheduler.tick()
        scheduler.sync()
    finally:
        scheduler.close()
    assert PeriodicTask.objects.get(name="ping").last_run_at != before, "nothing was sent"


def wait_for_warning(caplog: pytest.LogCaptureFixture) -> None:
    """Until the watch's thread has warned: it looks every 0.05 s in these tests, and 10 s
    covers a busy 2-core machine many times over."""
    wait_for(lambda: warnings_of(caplog), "the watch's warning", timeout=10)


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.name == LOGGER and record.levelno == logging.WARNING]


def test_the_leader_warns_while_django_celery_beat_sends_what_it_sends(
        api: Schedules, both_enabled: None, django_db: str,
        caplog: pytest.LogCaptureFixture) -> None:
    from django_celery_beat.models import PeriodicTask

    caplog.set_level(logging.INFO, logger=LOGGER)
    clock = Clock()
    watch = HandoverWatch(django_db, api.store, "default",  # type: ignore[arg-type]
                          leading=lambda: True, monotonic=clock)
    try:
        # Enabled in both, but django-celery-beat's beat has not run since goatbeat leads.
        found = watch.look()
        assert found is None or found.error() is None
        assert warnings_of(caplog) == []

        run_database_scheduler()
        found = watch.look()
        assert found is not None and [t.name for t in found.ran_since] == ["ping"]
        [warning] = warnings_of(caplog)
        assert ("django-celery-beat ran 1 periodic task after goatbeat's beat took its lease"
                in warning)
        assert "'ping'" in warning and "each of them is sent twice" in warning
        assert ("stop every beat started with django_celery_beat.schedulers:DatabaseScheduler, "
                "then disable the tasks") in warning
        [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert getattr(record, "action", None) == "double_scheduler"

        # Rate-limited: said again only after WARN_EVERY while it lasts.
        watch.look()
        assert len(warnings_of(caplog)) == 1
        clock.now += WARN_EVERY
        watch.look()
        assert len(warnings_of(caplog)) == 2

        # Fixed as the warning says (the task disabled in django-celery-beat): said once.
        PeriodicTask.objects.filter(name="ping").update(enabled=False)
        assert watch.look() is None
        assert any(r.getMessage().endswith("no longer sends what goatbeat sends")
                   for r in caplog.records if r.levelno == logging.INFO)
        assert len(warnings_of(caplog)) == 2
    finally:
        watch.close()


def test_the_watch_looks_in_its_own_thread_only_while_leading(
        api: Schedules, both_enabled: None, django_db: str,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    run_database_scheduler()
    leading = threading.Event()
    looked = threading.Event()

    def is_leading() -> bool:
        looked.set()
        return leading.is_set()

    watch = HandoverWatch(django_db, api.store, "default",  # type: ignore[arg-type]
                          leading=is_leading, every=0.05)
    watch.start()
    try:
        # A standby looks at nothing.
        assert looked.wait(timeout=10)
        assert warnings_of(caplog) == []
        leading.set()
        wait_for_warning(caplog)
    finally:
        watch.close()
    assert len(warnings_of(caplog)) == 1


def test_a_database_without_django_celery_beats_table_is_looked_at_ten_times_less_often(
        api: Schedules, both_enabled: None, django_db: str, tmp_path: Path) -> None:
    from goatbeat_celery.store import open_store

    url = f"sqlite:///{tmp_path / 'goatbeat.db'}"  # goatbeat's tables, none of django's
    store = open_store(url)
    assert store.acquire("default", "leader", timedelta(seconds=30)) is not None
    without = HandoverWatch(url, store, "default", leading=lambda: True, every=60,  # type: ignore[arg-type]
                            absent_every=600)
    beside = HandoverWatch(django_db, api.store, "default", leading=lambda: True,  # type: ignore[arg-type]
                           every=60, absent_every=600)
    try:
        without.look()
        beside.look()  # the table is there, and nothing ran since the lease was taken
        assert (without.table_absent, without.next_look_in()) == (True, 600)
        assert (beside.table_absent, beside.next_look_in()) == (False, 60)
    finally:
        without.close()
        beside.close()
        store.close()


def test_a_beat_on_the_memory_store_starts_no_watch(api: Schedules) -> None:
    from goatbeat_celery.django_handover import start_watch

    assert start_watch("memory://", api.store, "default", leading=lambda: True) is None  # type: ignore[arg-type]


def test_goatbeats_beat_runs_the_watch_while_it_leads(
        api: Schedules, both_enabled: None, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    from goatbeat_celery import django_handover
    from goatbeat_celery.beat.scheduler import Scheduler
    from tests.django.testproj.celery import app

    caplog.set_level(logging.WARNING, logger=LOGGER)
    monkeypatch.setattr(django_handover, "WATCH_EVERY", 0.05)
    assert api.store.release(api.store.acquire(  # type: ignore[attr-defined]
        "default", "leader", timedelta(seconds=30)))  # the fixture's leader steps down
    scheduler = Scheduler(app=app)
    try:
        scheduler.tick_waits = False
        scheduler.tick()  # takes the lease
        assert scheduler.engine is not None and scheduler.engine.is_leader()
        run_database_scheduler()
        wait_for_warning(caplog)
    finally:
        scheduler.close()
    assert "'ping'" in warnings_of(caplog)[0]


def test_a_look_that_fails_is_said_once_and_tried_again(
        api: Schedules, both_enabled: None, django_db: str,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    looks = threading.Semaphore(0)

    def leading() -> bool:
        looks.release()
        return True

    # A database that is not there: each look fails, as one whose role cannot read the table.
    gone = django_db.rsplit("/", 1)[0] + "/goatbeat_no_such_database"
    watch = HandoverWatch(gone, api.store, "default",  # type: ignore[arg-type]
                          leading=leading, every=0.02, monotonic=Clock())
    watch.start()
    try:
        for _ in range(5):  # the fifth look begins after four have failed
            assert looks.acquire(timeout=10)
    finally:
        watch.close()
    [warning] = warnings_of(caplog)
    assert warning.startswith("goatbeat: cannot look for django-celery-beat's scheduler: ")
