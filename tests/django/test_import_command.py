"""``manage.py goatbeat_import_django_celery_beat`` against periodic tasks stored through
django-celery-beat's own models on PostgreSQL."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest

from goatbeat_celery import ScheduleNotFound
from goatbeat_celery.api import Schedules
from goatbeat_celery.display import when

from .support import celery_beat_runs

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
    assert str(caught.value) == "1 periodic task was refused: 'bad-args'"
    return out.getvalue()


def test_a_dry_run_reports_every_task_and_writes_nothing(api: Schedules) -> None:
    output = run("--dry-run")
    assert "would create 'refresh-cache'" in output
    assert "would create 'lights-off': solar sunrise at 48.85°N 2.35°E" in output, output
    assert re.search(r"'refresh-cache': every 15m, phase kept from its last change at \S+ "
                     r"\(it never ran\), options \{\"exchange\": \"tasks\", \"headers\": "
                     r"\{\"tenant\": \"acme\"\}, \"priority\": 5, \"queue\": \"cache\", "
                     r"\"routing_key\": \"cache.refresh\"\}, with its description, next run \S+Z"
                     r"( \(task id '[^']+': the grid point \S+ before it\))?$",
                     output, re.MULTILINE), output
    assert "refused 'bad-args': args" in output
    assert re.search(r"would create 'ends': every 15m, phase kept from its last change at \S+ "
                     rf"\(it never ran\), until {re.escape(when(LATER))}",
                     output), output
    start_z = START.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert (f"would create 'starts-later': every 15m, phase kept from its start_time at "
            f"{start_z}, from {start_z}, next run {start_z}"
            in output), output
    assert "skipped 'celery.backend_cleanup'" in output
    # A one-off that already ran has nothing left to run: skipped, not an error.
    assert ("skipped 'ran-once': a one-off whose time has passed (django-celery-beat ran it): "
            "nothing left to run") in output
    assert re.search(r"would create 'ended': every 15m, phase \D+ \S+ \(it never ran\), "
                     r"until \S+, already past: it will not run", output), output
    assert "14 would be created, 2 skipped, 1 refused (dry run: nothing written)" in output
    assert api.list() == []


def test_every_instant_of_the_report_is_printed_as_goatbeat_list_prints_it(
        api: Schedules) -> None:
    output = run()
    # A one-off's instant, a start and an end: UTC to the second with a Z, as `goatbeat list`
    # and the dry run's next runs print them; never Python's isoformat beside it.
    assert f"created 'launch': once at {when(LATER)}" in output, output
    assert api.get("launch").spec.trigger.params["at"] is not None
    from goatbeat_celery.display import describe_trigger

    assert f"'launch': {describe_trigger(api.get('launch').spec.trigger)}" in output
    # Only a task id, which is the run's key, carries an instant in isoformat.
    assert "+00:00" not in re.sub(r"task id '[^']*'", "", output), output


def test_the_import_copies_what_maps_and_names_what_it_refuses(api: Schedules) -> None:
    from django_celery_beat.models import PeriodicTask

    output = run()
    assert "14 created, 2 skipped, 1 refused" in output, output

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

    # A solar event is the same event at the same place, its degrees as numbers.
    lights = api.get("lights-off")
    assert lights.spec.trigger.to_json() == {"kind": "solar", "event": "sunrise",
                                             "latitude": 48.85, "longitude": 2.35}
    assert lights.next_run_at is not None

    for name in ("bad-args", "ran-once", "celery.backend_cleanup"):
        with pytest.raises(ScheduleNotFound):
            api.get(name)


def test_running_it_again_skips_what_it_copied(api: Schedules) -> None:
    assert "14 created, 2 skipped, 1 refused" in run()
    output = run()
    assert "0 created, 16 skipped, 1 refused" in output, output
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
        refused = ["bad-args"]
        PeriodicTask.objects.filter(name__in=refused).delete()
        call_command("goatbeat_import_django_celery_beat", stdout=out, no_color=True)
        transaction.set_rollback(True)
    assert "14 created, 2 skipped, 0 refused" in out.getvalue()
    assert PeriodicTask.objects.filter(name__in=refused).count() == 1


def test_a_one_off_solar_task_runs_once_at_its_next_event(api: Schedules) -> None:
    """django-celery-beat runs a one-off solar task at the first event after its last change:
    a one-off at that instant (the task made in a transaction rolled back afterwards)."""
    from django.core.management import CommandError, call_command
    from django.db import transaction
    from django_celery_beat.models import PeriodicTask, SolarSchedule

    from goatbeat_celery.solar import SolarTrigger

    out = io.StringIO()
    with transaction.atomic():
        dusk = SolarSchedule.objects.create(event="dusk_civil", latitude=-33.87,
                                            longitude=151.21)
        task = PeriodicTask.objects.create(name="dusk-once", task="garden.lights_on",
                                           solar=dusk, one_off=True)
        with pytest.raises(CommandError):  # bad-args, as in every run of this module
            call_command("goatbeat_import_django_celery_beat", "--dry-run", stdout=out,
                         no_color=True)
        transaction.set_rollback(True)
    first = SolarTrigger("dusk_civil", -33.87, 151.21).next_after(task.date_changed)
    assert first is not None
    assert f"would create 'dusk-once': once at {when(first)}" in out.getvalue(), \
        out.getvalue()


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

    refused = sorted(["bad-args", *BAD_ROWS])
    # A queue with a control character is refused by goatbeat's validation, naming it, and
    # the import goes on.
    bell = [line for line in output.splitlines() if line.startswith("refused 'bell-queue'")]
    assert len(bell) == 1 and "queue" in bell[0], output
    refused = sorted([*refused, "bell-queue"])
    created = 14
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


def goatbeat_runs(api: Schedules, name: str, after: datetime, count: int) -> list[datetime]:
    """The due instants of the imported schedule's next runs strictly after ``after``, by its
    trigger and offset (as the leader plans them)."""
    from goatbeat_celery import config as config_module
    from goatbeat_celery.core.rules.misfire import first_occurrence

    spec = api.get(name).spec
    trigger = config_module.base_registry().build(spec.trigger)
    runs: list[datetime] = []
    while len(runs) < count:
        _, due = first_occurrence(trigger, after, spec.effective_offset())
        if due is None:
            break
        runs.append(due)
        after = due
    return runs


def import_only(names: list[str]) -> str:
    """Import with every periodic task but ``names`` deleted (in the caller's transaction)."""
    from django.core.management import call_command
    from django_celery_beat.models import PeriodicTask

    PeriodicTask.objects.exclude(name__in=names).delete()
    out = io.StringIO()
    call_command("goatbeat_import_django_celery_beat", stdout=out, no_color=True)
    return out.getvalue()


def test_imported_intervals_keep_their_phase_and_run_when_django_celery_beat_would(
        api: Schedules) -> None:
    """Each interval runs every `every` after its last run in django-celery-beat: the import
    puts goatbeat's grid through that instant (rounded up to the second), so that the next
    five runs fall where django-celery-beat's own is_due puts them, not at midnight UTC or on
    even hours."""
    from django.db import transaction
    from django_celery_beat.models import ClockedSchedule, IntervalSchedule, PeriodicTask

    now = datetime.now(timezone.utc)
    day = IntervalSchedule.objects.create(every=1, period=IntervalSchedule.DAYS)
    two_hours = IntervalSchedule.objects.create(every=2, period=IntervalSchedule.HOURS)
    ninety = IntervalSchedule.objects.create(every=90, period=IntervalSchedule.SECONDS)
    every_15 = IntervalSchedule.objects.get(every=15, period=IntervalSchedule.MINUTES)
    start = (now + timedelta(days=2)).replace(hour=5, minute=41, second=9, microsecond=0)
    cases = {
        # A daily task that last ran 10 h 24 min ago: next at that time of day, not midnight.
        "daily": {"interval": day,
                  "last_run_at": now - timedelta(hours=10, minutes=24, seconds=3.25)},
        "two-hourly": {"interval": two_hours,
                       "last_run_at": now - timedelta(minutes=73, seconds=0.5)},
        "ninety-seconds": {"interval": ninety, "last_run_at": now - timedelta(seconds=20)},
        # Never ran: django-celery-beat counts from its last change.
        "never-ran": {"interval": every_15},
        # Not started yet: the first run at start_time, then every two hours from there.
        "starts-later": {"interval": two_hours, "start_time": start},
    }
    with transaction.atomic():
        clocked = ClockedSchedule.objects.create(
            clocked_time=now + timedelta(days=1, hours=3, seconds=7))
        PeriodicTask.objects.create(name="clocked", task="shop.open_sales", clocked=clocked,
                                    one_off=True)
        for name, fields in cases.items():
            PeriodicTask.objects.create(name=f"phase-{name}", task="shop.sync", **fields)
        PeriodicTask.objects.filter(name="phase-never-ran").update(
            date_changed=now - timedelta(minutes=4, seconds=12))
        output = import_only(["clocked", *(f"phase-{name}" for name in cases)])
        theirs = {task.name: celery_beat_runs(task, now, 5)
                  for task in PeriodicTask.objects.filter(name__in=["clocked", *(
                      f"phase-{name}" for name in cases)])}
        # Read before the block rolls back: the import's schedules joined it.
        goatbeats = {name: api.next_runs(name, 5) for name in theirs}
        next_daily = api.next_runs("phase-daily", 1)[0]
        transaction.set_rollback(True)

    assert "6 created, 0 skipped, 0 refused" in output, output
    for name, runs in theirs.items():
        assert len(runs) == (1 if name == "clocked" else 5), (name, runs)
        ours = goatbeats[name]
        # The phase is rounded up to the second, and django-celery-beat's beat sleeps whole
        # seconds until a start_time: within a second of each other, never further apart.
        assert len(ours) == len(runs) and all(
            abs(mine - their) < timedelta(seconds=1)
            for mine, their in zip(ours, runs, strict=True)), (name, ours, runs)
    last = now - timedelta(hours=10, minutes=24, seconds=3.25)
    assert (f"created 'phase-daily': every 1d, phase kept from its last run at "
            f"{last.strftime('%Y-%m-%dT%H:%M:%S')}.{last.microsecond // 1000:03d}Z, next run "
            f"{next_daily.strftime('%Y-%m-%dT%H:%M:%S')}Z") in output, output
    assert re.search(r"created 'phase-never-ran': every 15m, phase kept from its last change "
                     r"at \S+ \(it never ran\), next run", output), output
    assert (f"created 'phase-starts-later': every 2h, phase kept from its start_time at "
            f"{start.strftime('%Y-%m-%dT%H:%M:%SZ')}, from {start.strftime('%Y-%m-%dT%H:%M:%SZ')}"
            ) in output, output


#: Crontabs and the instant django-celery-beat's beat last ran each: in zones with daylight
#: saving across a change (Paris springs forward on 2027-03-28, New York falls back on
#: 2027-11-07, Sydney springs forward on 2026-10-04), a 30-minute zone, and both day fields
#: restricted (Celery matches the two together).
CRONTAB_RUNS = {
    "tab-paris-daily": (("30", "4", "*", "*", "*", "Europe/Paris"),
                    datetime(2027, 3, 26, 3, 30, tzinfo=timezone.utc)),
    "tab-paris-hourly": (("15", "*", "*", "*", "*", "Europe/Paris"),
                     datetime(2027, 3, 28, 0, 15, tzinfo=timezone.utc)),
    "tab-new-york-night": (("45", "0-3", "*", "*", "*", "America/New_York"),
                       datetime(2027, 11, 7, 4, 45, tzinfo=timezone.utc)),
    "tab-sydney-morning": (("0", "9", "*", "*", "mon-fri", "Australia/Sydney"),
                       datetime(2026, 10, 1, 23, 0, tzinfo=timezone.utc)),
    "tab-kolkata-noon": (("0", "12", "*", "*", "*", "Asia/Kolkata"),
                     datetime(2027, 1, 1, 6, 30, tzinfo=timezone.utc)),
    "tab-first-friday": (("0", "9", "1-7", "*", "fri", "Europe/Paris"),
                     datetime(2027, 1, 1, 8, 0, tzinfo=timezone.utc)),
    "tab-friday-13th": (("0", "12", "13", "*", "fri", "UTC"),
                    datetime(2026, 2, 13, 12, 0, tzinfo=timezone.utc)),
}


def test_imported_crontabs_run_when_django_celery_beats_is_due_says(api: Schedules) -> None:
    """The next five runs of each imported crontab, by goatbeat, are the instants
    django-celery-beat's ModelEntry.is_due makes due, with its clock starting at its last run."""
    from django.db import transaction
    from django_celery_beat.models import CrontabSchedule, PeriodicTask

    with transaction.atomic():
        for name, (fields, last) in CRONTAB_RUNS.items():
            minute, hour, day_of_month, month, day_of_week, zone = fields
            tab = CrontabSchedule.objects.create(
                minute=minute, hour=hour, day_of_month=day_of_month, month_of_year=month,
                day_of_week=day_of_week, timezone=zone)
            PeriodicTask.objects.create(name=name, task="shop.sync", crontab=tab,
                                        last_run_at=last)
        output = import_only(list(CRONTAB_RUNS))
        theirs = {task.name: celery_beat_runs(task, CRONTAB_RUNS[task.name][1], 5)
                  for task in PeriodicTask.objects.filter(name__in=list(CRONTAB_RUNS))}
        # Read before the block rolls back: the import's schedules joined it.
        goatbeats = {name: goatbeat_runs(api, name, CRONTAB_RUNS[name][1], 5)
                     for name in theirs}
        transaction.set_rollback(True)

    assert f"{len(CRONTAB_RUNS)} created, 0 skipped, 0 refused" in output, output
    assert len(theirs) == len(CRONTAB_RUNS)
    for name, runs in theirs.items():
        assert len(runs) == 5, (name, runs)
        assert goatbeats[name] == runs, name


def test_headers_only_celery_and_goatbeat_set_are_refused_by_the_import(
        api: Schedules) -> None:
    """django-celery-beat sends a periodic task's headers as they are: goatbeat's import
    judges them by the rule every face uses, and refuses the task naming each header."""
    from django.core.management import CommandError, call_command
    from django.db import transaction
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    api.create("team-b-report", "shop.sync", every=60)
    key = api.run_now("team-b-report").key
    refused = {
        "eta": {"eta": "2030-01-01T00:00:00+00:00"},
        "other-task": {"task": "probe.secret_admin", "shadow": "shop.sync"},
        "forged-id": {"id": key, "tenant": "acme"},
        "goatbeat-own": {"Goatbeat_Occurrence": "2030-01-01T00:00:00+00:00"},
        "retry": {"retries": 3, "timelimit": [1, 2], "stamps": {}},
    }
    every_15 = IntervalSchedule.objects.get(every=15, period=IntervalSchedule.MINUTES)
    out = io.StringIO()
    with transaction.atomic():
        PeriodicTask.objects.all().delete()
        for name, headers in refused.items():
            PeriodicTask.objects.create(name=name, task="shop.sync", interval=every_15,
                                        headers=json.dumps(headers))
        PeriodicTask.objects.create(name="tenant", task="shop.sync", interval=every_15,
                                    headers='{"tenant": "acme"}')
        with pytest.raises(CommandError) as caught:
            call_command("goatbeat_import_django_celery_beat", stdout=out, no_color=True)
        # Read before the block rolls back: the import's schedules joined it.
        listed = sorted(s.name for s in api.list())
        tenant = api.get("tenant").spec.options["headers"]
        transaction.set_rollback(True)
    output = out.getvalue()

    assert str(caught.value) == "5 periodic tasks were refused: " + ", ".join(
        repr(name) for name in sorted(refused))
    for name, headers in refused.items():
        [line] = [line for line in output.splitlines() if line.startswith(f"refused {name!r}")]
        for header in headers:
            if header != "tenant":
                assert f"options.headers.{header}: {header!r} is refused" in line, line
    assert listed == ["team-b-report", "tenant"]
    assert tenant == {"tenant": "acme", "periodic_task_name": "tenant"}
