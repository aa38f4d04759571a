"""Handing over from django-celery-beat: ``--disable-source`` of the import, and the guard
that ``celery goatbeat check`` and Django's system checks show while both schedulers could
send the same task."""

from __future__ import annotations

import io
import re
from datetime import datetime, timedelta, timezone

import pytest

from goatbeat_celery.api import Schedules

from .support import import_tasks_ok

NAMES = ("hourly-report", "nightly-sync", "paused-job", "bad-json")


@pytest.fixture
def tasks(api: Schedules) -> None:
    """Four periodic tasks (one disabled, one refused by the import), made anew for each test
    on goatbeat's emptied tables (the api fixture)."""
    from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

    PeriodicTask.objects.all().delete()
    hourly = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.HOURS)[0]
    night = CrontabSchedule.objects.get_or_create(minute="0", hour="2", timezone="UTC")[0]
    last = datetime.now(timezone.utc) - timedelta(minutes=20)
    PeriodicTask.objects.create(name="hourly-report", task="reports.hourly", interval=hourly,
                                description="Sends the hourly report", last_run_at=last)
    PeriodicTask.objects.create(name="nightly-sync", task="shop.sync", crontab=night)
    PeriodicTask.objects.create(name="paused-job", task="shop.sync", interval=hourly,
                                enabled=False)
    PeriodicTask.objects.create(name="bad-json", task="shop.sync", interval=hourly,
                                kwargs="{'a': 1}")


def import_tasks(*args: str) -> str:
    from django.core.management import CommandError, call_command

    out = io.StringIO()
    with pytest.raises(CommandError, match="'bad-json'"):
        call_command("goatbeat_import_django_celery_beat", *args, stdout=out, no_color=True)
    return out.getvalue()


def enabled() -> dict[str, bool]:
    from django_celery_beat.models import PeriodicTask

    return dict(PeriodicTask.objects.values_list("name", "enabled"))


def guard() -> tuple[list[str], list[str]]:
    """What the two faces say: Django's database checks (``id: message``) and ``goatbeat
    check`` (``status: detail`` of its django-celery-beat line)."""
    from goatbeat_celery.cli.checks import run_checks
    from goatbeat_celery.contrib.django import integration
    from goatbeat_celery.contrib.django.checks import goatbeat_checks

    django = [f"{message.id}: {message.msg}" for message in goatbeat_checks(
        databases=["default"]) if message.id != "goatbeat.I001"]
    cli = [f"{check.outcome.value}: {check.detail}" for check in run_checks(
        integration.celery_app()) if check.name == "django-celery-beat"]
    return django, cli


def test_disable_source_disables_what_goatbeat_now_runs_with_a_note(
        api: Schedules, tasks: None) -> None:
    from django_celery_beat.models import PeriodicTask, PeriodicTasks

    before = PeriodicTasks.last_change()
    output = import_tasks("--dry-run", "--disable-source")
    assert ("would disable 2 periodic tasks in django-celery-beat, which goatbeat runs now: "
            "'hourly-report', 'nightly-sync'") in output, output
    assert enabled() == {"hourly-report": True, "nightly-sync": True, "paused-job": False,
                         "bad-json": True}

    output = import_tasks("--disable-source")
    assert ("disabled 2 periodic tasks in django-celery-beat, which goatbeat runs now: "
            "'hourly-report', 'nightly-sync'") in output, output
    # The refused task stays with django-celery-beat, enabled.
    assert enabled() == {"hourly-report": False, "nightly-sync": False, "paused-job": False,
                         "bad-json": True}
    report = PeriodicTask.objects.get(name="hourly-report").description
    assert report.startswith("Sends the hourly report\n\nDisabled by "
                             "goatbeat_import_django_celery_beat on "), report
    assert report.endswith("goatbeat runs it now, as schedule 'hourly-report'. "
                           "goatbeat_export_django_celery_beat enables it again."), report
    # A running DatabaseScheduler reloads its tasks when this changes.
    changed = PeriodicTasks.last_change()
    assert changed is not None and (before is None or changed > before)
    assert {schedule.name for schedule in api.list()} == {"hourly-report", "nightly-sync",
                                                          "paused-job"}


def test_disable_source_again_disables_what_an_earlier_import_copied(
        api: Schedules, tasks: None) -> None:
    import_tasks()
    assert enabled()["hourly-report"] is True
    output = import_tasks("--disable-source")
    assert "disabled 2 periodic tasks in django-celery-beat" in output, output
    assert enabled()["hourly-report"] is False


