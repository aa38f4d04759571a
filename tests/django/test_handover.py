"""Handing over from django-celery-beat: ``--disable-source`` of the import, and the guard
that ``celery goatbeat check`` and Django's system checks show while both schedulers could
send the same task."""

from __future__ import annotations

import io
from datetime import datetime, timedelta, timezone

import pytest

from goatbeat_celery.api import Schedules

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
