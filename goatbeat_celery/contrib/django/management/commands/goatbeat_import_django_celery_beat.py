"""``manage.py goatbeat_import_django_celery_beat [--dry-run]``: copy django-celery-beat's
periodic tasks into goatbeat's database through :meth:`Schedules.create
<goatbeat_celery.api.Schedules.create>`.

Every periodic task gets one line: created (or, with ``--dry-run``, would be created after the
same validation, on a throwaway in-memory store), skipped (its name is already in goatbeat, it
is an entry of ``beat_schedule``, which django-celery-beat's scheduler stores as a periodic
task and goatbeat syncs from the config, or it is ``celery.backend_cleanup``, which goatbeat
adds itself), or refused with the reason (JSON that does not parse, a schedule goatbeat
finds invalid (a solar one without the ephem package, which Celery's solar needs too), a row
Django cannot read or Python cannot represent: a zone the time zone field rejects, an
interval period edited by hand, an interval beyond ``timedelta``). A bad row is refused alone:
the others are copied. Nothing is left out without a line saying so, the summary lists the
refused tasks again with their reasons, and running it again skips what it copied before. When
anything was refused, the command ends with a CommandError (exit status 1) after its report,
having created the rest, so that a script notices; a dry run too, as the real run would.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from celery.utils.time import weekday, yearmonth
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, DataError

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.types.errors import (
    ConfigurationError,
    GoatbeatError,
    ScheduleConflict,
    ScheduleNotFound,
    StoreError,
    failure_reason,
)
from goatbeat_celery.core.types.execution import idempotency_key
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import TriggerSpec
from goatbeat_celery.cron import CronTrigger
from goatbeat_celery.display import describe_trigger, human_duration, when
from goatbeat_celery.solar import SolarTrigger
from goatbeat_celery.store import open_store

#: Added by Celery to every beat; goatbeat adds it itself.
BACKEND_CLEANUP = "celery.backend_cleanup"
#: The header django-celery-beat puts on every message it sends (the periodic task's name).
PERIODIC_TASK_NAME = "periodic_task_name"
_NAME = re.compile(r"[A-Za-z]+")
#: IntervalSchedule.period's choices, each a keyword of timedelta.
PERIODS = ("days", "hours", "minutes", "seconds", "microseconds")
#: Periodic tasks read from the database at once; a batch with a row Django cannot read is
#: read again row by row, so that the row is refused alone.
READ_BATCH = 500
#: What reading or copying one row can raise, from its own data (a value the driver or a
#: field's converter cannot read, Python's limits, goatbeat's validation); any other database
#: or store failure is not among them and ends the command.
ROW_ERRORS = (DataError, ValidationError, ConfigurationError, ValueError, TypeError,
              ArithmeticError, LookupError, AttributeError)


class Refused(Exception):
    """A periodic task goatbeat cannot reproduce; the message says why."""


@dataclass(frozen=True)
class Crontab:
    """A CrontabSchedule's fields as stored, its zone as text (the model's time zone field
    raises on a zone it does not know, before goatbeat could say which)."""

    minute: str
    hour: str
    day_of_month: str
    month_of_year: str
    day_of_week: str
    timezone: str


@dataclass(frozen=True)
class Row:
    """One periodic task as read: the model (its interval, solar and clocked schedules
    loaded) and its crontab, or why Django could not read it."""

    name: str
    task: Any = None
    crontab: Crontab | None = None
    unreadable: str | None = None


@dataclass
class Report:
    created: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    #: (name, reason) of each refused task, in the order of the lines.
    refused: list[tuple[str, str]] = field(default_factory=list)
    #: The periodic tasks goatbeat runs from now on (created, already there, or entries of
    #: beat_schedule), which --disable-source disables.
    taken_over: list[str] = field(default_factory=list)


class Command(BaseCommand):
    help = ("Copy django-celery-beat's periodic tasks into goatbeat's database, one line per "
            "task saying what was done.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true",
                            help="validate and report every task, write nothing")
        parser.add_argument("--database", default="default",
                            help="the Django database holding django-celery-beat's tables")
        parser.add_argument("--disable-source", action="store_true",
                            help="disable, in one transaction, the periodic tasks goatbeat "
                                 "now runs, each with a note in its description")

    def handle(self, *args: Any, **options: Any) -> None:
        from django.apps import apps

        if not apps.is_installed("django_celery_beat"):
            raise CommandError("django_celery_beat is not in INSTALLED_APPS: there is nothing "
                               "to import from")
        from goatbeat_celery.contrib.django import integration

        dry_run = bool(options["dry_run"])
        # django-celery-beat's scheduler stores the entries of beat_schedule as periodic tasks
        # too; goatbeat syncs those from the config itself, as config schedules.
        config_names = frozenset(integration.celery_app().conf.beat_schedule or {})
        database = options["database"]
        try:
            rows = read_rows(database)
            with integration.schedules() as target:
                report = self.copy(rows, target, dry_run=dry_run, config_names=config_names)
            if options["disable_source"]:
                self.disable_source(report, database, dry_run=dry_run)
        except GoatbeatError as exc:
            raise CommandError(str(exc)) from exc
        except DatabaseError as exc:
            raise CommandError(f"cannot read django-celery-beat's tables from database "
                               f"{options['database']!r}: {exc}") from exc
        done = "would be created" if dry_run else "created"
        self.stdout.write(f"{len(report.created)} {done}, {len(report.skipped)} skipped, "
                          f"{len(report.refused)} refused"
                          + (" (dry run: nothing written)" if dry_run else ""))
        for name, reason in report.refused:
            self.stdout.write(self.style.WARNING(f"  refused {name!r}: {reason}"))
        if report.refused:
            self.stdout.flush()  # the report first, then the error on stderr
            noun = "task was" if len(report.refused) == 1 else "tasks were"
            raise CommandError(f"{len(report.refused)} periodic {noun} refused: "
                               + ", ".join(repr(name) for name, _ in report.refused))

    def disable_source(self, report: Report, database: str, *, dry_run: bool) -> None:
        """Disable the periodic tasks goatbeat now runs, in one transaction of django-celery-
        beat's database, and tell a running DatabaseScheduler to reload them."""
        from django.db import transaction
        from django.utils import timezone
        from django_celery_beat.models import PeriodicTask, PeriodicTasks

        with transaction.atomic(using=database):
            tasks = list(PeriodicTask.objects.using(database).select_for_update()
                         .filter(name__in=report.taken_over, enabled=True).order_by("name")
                         .values_list("pk", "name", "description"))
            if not dry_run:
                for pk, name, description in tasks:
                    text = str(description or "").rstrip()
                    PeriodicTask.objects.using(database).filter(pk=pk).update(
                        enabled=False, description=(text + "\n\n" if text else "")
                        + disabled_note(name, datetime.now(UTC)))
                if tasks:
                    # What django-celery-beat's own save() signals do: its scheduler reloads.
                    PeriodicTasks.objects.using(database).update_or_create(
                        ident=1, defaults={"last_update": timezone.now()})
        verb = "would disable" if dry_run else "disabled"
        noun = "periodic task" if len(tasks) == 1 else "periodic tasks"
        self.stdout.write(f"{verb} {len(tasks)} {noun} in django-celery-beat, which goatbeat "
                          "runs now" + (f": {', '.join(repr(name) for _, name, _ in tasks)}"
                                        if tasks else ""))

    def copy(self, rows: list[Row], target: Schedules, *, dry_run: bool,
             config_names: frozenset[str] = frozenset()) -> Report:
        report = Report()
        # A dry run validates each task as create() would, on a store that is thrown away.
        writer = (Schedules(open_store("memory://"), config=target.config,
                            triggers=target.triggers,
                            default_timezone=target.default_timezone)
                  if dry_run else target)
        try:
            for row in rows:
                self.copy_one(row, target, writer, report, dry_run=dry_run,
                              config_names=config_names)
        finally:
            if writer is not target:
                writer.close()
        return report

    def copy_one(self, row: Row, target: Schedules, writer: Schedules, report: Report, *,
                 dry_run: bool, config_names: frozenset[str] = frozenset()) -> None:
        name, task = row.name, row.task
        if row.unreadable is not None:
            self.refuse(report, name, row.unreadable)
            return
        if task.task == BACKEND_CLEANUP:
            report.taken_over.append(name)
            self.line(report.skipped, "skipped", name, "celery.backend_cleanup is added by "
                      "goatbeat itself")
            return
        if name in config_names:
            report.taken_over.append(name)
            self.line(report.skipped, "skipped", name, "an entry of beat_schedule, which "
                      "goatbeat's beat syncs from the config itself")
            return
        try:
            target.get(name)
        except ScheduleNotFound:
            pass
        else:
            report.taken_over.append(name)
            self.line(report.skipped, "skipped", name, "a schedule of that name is already "
                      "in goatbeat")
            return
        now = writer.now()
        try:
            arguments = create_arguments(task, row.crontab, now)
            if "at" in arguments and arguments["at"] <= now:
                # A one-off whose time has passed has nothing left to run: not copied, and
                # not an error either.
                ran = " (django-celery-beat ran it)" if task.total_run_count else ""
                self.line(report.skipped, "skipped", name,
                          f"a one-off whose time has passed{ran}: nothing left to run")
                return
            schedule = writer.create(name, str(task.task), **arguments)
        except Refused as exc:
            self.refuse(report, name, str(exc))
            return
        except ScheduleConflict:
            report.taken_over.append(name)
            self.line(report.skipped, "skipped", name, "a schedule of that name is already "
                      "in goatbeat")
            return
        except StoreError:
            raise
        except ROW_ERRORS as exc:
            # goatbeat's validation names the field; anything else is a value nothing foresaw.
            reason = failure_reason(exc)
            self.refuse(report, name, reason if isinstance(exc, ConfigurationError)
                        else f"cannot be copied: {reason}")
            return
        phase = None
        if "every" in arguments:
            anchor, what = interval_phase(task, now)
            phase = f"phase kept from {what} at {when(anchor)}" + (
                " (it never ran)" if what == "its last change" else "")
        detail = describe(arguments, phase)
        if arguments.get("end_at") is not None and arguments["end_at"] <= now:
            detail += ", already past: it will not run"
        if not schedule.spec.enabled:
            detail += ", paused (disabled in django-celery-beat)"
        elif phase is not None and schedule.next_run_at is not None:
            detail += f", next run {when(schedule.next_run_at)}" + task_id_note(schedule)
        report.taken_over.append(name)
        self.line(report.created, "would create" if dry_run else "created", name, detail)

    def line(self, bucket: list[str], verb: str, name: str, detail: str) -> None:
        bucket.append(name)
        self.stdout.write(f"{verb} {name!r}: {detail}")

    def refuse(self, report: Report, name: str, reason: str) -> None:
        report.refused.append((name, reason))
        self.stdout.write(self.style.WARNING(f"refused {name!r}: {reason}"))


