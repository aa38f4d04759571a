"""``manage.py goatbeat_import_django_celery_beat`` against periodic tasks stored through
django-celery-beat's own models on PostgreSQL."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest

from goatbeat_celery import ScheduleNotFound
from goatbeat_celery.api import Schedules

LATER = datetime.now(timezone.utc) + timedelta(days=30)
#: Off the 15-minute grid, as a start_time set by hand usually is.
START = LATER.replace(minute=7, second=30, microsecond=0) + timedelta(days=1)


@pytest.fixture(scope="module")
def periodic_tasks(django_db: str) -> None:
    from django_celery_beat.models import (
        ClockedSchedule,
        CrontabSchedule,
        IntervalSchedule,
        PeriodicTask,
        SolarSchedule,
    )

    every_15 = IntervalSchedule.objects.create(every=15, period=IntervalSchedule.MINUTES)
    PeriodicTask.objects.create(name="refresh-cache", task="proj.refresh", interval=every_15,
                                args='["all"]', queue="cache", priority=5,
                                exchange="tasks", routing_key="cache.refresh",
                                headers='{"tenant": "acme"}', description="warms the cache")
    payday = CrontabSchedule.objects.create(minute="0", hour="9", day_of_month="1",
                                            day_of_week="fri", timezone="Europe/Paris")
    PeriodicTask.objects.create(name="first-friday", task="pay.run", crontab=payday,
                                kwargs='{"limit": 50}', expire_seconds=3600)
    launch = ClockedSchedule.objects.create(clocked_time=LATER)
    PeriodicTask.objects.create(name="launch", task="shop.open_sales", clocked=launch,
                                one_off=True)
    PeriodicTask.objects.create(name="once-soon", task="shop.ping", interval=every_15,
                                one_off=True)
    dawn = SolarSchedule.objects.create(event="sunrise", latitude=48.85, longitude=2.35)
    PeriodicTask.objects.create(name="lights-off", task="garden.lights_off", solar=dawn)
    PeriodicTask.objects.create(name="paused-sync", task="shop.sync", interval=every_15,
                                enabled=False)
    PeriodicTask.objects.create(name="bad-args", task="shop.sync", interval=every_15,
                                args="not json")
    PeriodicTask.objects.create(name="ends", task="shop.sync", interval=every_15,
                                expires=LATER)
    PeriodicTask.objects.create(name="ended", task="shop.sync", interval=every_15,
                                expires=datetime.now(timezone.utc) - timedelta(days=1))
    PeriodicTask.objects.create(name="starts-later", task="shop.sync", interval=every_15,
                                start_time=START)
    # One-offs with a start_time: django-celery-beat runs them at it, whatever their schedule.
    PeriodicTask.objects.create(name="once-from", task="shop.ping", interval=every_15,
                                one_off=True, start_time=START)
    PeriodicTask.objects.create(name="once-cron-from", task="pay.run", crontab=payday,
                                one_off=True, start_time=START)
    PeriodicTask.objects.create(name="ran-once", task="shop.ping", interval=every_15,
                                one_off=True, total_run_count=1,
                                last_run_at=datetime.now(timezone.utc) - timedelta(hours=1))
    PeriodicTask.objects.create(name="payday-from", task="pay.run", crontab=payday,
                                start_time=START)
    PeriodicTask.objects.create(name="celery.backend_cleanup", task="celery.backend_cleanup",
                                crontab=CrontabSchedule.objects.create(minute="0", hour="4"))
    # Both set: its save() refuses it, but an update() (or an older version) stores it, and
    # its scheduler then sends `expires`.
    PeriodicTask.objects.create(name="both-expiries", task="shop.sync", interval=every_15,
                                expires=LATER)
    PeriodicTask.objects.filter(name="both-expiries").update(expire_seconds=60)
    # Names as Celery's crontab reads them, by their first three letters, in any case.
    named = CrontabSchedule.objects.create(minute="30", hour="7", day_of_week="Monday-friday",
                                           month_of_year="january,Jul", timezone="UTC")
    PeriodicTask.objects.create(name="named-days", task="mail.digest", crontab=named)


@pytest.fixture
def api(api: Schedules, periodic_tasks: None) -> Schedules:
    """The API on the module's database, goatbeat's schedules emptied first (conftest's
    fixture): each test imports from scratch."""
    return api


def run(*args: str) -> str:
    """The command's output; CommandError (exit status 1) is expected when it refuses
    anything, as every run of this module's tasks does."""
    from django.core.management import CommandError, call_command

    out = io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("goatbeat_import_django_celery_beat", *args, stdout=out, no_color=True)
    assert str(caught.value) == "2 periodic tasks were refused: 'bad-args', 'lights-off'"
    return out.getvalue()


