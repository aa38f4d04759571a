"""The switch from django-celery-beat and back, with real processes: periodic tasks of every
kind, imported with ``--disable-source`` and run for two minutes by ``celery beat -S
goatbeat_celery.Scheduler`` (django-celery-beat's DatabaseScheduler stopped), then exported,
and run on by django-celery-beat's DatabaseScheduler. A real worker on a Redis broker runs
them; the task records each run it makes (tests/django/testproj/switch_tasks.py).

The verdict compares those records with the instants django-celery-beat would have chosen
had it kept running: its own ``ModelEntry.is_due``, driven by a clock from the switch, on the
periodic tasks as they were before it (``celery_beat_runs``). Every instant runs once, by
goatbeat until it stops and by django-celery-beat from then on, in order; none twice, none
lost.
"""

from __future__ import annotations

import io
import json
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from goatbeat_celery.api import Schedules
from tests.django.processes import START_TIMEOUT, Project, ready
from tests.django.support import celery_beat_runs
from tests.django.testproj.switch_settings import RECORD_TASK, SOLAR_NAME, beat_schedule
from tests.support.waiting import wait_for
from tests.system.harness import run_for

pytestmark = pytest.mark.slow

#: goatbeat's run: several occurrences of every frequent task.
GOATBEAT_RUN = 120.0
#: django-celery-beat's run after the export: each interval of 20 s or less runs again.
ROLLBACK_RUN = 25.0
#: How late django-celery-beat may run an instant after the handover (goatbeat's beat told to
#: stop, then the export), which it runs late like any beat's downtime: it notices the export
#: within its loop interval (CELERY_BEAT_MAX_LOOP_INTERVAL, 1 s in switch_settings) and runs
#: at once what fell due meanwhile, after which an interval keeps that lateness as its phase;
#: the import's rounding of a phase adds under a second. 4 s more cover its reload and the
#: worker's pick-up on a busy 2-core machine.
TAKEOVER_BOUND = 1.0 + 1.0 + 4.0
#: The instants of an interval are kept to the second: the import rounds its phase up, and
#: django-celery-beat's beat sleeps whole seconds until a start_time, from wherever its clock
#: stands (so its first run falls up to a second after it).
TO_THE_SECOND = timedelta(seconds=1)
#: Ready once the next minute boundary is this far off, so that no crontab falls due between
#: the switch instant and the import's commit.
QUIET_BEFORE_MINUTE = 12
#: Tasks that run four times or more in goatbeat's two minutes.
FREQUENT = ("every-10s", "every-10s-fraction", "every-15s", "every-15s-late", "every-20s",
            "every-20s-never-ran", "every-10s-until", "every-15s-from")
#: Every minute, whatever the hour: twice or more.
MINUTELY = ("minutely-paris", "minutely-kolkata", "every-minute")


def solar_noon_place(target: datetime, latitude: float = 45.0) -> tuple[float, float]:
    """A place whose solar noon, by Celery's solar, falls within seconds of ``target``: the
    sun crosses one degree of longitude every 240 s. The longitude keeps three decimals, as
    the import's advice writes it."""
    from celery.schedules import solar

    longitude = 0.0
    for _ in range(4):
        noon = solar("solar_noon", latitude, longitude, nowfun=lambda: target)
        found = target + noon.remaining_estimate(target - timedelta(hours=12))
        longitude = (longitude + (found - target).total_seconds() / 240 + 180) % 360 - 180
    return latitude, round(longitude, 3)