def test_the_guard_warns_while_both_are_enabled_and_fails_once_both_beats_ran(
        api: Schedules, tasks: None) -> None:
    from django_celery_beat.models import PeriodicTask

    assert guard() == ([], ["ok: no enabled periodic task has an enabled goatbeat schedule "
                            "of its name"])
    import_tasks()
    django, cli = guard()
    both = ("2 django-celery-beat periodic tasks are enabled and goatbeat has an enabled "
            "schedule of the same name ('hourly-report', 'nightly-sync'): a beat running "
            "django-celery-beat's DatabaseScheduler would send each of them a second time")
    assert len(django) == 1 and django[0].startswith(f"goatbeat.W005: {both}"), django
    assert len(cli) == 1 and cli[0].startswith(f"warn: {both}"), cli

    # goatbeat's beat takes its lease; then django-celery-beat's beat runs a task.
    grant = api.store.acquire("default", "replica-1", timedelta(seconds=30))
    assert grant is not None
    ran = api.store.now() + timedelta(seconds=1)
    PeriodicTask.objects.filter(name="nightly-sync").update(last_run_at=ran)
    django, cli = guard()
    error = ("django-celery-beat ran 1 periodic task after goatbeat's beat took its lease at ")
    assert len(django) == 1 and django[0].startswith(f"goatbeat.E002: {error}"), django
    assert len(cli) == 1 and cli[0].startswith(f"fail: {error}"), cli
    assert "('nightly-sync'; 'nightly-sync' at " in cli[0]
    assert "stop every beat started with django_celery_beat.schedulers:DatabaseScheduler" \
        in cli[0]

    # Disabled in django-celery-beat: neither warns any more.
    import_tasks("--disable-source")
    assert guard() == ([], ["ok: no enabled periodic task has an enabled goatbeat schedule "
                            "of its name"])


# -- the way back -------------------------------------------------------------------------------
def export(*args: str) -> str:
    from django.core.management import call_command

    out = io.StringIO()
    call_command("goatbeat_export_django_celery_beat", *args, stdout=out, no_color=True)
    return out.getvalue()