def test_a_dry_run_reports_every_task_and_writes_nothing(api: Schedules) -> None:
    output = run("--dry-run")
    assert "would create 'refresh-cache'" in output
    assert "refused 'lights-off': solar schedule (sunrise at 48.85, 2.35)" in output
    assert ("'refresh-cache': every 0:15:00, options {\"exchange\": \"tasks\", "
            "\"headers\": {\"tenant\": \"acme\"}, \"priority\": 5, \"queue\": \"cache\", "
            "\"routing_key\": \"cache.refresh\"}, with its description") in output
    assert "refused 'bad-args': args" in output
    assert (f"would create 'ends': every 0:15:00, until {LATER.isoformat(timespec='seconds')}"
            in output)
    assert (f"would create 'starts-later': every 0:15:00, from "
            f"{START.isoformat(timespec='seconds')}") in output
    assert "skipped 'celery.backend_cleanup'" in output
    # A one-off that already ran has nothing left to run: skipped, not an error.
    assert ("skipped 'ran-once': a one-off whose time has passed (django-celery-beat ran it): "
            "nothing left to run") in output
    assert re.search(r"would create 'ended': every 0:15:00, until \S+, already past: it will "
                     "not run", output), output
    assert "13 would be created, 2 skipped, 2 refused (dry run: nothing written)" in output
    assert api.list() == []


def test_the_import_copies_what_maps_and_names_what_it_refuses(api: Schedules) -> None:
    from django_celery_beat.models import PeriodicTask

    output = run()
    assert "13 created, 2 skipped, 2 refused" in output, output

    refresh = api.get("refresh-cache").spec
    assert refresh.trigger.params["every"] == 900.0
    assert refresh.args == ("all",)
    assert refresh.description == "warms the cache"
    # django-celery-beat's scheduler adds periodic_task_name to every message's headers.
    assert dict(refresh.options) == {"queue": "cache", "priority": 5, "exchange": "tasks",
                                     "routing_key": "cache.refresh",
                                     "headers": {"tenant": "acme",
                                                 "periodic_task_name": "refresh-cache"}}

    payday = api.get("first-friday").spec
    assert payday.trigger.kind == "cron"
    assert payday.trigger.params["expression"] == "0 9 1 * fri"
    assert payday.trigger.params["timezone"] == "Europe/Paris"
    assert payday.trigger.params["day_or"] is False  # Celery's AND of the two day fields
    assert dict(payday.kwargs) == {"limit": 50}
    assert dict(payday.options) == {"expires": 3600,
                                    "headers": {"periodic_task_name": "first-friday"}}

    launch = api.get("launch").spec
    assert launch.trigger.kind == "once"
    assert datetime.fromisoformat(str(launch.trigger.params["at"])) == LATER

    soon = api.get("once-soon")
    # A one-off interval that never ran runs once, the interval after its last change.
    assert soon.spec.trigger.kind == "once"
    assert soon.next_occurrence_at is not None
    changed = PeriodicTask.objects.get(name="once-soon").date_changed
    assert soon.next_occurrence_at == changed + timedelta(minutes=15)
    for name in ("once-from", "once-cron-from"):
        once = api.get(name).spec.trigger
        assert datetime.fromisoformat(str(once.params["at"])) == START, name

    assert api.get("paused-sync").spec.enabled is False

    # An absolute expires is the schedule's end: django-celery-beat sends nothing after it.
    ends = api.get("ends")
    assert ends.spec.end_at == LATER
    assert ends.next_run_at is not None and ends.next_run_at <= LATER
    assert api.get("ended").next_run_at is None
    # With both, django-celery-beat sends the absolute expires and ignores expire_seconds.
    both = api.get("both-expiries").spec
    assert both.end_at == LATER
    assert "expires" not in both.options

    named = api.get("named-days").spec.trigger.params
    assert named["expression"] == "30 7 * jan,jul mon-fri"

    # A start_time to come: nothing before it, and an interval's first run at it, as
    # django-celery-beat runs it, every 15 minutes from there.
    starts = api.get("starts-later")
    assert starts.spec.start_at == START
    assert starts.next_run_at == START
    assert api.next_runs("starts-later", 2)[1] == START + timedelta(minutes=15)
    payday_from = api.get("payday-from")
    assert payday_from.spec.start_at == START
    assert payday_from.spec.offset is None
    assert payday_from.next_run_at is not None and payday_from.next_run_at >= START

    for name in ("lights-off", "bad-args", "ran-once", "celery.backend_cleanup"):
        with pytest.raises(ScheduleNotFound):
            api.get(name)