def create_periodic_tasks(base: datetime) -> None:
    """Nineteen periodic tasks as django-celery-beat left them, their runs to come counted
    from ``base`` (a whole second): intervals in several phases, with an end, a start, one
    that never ran and one paused; crontabs every minute in three zones, and with both day
    fields, which Celery matches together; clocked and one-off tasks."""
    from django_celery_beat.models import (
        ClockedSchedule,
        CrontabSchedule,
        IntervalSchedule,
        PeriodicTask,
    )

    def every(seconds: int) -> Any:
        return IntervalSchedule.objects.get_or_create(every=seconds,
                                                      period=IntervalSchedule.SECONDS)[0]

    def ago(seconds: float) -> datetime:
        return base - timedelta(seconds=seconds)

    def task(name: str, **fields: Any) -> None:
        PeriodicTask.objects.create(name=name, task=RECORD_TASK, args=json.dumps([name]),
                                    **fields)

    task("every-10s", interval=every(10), last_run_at=ago(1))
    task("every-10s-fraction", interval=every(10), last_run_at=ago(5.6))
    task("every-15s", interval=every(15), last_run_at=ago(3))
    task("every-15s-late", interval=every(15), last_run_at=ago(8))
    task("every-20s", interval=every(20), last_run_at=ago(13))
    task("every-20s-never-ran", interval=every(20))
    task("every-minute", interval=IntervalSchedule.objects.create(
        every=1, period=IntervalSchedule.MINUTES), last_run_at=ago(37))
    task("every-10s-until", interval=every(10), last_run_at=ago(2), expires=ago(-52))
    task("every-15s-from", interval=every(15), start_time=ago(-40))
    task("every-10s-paused", interval=every(10), last_run_at=ago(4), enabled=False)

    def tab(zone: str, minute: str = "*", day_of_month: str = "*",
            day_of_week: str = "*") -> Any:
        return CrontabSchedule.objects.create(minute=minute, hour="*",
                                              day_of_month=day_of_month, month_of_year="*",
                                              day_of_week=day_of_week, timezone=zone)

    task("minutely-paris", crontab=tab("Europe/Paris"))
    task("minutely-kolkata", crontab=tab("Asia/Kolkata"))
    task("two-minutely-new-york", crontab=tab("America/New_York", minute="*/2"))
    # Kiritimati (UTC+14) and Pago Pago (UTC-11) are always on different dates: the same
    # day of month and weekday match in one zone only. A weekday that is not today's never
    # matches with today's day of month, as Celery matches both fields (cron would run it
    # every minute).
    kiritimati = base.astimezone(ZoneInfo("Pacific/Kiritimati"))
    today, weekday = str(kiritimati.day), kiritimati.strftime("%a").lower()
    tomorrow = (kiritimati + timedelta(days=1)).strftime("%a").lower()
    task("kiritimati-today", crontab=tab("Pacific/Kiritimati", day_of_month=today,
                                         day_of_week=weekday))
    task("pago-pago-kiritimatis-today", crontab=tab("Pacific/Pago_Pago", day_of_month=today,
                                                    day_of_week=weekday))
    task("kiritimati-wrong-weekday", crontab=tab("Pacific/Kiritimati", day_of_month=today,
                                                 day_of_week=tomorrow))
    for name, seconds in (("clocked-30s", 30), ("clocked-75s", 75)):
        task(name, clocked=ClockedSchedule.objects.create(clocked_time=ago(-seconds)),
             one_off=True)
    task("one-off-every-20s", interval=every(20), one_off=True)


def import_tasks(*args: str) -> str:
    from django.core.management import call_command

    out = io.StringIO()
    call_command("goatbeat_import_django_celery_beat", *args, stdout=out, no_color=True)
    return out.getvalue()