def test_a_round_trip_sends_nothing_twice_and_loses_nothing(api: Schedules) -> None:
    """django-celery-beat → import --disable-source → goatbeat's leader runs what falls due →
    export: django-celery-beat's own is_due (a clock starting at the export) runs each task
    next exactly when goatbeat would have, so no run is sent twice and none is skipped."""
    from django_celery_beat.models import (
        ClockedSchedule,
        CrontabSchedule,
        IntervalSchedule,
        PeriodicTask,
        SolarSchedule,
    )

    from goatbeat_celery import config as config_module
    from goatbeat_celery.core.types.settings import Settings
    from goatbeat_celery.testing import RecordingSubmitter, build_engine
    from tests.django.support import celery_beat_runs

    PeriodicTask.objects.all().delete()
    now = datetime.now(timezone.utc)
    two_seconds = IntervalSchedule.objects.create(every=2, period=IntervalSchedule.SECONDS)
    hourly = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.HOURS)[0]
    night = CrontabSchedule.objects.create(minute="30", hour="2", day_of_week="mon-fri",
                                           timezone="Europe/Paris")
    soon = ClockedSchedule.objects.create(clocked_time=now + timedelta(seconds=2))
    later = ClockedSchedule.objects.create(clocked_time=now + timedelta(days=3))
    PeriodicTask.objects.create(name="fast", task="shop.ping", interval=two_seconds,
                                last_run_at=now - timedelta(seconds=0.5), args='[1, "a"]',
                                queue="pings", priority=3, headers='{"tenant": "acme"}',
                                expire_seconds=30, description="Pings the shop")
    PeriodicTask.objects.create(name="hourly", task="reports.hourly", interval=hourly,
                                last_run_at=now - timedelta(minutes=20))
    PeriodicTask.objects.create(name="nightly", task="shop.sync", crontab=night,
                                last_run_at=now - timedelta(hours=5))
    PeriodicTask.objects.create(name="launch", task="shop.open", clocked=soon, one_off=True)
    PeriodicTask.objects.create(name="later", task="shop.open", clocked=later, one_off=True)
    dawn = SolarSchedule.objects.get_or_create(event="sunrise", latitude=48.85,
                                               longitude=2.35)[0]
    PeriodicTask.objects.create(name="dawn", task="garden.lights_off", solar=dawn)
    import_tasks_ok("--disable-source")
    # A schedule made in goatbeat after the switch goes back too.
    api.create("made-in-goatbeat", "shop.audit", cron="15 6 1-7 * mon", timezone="UTC",
               day_or=False)

    # goatbeat's leader runs what falls due until the one-off has run and the 2-second
    # interval twice; it waits as beat waits (on the store's notifications), at most 30 s,
    # which covers a busy 2-core machine many times over for a 2-second schedule.
    submitter = RecordingSubmitter()
    engine = build_engine(api.store, submitter=submitter, triggers=config_module.base_registry(),
                          settings=Settings())
    deadline = datetime.now(timezone.utc) + timedelta(seconds=30)
    while not (submitter.of("launch") and len(submitter.of("fast")) >= 2):
        assert datetime.now(timezone.utc) < deadline, submitter.keys
        api.store.wait(min(engine.tick(), 0.5))
    engine.close()
    ran_in_goatbeat = {name: [d.execution.due_at for d in submitter.of(name)]
                       for name in ("fast", "launch")}
    expected = {name: api.next_runs(name, 3) for name in ("fast", "hourly", "nightly",
                                                         "made-in-goatbeat", "dawn")}
    expected["later"] = api.next_runs("later", 1)

    output = export()
    assert "refused '" not in output, output
    assert ("wrote 'fast': every 2s, enabled, last run "
            f"{ran_in_goatbeat['fast'][-1].strftime('%Y-%m-%dT%H:%M:%SZ')}") in output, output
    assert "wrote 'launch': once at " in output and ", disabled, " in output, output
    assert "7 written, 0 refused; goatbeat's schedules written are paused" in output, output
    assert all(not schedule.spec.enabled for schedule in api.list(source="api"))

    tasks = {task.name: task for task in PeriodicTask.objects.all()}
    # As written (the simulation below moves the models' last_run_at in memory, as beat does).
    written = list(PeriodicTask.objects.order_by("name").values_list(
        "name", "enabled", "last_run_at"))
    fast = tasks["fast"]
    assert fast.enabled and fast.args == '[1, "a"]' and fast.queue == "pings"
    assert fast.priority == 3 and fast.expire_seconds == 30
    assert json_of(fast.headers) == {"tenant": "acme"}
    assert fast.description == "Pings the shop"  # the import's note taken out again
    assert not tasks["launch"].enabled  # goatbeat ran it: never again
    made = tasks["made-in-goatbeat"]
    assert made.crontab is not None and made.crontab.day_of_week == "mon"
    assert tasks["dawn"].solar == dawn  # the same event at the same place

    export_time = datetime.now(timezone.utc)
    for name, runs in expected.items():
        theirs = celery_beat_runs(tasks[name], export_time, len(runs))
        # The phase of an interval is kept to the second (the import rounds it).
        assert len(theirs) == len(runs) and all(
            abs(their - ours) < timedelta(seconds=1) for their, ours in zip(
                theirs, runs, strict=True)), (name, theirs, runs)
    # Nothing goatbeat sent is sent again: django-celery-beat's first run of `fast` comes
    # after goatbeat's last, the one-off it ran never runs.
    assert celery_beat_runs(tasks["launch"], export_time, 1) == []
    assert celery_beat_runs(tasks["fast"], export_time, 1)[0] > ran_in_goatbeat["fast"][-1]

    # A second export writes the same: the pause of the first is not taken for the user's.
    assert "7 written, 0 refused" in export()
    assert list(PeriodicTask.objects.order_by("name").values_list(
        "name", "enabled", "last_run_at")) == written

    # The guard is quiet: goatbeat's schedules are paused.
    assert guard()[1] == ["ok: no enabled periodic task has an enabled goatbeat schedule of "
                          "its name"]


def json_of(text: str) -> object:
    import json

    return json.loads(text)


def test_the_export_refuses_what_django_celery_beat_cannot_hold_and_writes_the_rest(
        api: Schedules) -> None:
    from django.core.management import CommandError, call_command
    from django_celery_beat.models import PeriodicTask

    from tests.django.conftest import add_config_schedule

    PeriodicTask.objects.all().delete()
    later = datetime.now(timezone.utc) + timedelta(days=3)
    # django-celery-beat's model refuses an end and an expiry in seconds together.
    api.create("both-ends", "shop.sync", every=60, end_at=later, options={"expires": 30})
    api.create("either-day", "pay.run", cron="0 9 1-7 * fri")  # standard cron's OR
    api.create("fine", "shop.sync", every=300)
    add_config_schedule(api, "heartbeat", "proj.heartbeat")  # no periodic task of its name
    out = io.StringIO()
    with pytest.raises(CommandError, match="2 schedules were refused: 'both-ends', "
                                           "'either-day'"):
        call_command("goatbeat_export_django_celery_beat", stdout=out, no_color=True)
    output = out.getvalue()
    assert "refused 'both-ends': cannot be written: ValidationError" in output, output
    assert ("refused 'either-day': a cron restricting both days and matching either one "
            "(standard cron); Celery's crontab matches both") in output, output
    assert "wrote 'fine': every 5m, enabled, last run " in output, output
    assert set(PeriodicTask.objects.values_list("name", flat=True)) == {"fine"}
    # What went back is paused in goatbeat, the config entry too (django-celery-beat's beat
    # sends it from the config now); what was refused keeps running in goatbeat.
    assert not api.get("fine").spec.enabled and not api.get("heartbeat").spec.enabled
    assert api.get("both-ends").spec.enabled and api.get("either-day").spec.enabled