def test_running_it_again_skips_what_it_copied(api: Schedules) -> None:
    assert "13 created, 2 skipped, 2 refused" in run()
    output = run()
    assert "0 created, 15 skipped, 2 refused" in output, output
    assert "skipped 'refresh-cache': a schedule of that name is already in goatbeat" in output


def test_entries_of_beat_schedule_are_left_to_the_config_sync(api: Schedules) -> None:
    """django-celery-beat's scheduler stores beat_schedule's entries as periodic tasks; copied,
    they would stand in the way of goatbeat's config schedules of the same names."""
    from django.test import override_settings
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    every_15 = IntervalSchedule.objects.get(every=15, period=IntervalSchedule.MINUTES)
    PeriodicTask.objects.create(name="from-config", task="proj.heartbeat", interval=every_15)
    beat_schedule = {"from-config": {"task": "proj.heartbeat", "schedule": 900}}
    try:
        with override_settings(CELERY_BEAT_SCHEDULE=beat_schedule):
            output = run()
        assert ("skipped 'from-config': an entry of beat_schedule, which goatbeat's beat "
                "syncs from the config itself") in output, output
        with pytest.raises(ScheduleNotFound):
            api.get("from-config")
    finally:
        PeriodicTask.objects.filter(name="from-config").delete()


def test_without_refusals_the_command_succeeds(api: Schedules) -> None:
    """Exit status 0 (no CommandError) once nothing is refused; the tasks it refused are
    deleted inside a transaction rolled back afterwards, for the other tests."""
    from django.core.management import call_command
    from django.db import transaction
    from django_celery_beat.models import PeriodicTask

    out = io.StringIO()
    with transaction.atomic():
        refused = ["bad-args", "lights-off"]
        PeriodicTask.objects.filter(name__in=refused).delete()
        call_command("goatbeat_import_django_celery_beat", stdout=out, no_color=True)
        transaction.set_rollback(True)
    assert "13 created, 2 skipped, 0 refused" in out.getvalue()
    assert PeriodicTask.objects.filter(name__in=refused).count() == 2


#: Crontabs restricting both day fields, which Celery matches together (AND): the 13th when a
#: Friday; the first Sunday of a month; an even day of a weekend in spring; named days.
AND_CRONTABS = [
    ("0", "12", "13", "*", "fri", "Europe/Paris"),
    ("30", "8", "1-7", "*", "sun", "America/New_York"),
    ("15", "6,18", "*/2", "3-5", "saturday,Sunday", "UTC"),
    ("0", "9", "10-20", "*", "mon-wednesday", "Asia/Tokyo"),
]


def test_imported_crontabs_run_when_django_celery_beats_crontab_runs(api: Schedules) -> None:
    """The next occurrences of each imported crontab, by goatbeat's cron, are those Celery's
    crontab from django-celery-beat's own CrontabSchedule.schedule gives."""
    from django_celery_beat.models import CrontabSchedule, PeriodicTask

    from goatbeat_celery import config as config_module

    names = [f"and-{index}" for index in range(len(AND_CRONTABS))]
    tabs = {}
    for name, (minute, hour, day_of_month, month, day_of_week, zone) in zip(
            names, AND_CRONTABS, strict=True):
        tabs[name] = CrontabSchedule.objects.create(
            minute=minute, hour=hour, day_of_month=day_of_month, month_of_year=month,
            day_of_week=day_of_week, timezone=zone)
        PeriodicTask.objects.create(name=name, task="pay.run", crontab=tabs[name])
    try:
        run()
        start = datetime(2026, 1, 1, tzinfo=timezone.utc)
        for name in names:
            trigger = config_module.base_registry().build(api.get(name).spec.trigger)
            celery = tabs[name].schedule
            ours, theirs = [], []
            after_ours = after_theirs = start
            for _ in range(6):
                found = trigger.next_after(after_ours)
                assert found is not None, name
                ours.append(found)
                after_ours = found
                last, delta, _now = celery.remaining_delta(after_theirs, tz=celery.tz)
                after_theirs = last + delta
                theirs.append(after_theirs.astimezone(timezone.utc))
            assert ours == theirs, (name, tabs[name])
    finally:
        PeriodicTask.objects.filter(name__in=names).delete()