#: The start of the note --disable-source appends to a task's description; the export finds it.
NOTE_START = "Disabled by goatbeat_import_django_celery_beat"


def disabled_note(name: str, now: datetime) -> str:
    return (f"{NOTE_START} on {now.strftime('%Y-%m-%d %H:%M')} UTC: goatbeat runs it now, as "
            f"schedule {name!r}. goatbeat_export_django_celery_beat enables it again.")


def read_rows(database: str) -> list[Row]:
    """Every periodic task, by name, each readable one with its schedules; a row Django
    cannot read (a field's converter raises) is a Row saying why, and the others are read."""
    from django.db.models import CharField
    from django.db.models.functions import Cast
    from django_celery_beat.models import CrontabSchedule, PeriodicTask

    crontabs = {
        values["id"]: Crontab(values["minute"], values["hour"], values["day_of_month"],
                              values["month_of_year"], values["day_of_week"], values["zone"])
        for values in CrontabSchedule.objects.using(database).values(
            "id", "minute", "hour", "day_of_month", "month_of_year", "day_of_week",
            zone=Cast("timezone", output_field=CharField()))}
    # The crontab is read above, as text: the model's zone field raises on an unknown zone.
    tasks = PeriodicTask.objects.using(database).select_related("interval", "solar", "clocked")
    names = list(PeriodicTask.objects.using(database).order_by("name").values_list("pk", "name"))
    rows: list[Row] = []
    for start in range(0, len(names), READ_BATCH):
        batch = names[start:start + READ_BATCH]
        try:
            read: dict[Any, Any] = {task.pk: task for task in
                                    tasks.filter(pk__in=[pk for pk, _ in batch])}
        except ROW_ERRORS:
            read = {}
            for pk, _ in batch:
                try:
                    read[pk] = tasks.get(pk=pk)
                except ROW_ERRORS as exc:
                    read[pk] = exc
        for pk, name in batch:
            found = read.get(pk)
            if found is None:
                continue  # deleted since the names were read
            if isinstance(found, Exception):
                rows.append(Row(str(name), unreadable=f"cannot be read: {failure_reason(found)}"))
            else:
                rows.append(Row(str(name), found, crontabs.get(found.crontab_id)))
    return rows