def test_the_guard_fails_only_while_goatbeats_beat_holds_its_lease(api: Schedules,
                                                                    tasks: None) -> None:
    """goatbeat's beat stopped (its lease released), django-celery-beat running alone sends
    nothing twice: the error becomes the warning."""
    from django_celery_beat.models import PeriodicTask

    import_tasks()
    grant = api.store.acquire("default", "replica-1", timedelta(seconds=30))
    assert grant is not None
    PeriodicTask.objects.filter(name="nightly-sync").update(
        last_run_at=api.store.now() + timedelta(seconds=1))
    assert guard()[1][0].startswith("fail: django-celery-beat ran 1 periodic task")
    assert api.store.release(grant)
    django, cli = guard()
    assert [line.split(":")[0] for line in django] == ["goatbeat.W005"], django
    assert cli[0].startswith("warn: 2 django-celery-beat periodic tasks are enabled"), cli


def test_the_export_enables_again_an_entry_of_beat_schedule_the_import_disabled(
        api: Schedules, tasks: None) -> None:
    """django-celery-beat's beat stores the entries of beat_schedule as periodic tasks but
    never enables one: the export does, for those the import's --disable-source disabled."""
    from django.test import override_settings
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    from tests.django.conftest import add_config_schedules

    hourly = IntervalSchedule.objects.get(every=1, period=IntervalSchedule.HOURS)
    PeriodicTask.objects.create(name="heartbeat", task="proj.heartbeat", interval=hourly,
                                description="Says it is alive")
    PeriodicTask.objects.create(name="cleanup", task="proj.cleanup", interval=hourly,
                                enabled=False)
    beat_schedule = {name: {"task": f"proj.{name}", "schedule": 3600}
                     for name in ("heartbeat", "cleanup")}
    with override_settings(CELERY_BEAT_SCHEDULE=beat_schedule):
        import_tasks("--disable-source")
    assert enabled()["heartbeat"] is False
    add_config_schedules(api, {name: f"proj.{name}" for name in beat_schedule})

    output = export()
    assert re.search(r"wrote 'heartbeat': last run \S+ \(an entry of beat_schedule: only its "
                     r"last run, enabled again\)", output), output
    heartbeat = PeriodicTask.objects.get(name="heartbeat")
    assert heartbeat.enabled and heartbeat.description == "Says it is alive"
    # Disabled in django-celery-beat before the import: it stays so.
    assert "wrote 'cleanup': last run " in output and enabled()["cleanup"] is False
    assert "enabled again" not in export()


def test_an_occurrence_claimed_and_never_sent_is_sent_by_django_celery_beat_after_the_export(
        api: Schedules) -> None:
    """goatbeat stopped between a claim and its send (here the broker refused it): its next
    leader would have sent it under its key; after a rollback django-celery-beat sends it at
    once, and a one-off is run, not disabled as one that ran."""
    from django_celery_beat.models import PeriodicTask

    from goatbeat_celery import config as config_module
    from goatbeat_celery.core.types.execution import ExecutionState
    from goatbeat_celery.core.types.settings import Settings
    from goatbeat_celery.testing import RecordingSubmitter, build_engine
    from tests.django.support import celery_beat_runs

    PeriodicTask.objects.all().delete()
    api.create("every-2s", "shop.ping", every=2)
    api.create("launch", "shop.open", at=datetime.now(timezone.utc) + timedelta(seconds=1))
    submitter = RecordingSubmitter(failing=True)
    engine = build_engine(api.store, submitter=submitter, triggers=config_module.base_registry(),
                          settings=Settings())
    # Ticks until both schedules have a claim the broker refused: due within 2 s, 30 s covers
    # a busy machine many times over.
    deadline = datetime.now(timezone.utc) + timedelta(seconds=30)
    while not (submitter.of("every-2s") and submitter.of("launch")):
        assert datetime.now(timezone.utc) < deadline, submitter.keys
        api.store.wait(min(engine.tick(), 0.5))
    engine.close()
    unsent = {name: min(e.due_at for e in api.history(name)
                        if e.state is ExecutionState.CLAIMED)
              for name in ("every-2s", "launch")}

    export()

    export_time = datetime.now(timezone.utc)
    tasks = {task.name: task for task in PeriodicTask.objects.all()}
    assert tasks["launch"].enabled
    assert all(tasks[name].last_run_at < due for name, due in unsent.items())
    for name in unsent:
        # Sent at once: it is overdue (the simulation moves the model's last_run_at).
        assert celery_beat_runs(tasks[name], export_time, 1) == [export_time], name