def test_a_project_switches_to_goatbeat_and_back_running_each_instant_once(
        project: Project, api: Schedules) -> None:
    from django.core.management import call_command
    from django.db import transaction
    from django.test import override_settings
    from django_celery_beat.models import PeriodicTask, SolarSchedule

    # The solar task's noon falls inside goatbeat's run: after the processes start (well under
    # a minute), before goatbeat's two minutes end.
    latitude, longitude = solar_noon_place(datetime.now(timezone.utc)
                                           + timedelta(seconds=75))
    solar = {"SWITCH_SOLAR": f"{latitude},{longitude}"}
    noon = SolarSchedule.objects.create(event="solar_noon", latitude=latitude,
                                        longitude=longitude)
    PeriodicTask.objects.create(name=SOLAR_NAME, task=RECORD_TASK, solar=noon,
                                args=json.dumps([SOLAR_NAME]))
    # The import would copy it as a solar trigger; this project runs it from an entry of
    # CELERY_BEAT_SCHEDULE instead (the settings of the processes below), which the import
    # then leaves to the config sync.
    out = io.StringIO()
    call_command("goatbeat_import_django_celery_beat", "--dry-run", stdout=out, no_color=True)
    assert f"would create '{SOLAR_NAME}': solar solar_noon at " in out.getvalue(), \
        out.getvalue()

    worker = project.worker(env=solar)
    goatbeat = project.celery("goatbeat", "beat", "-S", "goatbeat_celery.Scheduler",
                              "--loglevel", "INFO", env=solar)
    ready(worker, " ready.")
    ready(goatbeat, "acquired lease")

    # The switch: django-celery-beat's scheduler is stopped (its tasks are as it left them);
    # goatbeat's beat leads already, so the import's schedules run from their first instant.
    while 60 - datetime.now(timezone.utc).second < QUIET_BEFORE_MINUTE:
        time.sleep(0.5)  # the next minute, away from the crontabs' boundary
    switched = datetime.now(timezone.utc)
    base = switched.replace(microsecond=0) + timedelta(seconds=1)
    create_periodic_tasks(base)
    before = list(PeriodicTask.objects.select_related(
        "interval", "crontab", "solar", "clocked"))
    assert len(before) == 20
    with override_settings(CELERY_BEAT_SCHEDULE=beat_schedule(latitude, longitude)):
        output = import_tasks("--disable-source")
    assert "19 created, 1 skipped, 0 refused" in output, output
    assert f"skipped '{SOLAR_NAME}': " in output, output
    assert not PeriodicTask.objects.filter(enabled=True).exists()

    # Two minutes of goatbeat; django-celery-beat's beat is started meanwhile (every periodic
    # task is disabled: it sends nothing), to take over once the export enables them.
    run_for(GOATBEAT_RUN - 20 - (datetime.now(timezone.utc) - switched).total_seconds())
    django_celery_beat = project.celery(
        "django-celery-beat", "beat", "-S", "django_celery_beat.schedulers:DatabaseScheduler",
        "--loglevel", "DEBUG", env=solar)
    ready(django_celery_beat, "beat: Ticking with max interval")
    run_for(GOATBEAT_RUN - (datetime.now(timezone.utc) - switched).total_seconds())
    assert goatbeat.alive(), goatbeat.log()
    handover = datetime.now(timezone.utc)
    goatbeat.stop(timeout=30)

    # The rollback.
    exported = io.StringIO()
    call_command("goatbeat_export_django_celery_beat", stdout=exported, no_color=True)
    assert ", 0 refused; goatbeat's schedules written are paused" in exported.getvalue(), \
        exported.getvalue()
    handover_took = (datetime.now(timezone.utc) - handover).total_seconds()
    run_for(ROLLBACK_RUN)
    assert django_celery_beat.alive(), django_celery_beat.log()
    django_celery_beat.stop(timeout=30)
    ended = datetime.now(timezone.utc)

    # Every message sent is run: a last one, sent now, is run after them (one worker process,
    # one message at a time, in the queue's order).
    from celery import Celery

    with Celery("switch-test", broker=f"{project.broker_url}/0",
                set_as_current=False) as sender:
        sender.send_task(RECORD_TASK, args=["end"], queue=project.queue)
    wait_for(lambda: any(record["name"] == "end" for record in project.records()),
             timeout=START_TIMEOUT, what="the worker to run every message")
    assert worker.alive(), worker.log()
    records = [record for record in project.records() if record["name"] != "end"]

    # What django-celery-beat would have run, from the switch on: up to a second past the end
    # too, as an instant kept to the second may have run up to a second early, before it.
    with transaction.atomic():
        expected = {task.name: [instant for instant in celery_beat_runs(task, switched, 20)
                                if instant <= ended + TO_THE_SECOND] for task in before}
        transaction.set_rollback(True)
    due = due_instants(project)

    judged = judge(expected, records, due, handover, handover_took, ended)
    assert judged["problems"] == [], "\n".join([*judged["problems"], project.logs()])
    goatbeat_runs, rollback_runs = judged["goatbeat"], judged["rollback"]
    for name in FREQUENT:
        assert len(goatbeat_runs[name]) >= 4, (name, goatbeat_runs[name])
    for name in MINUTELY:
        assert len(goatbeat_runs[name]) >= 2, (name, goatbeat_runs[name])
    assert [len(goatbeat_runs[name]) for name in ("clocked-30s", "clocked-75s",
                                                  "one-off-every-20s", SOLAR_NAME)] == [1] * 4
    for name in ("every-10s-paused", "pago-pago-kiritimatis-today",
                 "kiritimati-wrong-weekday"):
        assert expected[name] == [] and goatbeat_runs[name] == rollback_runs[name] == []
    # django-celery-beat took over: every interval of 20 s or less ran again.
    for name in ("every-10s", "every-10s-fraction", "every-15s", "every-15s-late",
                 "every-20s"):
        assert rollback_runs[name], (name, expected[name], goatbeat_runs[name])
    # The solar task's next noon is tomorrow's, in django-celery-beat, not today's again.
    written = PeriodicTask.objects.select_related("solar").get(name=SOLAR_NAME)
    with transaction.atomic():
        following = celery_beat_runs(written, ended, 1)
        transaction.set_rollback(True)
    assert following and following[0] - expected[SOLAR_NAME][0] > timedelta(hours=23), \
        (following, expected[SOLAR_NAME])
    print(f"switch: {sum(map(len, goatbeat_runs.values()))} runs by goatbeat, "
          f"{sum(map(len, rollback_runs.values()))} by django-celery-beat; handover (stop, "
          f"export) {handover_took:.2f}s, its runs at most {judged['takeover']:.2f}s late")