#: Rows django-celery-beat's admin would not let through, but a hand edit, a script or an older
#: version stores; the reason each is refused with.
BAD_ROWS = {
    "fortnightly": "interval period 'fortnights' is not one of days, hours, minutes, seconds, "
                   "microseconds",
    "forever-ends": "cannot be read: DataError: ",
    "huge-interval": "an interval of 2147483647 days is longer than a Python timedelta holds "
                     "(999999999 days)",
    "on-mars": "timezone: unknown zone 'Mars/Olympus'",
    "too-urgent": "options.priority: expected an integer from 0 to 255, got 300",
}


@pytest.fixture
def bad_rows(api: Schedules) -> Iterator[None]:
    """The rows of BAD_ROWS, beside the module's tasks, deleted afterwards."""
    from django.db import connection
    from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

    # The largest number the column holds (a 32-bit integer on PostgreSQL).
    huge = IntervalSchedule.objects.create(every=2**31 - 1, period=IntervalSchedule.DAYS)
    PeriodicTask.objects.create(name="huge-interval", task="shop.sync", interval=huge)
    odd = IntervalSchedule.objects.create(every=2, period=IntervalSchedule.DAYS)
    IntervalSchedule.objects.filter(pk=odd.pk).update(period="fortnights")
    PeriodicTask.objects.create(name="fortnightly", task="shop.sync", interval=odd)
    mars = CrontabSchedule.objects.create(minute="0", hour="6", timezone="UTC")
    PeriodicTask.objects.create(name="on-mars", task="rover.wake", crontab=mars)
    every_15 = IntervalSchedule.objects.get(every=15, period=IntervalSchedule.MINUTES)
    PeriodicTask.objects.create(name="too-urgent", task="shop.sync", interval=every_15,
                                priority=300)
    PeriodicTask.objects.create(name="forever-ends", task="shop.sync", interval=every_15)
    PeriodicTask.objects.create(name="bell-queue", task="shop.sync", interval=every_15,
                                queue="cache\x07\x1b[2J")
    with connection.cursor() as cursor:
        # What the model's fields refuse to write, and raise on when they read it.
        cursor.execute("UPDATE django_celery_beat_crontabschedule SET timezone = %s "
                       "WHERE id = %s", ["Mars/Olympus", mars.pk])
        cursor.execute("UPDATE django_celery_beat_periodictask SET expires = 'infinity' "
                       "WHERE name = 'forever-ends'")
    try:
        yield
    finally:
        bad = PeriodicTask.objects.filter(name__in=[*BAD_ROWS, "bell-queue"])
        bad.update(expires=None)  # deleting reads the rows first
        bad.delete()
        for schedule in (huge, odd, mars):
            schedule.delete()


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "import"])
def test_a_bad_row_is_refused_with_its_reason_and_the_others_are_copied(
        api: Schedules, bad_rows: None, dry_run: bool) -> None:
    from django.core.management import CommandError, call_command

    out = io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("goatbeat_import_django_celery_beat", *(["--dry-run"] if dry_run else []),
                     stdout=out, no_color=True)
    output = out.getvalue()

    refused = sorted(["bad-args", "lights-off", *BAD_ROWS])
    # A queue with a control character is refused by goatbeat's validation, naming it, and
    # the import goes on.
    bell = [line for line in output.splitlines() if line.startswith("refused 'bell-queue'")]
    assert len(bell) == 1 and "queue" in bell[0], output
    refused = sorted([*refused, "bell-queue"])
    created = 13
    assert str(caught.value) == (f"{len(refused)} periodic tasks were refused: "
                                 + ", ".join(repr(name) for name in refused))
    done = "would be created" if dry_run else "created"
    summary = output[output.index(f"{created} {done}, 2 skipped, {len(refused)} refused"):]
    summary_lines = summary.splitlines()[1:]
    assert [line.split("'")[1] for line in summary_lines] == refused, summary
    for name, reason in BAD_ROWS.items():
        line = f"refused {name!r}: {reason}"
        assert f"{line}" in output, output
        assert any(entry.startswith(f"  {line}") for entry in summary_lines), summary
    assert "infinity" in next(line for line in summary_lines if "'forever-ends'" in line)
    names = {schedule.name for schedule in api.list()}
    if dry_run:
        assert names == set()
    else:
        assert "refresh-cache" in names and "first-friday" in names
        assert not names & set(refused)