def create_arguments(task: Any, crontab: Crontab | None, now: datetime) -> dict[str, Any]:
    """The keywords of Schedules.create for one PeriodicTask; Refused when goatbeat has none."""
    start = aware(task.start_time) if task.start_time is not None else None
    arguments: dict[str, Any] = {
        **trigger_arguments(task, crontab),
        "args": tuple(json_field(task, "args", list, "[]")),
        "kwargs": json_field(task, "kwargs", dict, "{}"),
        "options": message_options(task),
        "enabled": bool(task.enabled),
    }
    if start is not None and start > now and not task.one_off:
        arguments["start_at"] = start
    if "every" in arguments:
        # django-celery-beat runs an interval task `every` after its last run: goatbeat's grid
        # is shifted to pass through that phase (an offset is always under the interval).
        shift = grid_offset(interval_phase(task, now)[0], arguments["every"], now)
        if shift:
            arguments["offset"] = shift
    if task.expires is not None:
        # django-celery-beat sends nothing after it (and disables the task): an end date.
        arguments["end_at"] = aware(task.expires)
    text = str(task.description or "").strip()
    if text:
        arguments["description"] = text
    return arguments


def trigger_arguments(task: Any, crontab: Crontab | None) -> dict[str, Any]:
    """every=, cron= (Celery's day-of-month AND day-of-week), solar= (the same event at the
    same place) or at=; a one-off interval, crontab or solar event becomes at= the instant
    django-celery-beat would run it (:func:`one_off_at`)."""
    if task.clocked_id is not None:
        return {"at": aware(task.clocked.clocked_time)}
    if task.solar_id is not None:
        return solar_arguments(task)
    if task.interval_id is not None:
        every = interval(str(task.interval.period), int(task.interval.every))
        if task.one_off:
            return {"at": one_off_at(task, lambda after: after + every)}
        return {"every": every}
    if crontab is not None:
        tab = crontab
        expression = " ".join(str(part).replace(" ", "") for part in (
            tab.minute, tab.hour, tab.day_of_month, celery_names(tab.month_of_year, "month"),
            celery_names(tab.day_of_week, "day")))
        zone = str(tab.timezone)
        if not task.one_off:
            return {"cron": expression, "timezone": zone, "day_or": False}
        try:
            trigger = CronTrigger(expression, zone, day_or=False)
        except ConfigurationError as exc:
            raise Refused("; ".join(exc.problems)) from exc
        first = one_off_at(task, trigger.next_after)
        if first is None:
            raise Refused(f"one-off crontab {expression!r} never occurs again")
        return {"at": first}
    raise Refused("it has no schedule (no interval, crontab, clocked or solar)")


