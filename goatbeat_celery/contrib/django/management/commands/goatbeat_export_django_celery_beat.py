"""``manage.py goatbeat_export_django_celery_beat [--dry-run]``: the way back to
django-celery-beat, so that a rollback sends nothing twice and loses nothing.

Each goatbeat schedule becomes (or updates) the periodic task of its name: its trigger, task,
arguments, message options, bounds, description and state, and above all its ``last_run_at``,
set so that django-celery-beat's ``is_due`` makes the task due next exactly when goatbeat
would have run it:

* an interval: ``every`` before goatbeat's next run (django-celery-beat runs it ``every``
  after its last run, so the phase goatbeat kept is kept again);
* a cron or a solar event: goatbeat's last run, or the schedule's creation when it never ran
  (django-celery-beat runs it at the first match, or the first event, after that);
* a one-off that goatbeat ran: disabled (django-celery-beat would run a clocked task whose
  time has passed at once);
* an occurrence goatbeat claimed and had not sent when it stopped (a broker outage, a stop
  between the claim and the send), which goatbeat's next leader would have sent: the last
  run is written before it, so that django-celery-beat sends it at once (a cron or an
  interval) or runs the one-off.

A schedule of ``beat_schedule`` is not written (django-celery-beat's scheduler stores those
itself, from the config) but its periodic task's ``last_run_at`` is, when it has one, and the
task is enabled again when the import's ``--disable-source`` disabled it; it is paused in
goatbeat like the others. The
note ``--disable-source`` of the import put in a description is taken out again.

django-celery-beat's side is written in one transaction; then each exported goatbeat schedule
is paused with a note, so that a goatbeat beat left running sends nothing and ``goatbeat
check`` stays quiet; ``celery goatbeat resume`` undoes it. A schedule django-celery-beat cannot
express (a cron matching either day field, a Celery schedule object, a shift without an
interval, a rotation over queues) is refused with its reason and left running in goatbeat;
the command then ends with a CommandError (exit status 1) after writing the rest.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DataError, IntegrityError

from goatbeat_celery.api import Schedules
from goatbeat_celery.contrib.django.management.commands.goatbeat_import_django_celery_beat import (  # noqa: E501
    NOTE_START,
    PERIODIC_TASK_NAME,
)
from goatbeat_celery.core.rules.validation import MAX_LIMIT
from goatbeat_celery.core.types.errors import GoatbeatError, failure_reason
from goatbeat_celery.core.types.execution import ExecutionState
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSource
from goatbeat_celery.display import describe_trigger, when

#: The note each exported goatbeat schedule is paused with.
PAUSE_NOTE = "exported to django-celery-beat (goatbeat_export_django_celery_beat)"
#: What writing one periodic task can raise from its own data: its model's validation (both
#: an end and an expiry in seconds, say), a value the database refuses.
ROW_ERRORS = (ValidationError, DataError, IntegrityError, ValueError, TypeError)
#: How long before an occurrence never sent its cron task's last run is written (less than
#: any cron's step of a minute, so the occurrence is the first match after it).
UNSENT_BEFORE = timedelta(seconds=1)
#: Message options a periodic task has a column for.
COLUMNS = ("queue", "exchange", "routing_key", "priority")


class Refused(Exception):
    """A schedule django-celery-beat cannot express; the message says why."""


class Command(BaseCommand):
    help = ("Write goatbeat's schedules and last runs into django-celery-beat's periodic tasks "
            "(to roll back), then pause them in goatbeat.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true",
                            help="report what would be written, write nothing")
        parser.add_argument("--database", default="default",
                            help="the Django database holding django-celery-beat's tables")

    def handle(self, *args: Any, **options: Any) -> None:
        from django.apps import apps
        from django.db import transaction

        if not apps.is_installed("django_celery_beat"):
            raise CommandError("django_celery_beat is not in INSTALLED_APPS: add it back "
                               "(and migrate it) to roll back to it")
        from goatbeat_celery.contrib.django import integration

        dry_run, database = bool(options["dry_run"]), str(options["database"])
        written: list[str] = []
        #: Entries of beat_schedule: paused too, as django-celery-beat's beat sends them now.
        config: list[str] = []
        refused: list[tuple[str, str]] = []
        try:
            with integration.schedules() as source:
                now = source.now()
                schedules = source.list()
                never_sent = unsent_due(source)
                with transaction.atomic(using=database):
                    for schedule in schedules:
                        try:
                            # A savepoint each: a row the database refuses is refused alone.
                            with transaction.atomic(using=database):
                                line = export_one(schedule, source, database, now,
                                                  never_sent.get(schedule.name, ()))
                        except (Refused, *ROW_ERRORS) as exc:
                            reason = str(exc) if isinstance(exc, Refused) else (
                                f"cannot be written: {failure_reason(exc)}")
                            refused.append((schedule.name, reason))
                            self.stdout.write(self.style.WARNING(
                                f"refused {schedule.name!r}: {reason}"))
                            continue
                        if schedule.spec.source is ScheduleSource.CONFIG:
                            config.append(schedule.name)
                        if line is None:
                            self.stdout.write(f"skipped {schedule.name!r}: an entry of "
                                              "beat_schedule, which django-celery-beat's "
                                              "scheduler stores itself")
                            continue
                        written.append(schedule.name)
                        self.stdout.write(f"{'would write' if dry_run else 'wrote'} "
                                          f"{schedule.name!r}: {line}")
                    if written:
                        touch(database)
                    if dry_run:
                        transaction.set_rollback(True, using=database)
                if not dry_run:
                    paused = {*written, *config}
                    for schedule in schedules:
                        if schedule.name in paused and schedule.spec.enabled:
                            source.pause(schedule.name, note=PAUSE_NOTE)
        except GoatbeatError as exc:
            raise CommandError(str(exc)) from exc
        done = "would be written" if dry_run else "written"
        self.stdout.write(f"{len(written)} {done}, {len(refused)} refused"
                          + (" (dry run: nothing written)" if dry_run else
                             "; goatbeat's schedules written are paused"))
        if refused:
            self.stdout.flush()
            raise CommandError(f"{len(refused)} schedules were refused: "
                               + ", ".join(repr(name) for name, _ in refused))


def export_one(schedule: Schedule, source: Schedules, database: str,
               now: datetime, never_sent: Sequence[datetime] = ()) -> str | None:
    """Write one schedule into its periodic task (``never_sent``: when its claims never sent
    were due, earliest first); the line saying what was written, None for a config schedule
    without a periodic task."""
    from django_celery_beat.models import PeriodicTask

    spec = schedule.spec
    tasks = PeriodicTask.objects.using(database)
    existing = tasks.filter(name=spec.name).first()
    unsent = never_sent[0] if never_sent else None
    last_run = last_run_at(schedule, now, unsent)
    if (existing is not None and existing.last_run_at is not None
            and schedule.paused_reason == PAUSE_NOTE):
        # Exported before, and paused since: goatbeat ran nothing, what was written holds.
        last_run = existing.last_run_at
    if spec.source is ScheduleSource.CONFIG:
        if existing is None:
            return None
        written: dict[str, Any] = {"last_run_at": last_run}
        # Disabled by the import's --disable-source: django-celery-beat's beat enables no
        # entry of beat_schedule itself, so without this it would never send it again.
        enable = NOTE_START in str(existing.description or "") and running(schedule)
        if enable:
            written.update(enabled=True, description=without_note(existing.description))
        tasks.filter(pk=existing.pk).update(**written)
        return (f"last run {when(last_run)} (an entry of beat_schedule: only its last run"
                + (", enabled again)" if enable else ")"))
    fields = task_fields(schedule, source, database, now, len(never_sent))
    fields["last_run_at"] = last_run
    if existing is None:
        tasks.create(name=spec.name, **fields)
    else:
        fields["description"] = without_note(fields["description"] or existing.description)
        tasks.filter(pk=existing.pk).update(**fields)
    state = "enabled" if fields["enabled"] else "disabled"
    return (f"{describe_trigger(spec.trigger)}, {state}, last run "
            f"{when(last_run) if last_run is not None else 'never'}")


#: Claims never sent are read all at once, for every schedule: a few per schedule at most (a
#: leader claims a few occurrences of one schedule before sending them), kept until sent.
UNSENT_LOOK = MAX_LIMIT


def unsent_due(source: Schedules) -> dict[str, list[datetime]]:
    """When each occurrence goatbeat claimed and never sent was due, earliest first, by
    schedule name; read in one query for every schedule."""
    waiting = (ExecutionState.CLAIMED, ExecutionState.HELD)
    due: dict[str, list[datetime]] = {}
    for execution in source.executions(states=waiting, limit=UNSENT_LOOK):
        if not execution.manual:
            due.setdefault(execution.schedule_name, []).append(execution.due_at)
    return {name: sorted(instants) for name, instants in due.items()}


def last_run_at(schedule: Schedule, now: datetime,
                unsent: datetime | None = None) -> datetime | None:
    """The ``last_run_at`` that makes django-celery-beat run the task next when goatbeat
    would have (or at ``unsent``, an occurrence claimed and never sent): see the module's
    docstring."""
    spec = schedule.spec
    offset = spec.effective_offset()
    last = (schedule.last_occurrence_at + offset
            if schedule.last_occurrence_at is not None else None)
    every = spec.trigger.params.get("every") if spec.trigger.kind == "interval" else None
    if isinstance(every, (int, float)):
        due = unsent if unsent is not None else schedule.next_run_at
        if due is not None:
            return due - timedelta(seconds=every)
    if unsent is not None:
        # django-celery-beat runs a cron at its first match after the last run.
        return unsent - UNSENT_BEFORE
    return last if last is not None else schedule.created_at or now


def task_fields(schedule: Schedule, source: Schedules, database: str,
                now: datetime, unsent: int = 0) -> dict[str, Any]:
    """The columns of the schedule's periodic task; ``unsent`` claims it never sent are not
    counted as runs (django-celery-beat never runs a one-off that has a run)."""
    spec = schedule.spec
    fields: dict[str, Any] = {"interval": None, "crontab": None, "clocked": None,
                              "solar": None, "one_off": False}
    fields.update(trigger_fields(schedule, database))
    if spec.rotate:
        # A periodic task has one queue: its runs would all go to one cluster.
        raise Refused(f"it rotates over queues ({', '.join(spec.rotate)}), and a periodic "
                      "task sends every run to one queue")
    options = dict(spec.options)
    headers = {key: value for key, value in dict(options.pop("headers", None) or {}).items()
               if key != PERIODIC_TASK_NAME}
    expires = options.pop("expires", None)
    if expires is not None and not isinstance(expires, (int, float)):
        raise Refused(f"options.expires {expires!r} is not a number of seconds")
    for name in COLUMNS:
        fields[name] = options.pop(name, None)
    if options:
        raise Refused(f"message options django-celery-beat has no column for: "
                      f"{', '.join(sorted(options))}")
    runs = max(0, schedule.total_runs - unsent)
    ran_once = fields["one_off"] and not unsent and (runs > 0 or schedule.next_run_at is None)
    fields.update(
        task=spec.task, args=json.dumps(list(spec.args)), kwargs=json.dumps(dict(spec.kwargs)),
        headers=json.dumps(headers), expire_seconds=None if expires is None else int(expires),
        start_time=spec.start_at if spec.start_at is not None and spec.start_at > now else None,
        expires=spec.end_at, description=spec.description or "",
        enabled=bool(running(schedule) and not ran_once and schedule.paused_until is None),
        total_run_count=runs,
    )
    return fields


def running(schedule: Schedule) -> bool:
    """Whether the schedule runs in goatbeat, or did until an earlier export paused it (a
    second export writes the same as the first)."""
    return schedule.spec.enabled or schedule.paused_reason == PAUSE_NOTE


def trigger_fields(schedule: Schedule, database: str) -> dict[str, Any]:
    from django_celery_beat.models import (
        ClockedSchedule,
        CrontabSchedule,
        IntervalSchedule,
        SolarSchedule,
    )

    spec = schedule.spec
    params = spec.trigger.params
    if spec.trigger.kind == "interval":
        seconds = float(str(params["every"]))
        if seconds != int(seconds):
            raise Refused(f"an interval of {seconds}s: django-celery-beat counts whole units")
        every, period = whole_period(int(seconds))
        interval = IntervalSchedule.objects.using(database).get_or_create(
            every=every, period=period)[0]
        return {"interval": interval}
    if spec.offset is not None or spec.jitter is not None:
        raise Refused("an offset or jitter shifts a cron or one-off run, which "
                      "django-celery-beat cannot do")
    if spec.trigger.kind == "cron":
        fields = str(params["expression"]).split()
        if len(fields) != 5:
            raise Refused(f"cron {params['expression']!r} is not five fields")
        minute, hour, day_of_month, month, day_of_week = fields
        if params.get("day_or", True) and "*" not in (day_of_month, day_of_week):
            raise Refused("a cron restricting both days and matching either one (standard "
                          "cron); Celery's crontab matches both")
        crontab = CrontabSchedule.objects.using(database).get_or_create(
            minute=minute, hour=hour, day_of_month=day_of_month, month_of_year=month,
            day_of_week=day_of_week, timezone=str(params.get("timezone") or "UTC"))[0]
        return {"crontab": crontab}
    if spec.trigger.kind == "solar":
        solar = SolarSchedule.objects.using(database).get_or_create(
            event=str(params["event"]), latitude=params["latitude"],
            longitude=params["longitude"])[0]
        return {"solar": solar}
    if spec.trigger.kind == "once":
        at = datetime.fromisoformat(str(params["at"]))
        clocked = ClockedSchedule.objects.using(database).get_or_create(
            clocked_time=at.astimezone(UTC))[0]
        return {"clocked": clocked, "one_off": True}
    raise Refused(f"{describe_trigger(spec.trigger)} has no django-celery-beat form")


def whole_period(seconds: int) -> tuple[int, str]:
    """The largest of django-celery-beat's periods that divides ``seconds``."""
    for period, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds % size == 0:
            return seconds // size, period
    return seconds, "seconds"


def without_note(description: str) -> str:
    """A description without the note the import's --disable-source appended."""
    text = str(description or "")
    at = text.find(NOTE_START)
    return text if at < 0 else text[:at].rstrip()


def touch(database: str) -> None:
    """Tell a running DatabaseScheduler to reload (what django-celery-beat's save() does)."""
    from django.utils import timezone
    from django_celery_beat.models import PeriodicTasks

    PeriodicTasks.objects.using(database).update_or_create(
        ident=1, defaults={"last_update": timezone.now()})


__all__: Sequence[str] = ("Command",)