def due_instants(project: Project) -> dict[str, datetime]:
    """The instant each of goatbeat's runs was due (its occurrence and the schedule's shift),
    by its key, the task id the worker saw."""
    rows = project.sql("SELECT key, due_at FROM goatbeat_execution")
    return {row["key"]: row["due_at"] for row in rows}


def judge(expected: dict[str, list[datetime]], records: list[dict[str, Any]],
          due: dict[str, datetime], handover: datetime, handover_took: float,
          ended: datetime) -> dict[str, Any]:
    """Each task's runs, goatbeat's then django-celery-beat's, against the instants
    django-celery-beat would have chosen: the same instants, in order, each once, none left
    out up to the end of the rollback (bar the last seconds, which django-celery-beat may run
    late by the handover's time and TAKEOVER_BOUND)."""
    bound = handover_took + TAKEOVER_BOUND
    problems: list[str] = []
    twice = [key for key, count in Counter(record["id"] for record in records).items()
             if count > 1]
    if twice:
        problems.append(f"messages run twice: {twice}")
    goatbeat: dict[str, list[datetime]] = {name: [] for name in expected}
    rollback: dict[str, list[datetime]] = {name: [] for name in expected}
    takeover = 0.0
    for record in records:
        ran_at = datetime.fromtimestamp(record["ran_at"], timezone.utc)
        if record["goatbeat"]:
            goatbeat[record["name"]].append(due[record["id"]])
        else:
            if record["periodic_task_name"] != record["name"] or ran_at < handover:
                problems.append(f"not sent by django-celery-beat after goatbeat: {record}")
            rollback[record["name"]].append(ran_at)
    for name, instants in expected.items():
        ours = sorted(goatbeat[name])
        for index, (mine, theirs) in enumerate(zip(ours, instants, strict=False)):
            if abs(mine - theirs) >= TO_THE_SECOND:
                problems.append(f"{name}: goatbeat's run {index} was due at {mine}, "
                                f"django-celery-beat's at {theirs}")
        if len(ours) > len(instants):
            problems.append(f"{name}: goatbeat ran {ours[len(instants):]} beyond {instants}")
            continue
        # django-celery-beat's runs continue goatbeat's: each runs the latest instant it is
        # not early for, the next after the one before.
        for offset, ran_at in enumerate(sorted(rollback[name])):
            index = len(ours) + offset
            if index >= len(instants) or instants[index] - TO_THE_SECOND > ran_at:
                problems.append(f"{name}: django-celery-beat ran at {ran_at}, not the instant "
                                f"after {instants[index - 1] if index else 'the switch'} "
                                f"({instants})")
                break
            if index + 1 < len(instants) and instants[index + 1] - TO_THE_SECOND <= ran_at:
                problems.append(f"{name}: django-celery-beat ran at {ran_at}, after "
                                f"{instants[index + 1]}: {instants[index]} was left out")
                break
            late = max(0.0, (ran_at - instants[index]).total_seconds())
            takeover = max(takeover, late)
            if late > bound:
                problems.append(f"{name}: {instants[index]} ran {late:.2f}s late, at {ran_at}")
        ran = len(ours) + len(rollback[name])
        owed = [instant for instant in instants
                if instant <= ended - timedelta(seconds=bound)]
        if ran < len(owed):
            problems.append(f"{name}: {owed[ran:]} never ran ({len(ours)} by goatbeat, "
                            f"{len(rollback[name])} by django-celery-beat)")
    return {"problems": problems, "goatbeat": goatbeat, "rollback": rollback,
            "takeover": takeover}