def solar_arguments(task: Any) -> dict[str, Any]:
    """solar= for a solar periodic task (its degrees are decimals in django-celery-beat), or
    at= its next event for a one-off; Refused for what goatbeat's solar trigger refuses."""
    solar = task.solar
    params = {"event": str(solar.event), "latitude": float(solar.latitude),
              "longitude": float(solar.longitude)}
    if not task.one_off:
        return {"solar": params}
    try:
        trigger = SolarTrigger.from_params(params)
    except ConfigurationError as exc:
        raise Refused("; ".join(exc.problems)) from exc
    first = one_off_at(task, trigger.next_after)
    if first is None:
        raise Refused(f"one-off {solar.event} never occurs again")
    return {"at": first}


def interval_phase(task: Any, now: datetime) -> tuple[datetime, str]:
    """The instant an interval task's runs are counted from in django-celery-beat, and what
    it is: a ``start_time`` still to come (its first run), else its last run (the next is
    ``every`` after it), else a ``start_time`` already past, else its last change (which
    django-celery-beat takes for its last run when it never ran)."""
    start = aware(task.start_time) if task.start_time is not None else None
    if start is not None and start > now:
        return start, "its start_time"
    if task.last_run_at is not None:
        return aware(task.last_run_at), "its last run"
    if start is not None:
        return start, "its start_time"
    return aware(task.date_changed), "its last change"


def grid_offset(anchor: datetime, every: timedelta, now: datetime) -> timedelta | None:
    """The offset that puts ``anchor`` on goatbeat's grid of ``every``, to the second: rounded
    up (django-celery-beat runs a task at its first tick after it is due, a fraction of a
    second late), but down when rounding up would make a grid point of the last second before
    ``now`` come after it, and run at once what django-celery-beat runs ``every`` later."""
    exact = (anchor - datetime(1970, 1, 1, tzinfo=UTC)) % every
    up = math.ceil(exact.total_seconds())
    late = anchor + (timedelta(seconds=up) - exact) > now
    shift = timedelta(seconds=math.floor(exact.total_seconds()) if late else up) % every
    return shift or None


def interval(period: str, every: int) -> timedelta:
    """An IntervalSchedule as a timedelta; Refused for a period that is not one of its choices
    or a length Python cannot hold."""
    if period not in PERIODS:
        raise Refused(f"interval period {period!r} is not one of {', '.join(PERIODS)}")
    try:
        return timedelta(**{period: every})
    except OverflowError as exc:
        raise Refused(f"an interval of {every} {period} is longer than a Python timedelta "
                      f"holds (999999999 days)") from exc


def one_off_at(task: Any, next_after: Callable[[datetime], datetime | None]) -> datetime | None:
    """When django-celery-beat runs a one-off task: at its ``start_time`` when it has not run
    (it then dates the last run 30 years back, so that the task is due at once), else at the
    schedule's next occurrence after its last run, or after its last change when it never
    ran. Once it has run, its last run: already past, it is copied to run no more."""
    if task.total_run_count and task.last_run_at is not None:
        return aware(task.last_run_at)
    if task.start_time is not None and task.last_run_at is None:
        return aware(task.start_time)
    return next_after(aware(task.last_run_at or task.date_changed))


def celery_names(field: str, kind: str) -> str:
    """A crontab field with its names read as Celery's crontab reads them: by their first three
    letters, as a month's name first, then a weekday's (``monday`` is ``mon``). The field's own
    names are written as goatbeat's cron takes them (``mon``, ``jan``); a name of the other
    kind, which Celery reads as its number, as that number. What Celery cannot read is left
    for goatbeat's validation to refuse."""

    def replace(match: re.Match[str]) -> str:
        name = match.group()
        for reader, own in ((yearmonth, "month"), (weekday, "day")):
            try:
                number = reader(name)
            except KeyError:
                continue
            return name[:3].lower() if own == kind else str(number)
        return name

    return _NAME.sub(replace, str(field))


def message_options(task: Any) -> dict[str, Any]:
    """queue, exchange, routing_key, priority, expires and headers, as django-celery-beat's
    scheduler sends them: its headers with ``periodic_task_name`` set to the task's name, and
    ``expire_seconds`` as expires only without an absolute ``expires`` (which it sends instead,
    and :func:`create_arguments` makes the schedule's end)."""
    found: dict[str, Any] = {
        "queue": task.queue or None, "exchange": task.exchange or None,
        "routing_key": task.routing_key or None, "priority": task.priority,
        "expires": task.expire_seconds if task.expires is None else None,
        "headers": {**json_field(task, "headers", dict, "{}"),
                    PERIODIC_TASK_NAME: str(task.name)},
    }
    return {key: value for key, value in found.items() if value is not None}


def json_field(task: Any, name: str, kind: type[Any], empty: str) -> Any:
    text = getattr(task, name, None) or empty
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise Refused(f"{name}: {text!r} is not JSON ({exc})") from exc
    if not isinstance(value, kind):
        raise Refused(f"{name}: expected a JSON {'list' if kind is list else 'object'}, got "
                      f"{text!r}")
    return value


def aware(value: datetime) -> datetime:
    """A datetime from Django: naive ones (USE_TZ = False) are in Django's zone."""
    from django.utils import timezone

    return value if timezone.is_aware(value) else timezone.make_aware(value)


def task_id_note(schedule: Schedule) -> str:
    """What the task id of a shifted interval's next run is: the key names the grid point,
    the offset before the run (docs/concepts.md), so that Flower and the result backend show
    an instant earlier than the run was sent; said here, once, as it surprises."""
    occurrence, due = schedule.next_occurrence_at, schedule.next_run_at
    if occurrence is None or due is None or occurrence == due:
        return ""
    return (f" (task id {idempotency_key(schedule.name, occurrence)!r}: the grid point "
            f"{human_duration(due - occurrence)} before it)")


def describe(arguments: dict[str, Any], phase: str | None = None) -> str:
    if "every" in arguments:
        text = f"every {human_duration(arguments['every'])}, {phase}"
    elif "cron" in arguments:
        text = (f"cron {arguments['cron']!r} in {arguments['timezone']} (day of month and day "
                "of week both matched, as Celery's crontab)")
    elif "solar" in arguments:
        text = describe_trigger(TriggerSpec(kind="solar", params=arguments["solar"]))
    else:
        text = f"once at {when(arguments['at'])}"
    # Every instant as goatbeat's other faces print it (display.when): UTC, to the second.
    if "start_at" in arguments:
        text += f", from {when(arguments['start_at'])}"
    if "end_at" in arguments:
        text += f", until {when(arguments['end_at'])}"
    # Every schedule carries the periodic_task_name header: the line shows what is particular.
    options = dict(arguments["options"])
    headers = {key: value for key, value in options.pop("headers", {}).items()
               if key != PERIODIC_TASK_NAME}
    if headers:
        options["headers"] = headers
    if options:
        text += f", options {json.dumps(options, sort_keys=True)}"
    if "description" in arguments:
        text += ", with its description"
    return text
