"""The schedule commands: ``list``, ``show``, ``add``, ``edit``, ``pause``, ``resume``, ``next``
and ``remove``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click
from celery.bin.base import CeleryCommand

from goatbeat_celery import display
from goatbeat_celery.cli.bulk import bulk_wanted, run_bulk, tag_option
from goatbeat_celery.cli.context import CommandError, opened, reported
from goatbeat_celery.cli.group import goatbeat
from goatbeat_celery.cli.options import (
    InstantParam,
    json_option,
    reason_option,
    spec_changes,
    spec_options,
    trigger_choice,
)
from goatbeat_celery.cli.output import (
    emit,
    refuse_config_row,
    say,
    show_schedule,
    warn_config_source,
    warn_unknown_task,
)
from goatbeat_celery.cli.sending import message_options, options_changes
from goatbeat_celery.core.types.errors import ScheduleConflict
from goatbeat_celery.core.types.spec import ScheduleSource


@goatbeat.command(name="list", cls=CeleryCommand)
@click.option("--enabled/--disabled", "enabled", default=None,
              help="Only schedules not paused (--enabled) or paused (--disabled), a pause "
                   "with an end included.")
@click.option("--source", type=click.Choice([s.value for s in ScheduleSource]),
              help="Only schedules from beat_schedule (config) or created here or in code (api).")
@click.option("--prefix", metavar="TEXT", help="Only names starting with TEXT.")
@click.option("--set-aside", "set_aside", is_flag=True,
              help="Only schedules the leader set aside, or that cannot be read as stored.")
@click.option("--tag", "tags", multiple=True, metavar="TAG",
              help="Only schedules carrying TAG; repeat it: each one must match.")
@click.option("--wide", is_flag=True,
              help=f"Show every column whole. Otherwise the table fits the terminal (COLUMNS, "
                   f"or {display.DEFAULT_WIDTH} columns when not a terminal): the zone, last "
                   f"run, source and misfire policy are left out as needed, long values cut "
                   f"short with {display.ELLIPSIS}.")
@json_option
@click.pass_context
def list_(ctx: click.Context, enabled: bool | None, source: str | None, prefix: str | None,
          set_aside: bool, tags: tuple[str, ...], wide: bool, as_json: bool) -> None:
    """The schedules, with trigger, zone, next and last run, state, source and policy."""
    with opened(ctx) as schedules, reported():
        found = schedules.list(enabled=enabled, source=source, prefix=prefix, tags=tags)
        now = schedules.now()
    if set_aside:
        # Judged on the rows read, so a damaged row the leader has not yet seen is listed too.
        found = [s for s in found if s.set_aside]
    defaults = schedules.config.settings
    if as_json:
        emit([display.schedule_json(s, defaults, now) for s in found])
    elif not found:
        filtered = set_aside or bool(tags) or any(v is not None
                                                  for v in (enabled, source, prefix))
        click.echo("no schedules match" if filtered else "no schedules yet")
    else:
        click.echo(display.table(display.SCHEDULE_COLUMNS,
                               [display.schedule_row(s, defaults, now) for s in found],
                               width=None if wide else display.terminal_width(),
                               clipped=display.SCHEDULE_CLIPPED,
                               dropped=display.SCHEDULE_DROPPED))


@goatbeat.command(cls=CeleryCommand)
@click.argument("name")
@json_option
@click.pass_context
def show(ctx: click.Context, name: str, as_json: bool) -> None:
    """Every detail of schedule NAME."""
    with opened(ctx) as schedules, reported():
        show_schedule(schedules, schedules.get(name), as_json)


@goatbeat.command(cls=CeleryCommand)
@click.argument("name")
@click.argument("task")
@spec_options(editing=False)
@message_options(editing=False)
@reason_option
@json_option
@click.pass_context
def add(ctx: click.Context, /, name: str, task: str, paused: bool, reason: str | None,
        as_json: bool, **given: Any) -> None:
    """Store a new schedule NAME sending TASK (give one of --every, --cron or --at)."""
    trigger = trigger_choice(given, required=True)
    with opened(ctx) as schedules:
        with reported(as_options=True):
            try:
                schedule = schedules.create(name, task, enabled=not paused, **trigger,
                                            **spec_changes(given, None),
                                            **options_changes(given, None), reason=reason)
            except ScheduleConflict as exc:
                raise CommandError(f"{exc}; change it with `edit`") from exc
        warn_unknown_task(ctx, task)
        show_schedule(schedules, schedule, as_json, headline=f"added {name!r}")


@goatbeat.command(cls=CeleryCommand)
@click.argument("name")
@spec_options(editing=True)
@message_options(editing=True)
@reason_option
@json_option
@click.pass_context
def edit(ctx: click.Context, /, name: str, paused: bool | None, reason: str | None,
         as_json: bool, **given: Any) -> None:
    """Change schedule NAME: only the options given change.

    A new trigger, offset or jitter reschedules it from now; other changes keep its next run.
    """
    if paused is None and all(value is None or value == () for value in given.values()):
        raise click.UsageError("nothing to change: give at least one option (see --help)")
    with opened(ctx) as schedules:
        with reported():
            current = schedules.get(name)
        refuse_config_row(current)
        with reported(as_options=True, stored=current.damage):
            trigger = trigger_choice(given, required=False, current=current)
            changes = {**spec_changes(given, current), **options_changes(given, current)}
            enabled = None if paused is None else not paused
            schedule = schedules.update(name, enabled=enabled, **trigger, **changes,
                                        reason=reason)
        if given.get("task") is not None:
            warn_unknown_task(ctx, given["task"])
        show_schedule(schedules, schedule, as_json, headline=f"edited {name!r}")


@goatbeat.command(cls=CeleryCommand)
@click.argument("names", metavar="[NAME]...", nargs=-1)
@tag_option
@click.option("--note", metavar="TEXT", help="Why it is paused, shown with the schedule.")
@click.option("--until", type=InstantParam(), metavar="ISO",
              help="End the pause by itself at this instant: the schedule then runs from its "
                   "first occurrence at or after it.")
@reason_option
@json_option
@click.pass_context
def pause(ctx: click.Context, names: tuple[str, ...], tag: str | None, note: str | None,
          until: datetime | None, reason: str | None, as_json: bool) -> None:
    """Stop schedule NAME from running (its history stays), until resumed or --until; with
    several names or --tag, each of them (one already paused is left as it is)."""
    if bulk_wanted(names, tag):
        run_bulk(ctx, "pause", names, tag, reason, as_json, until=until, note=note)
        return
    name = names[0]
    with opened(ctx) as schedules:
        with reported():
            current = schedules.get(name)
        # The note and the end are named as typed; a damaged row's columns as stored.
        with reported(as_options=True, stored=current.damage):
            schedule = schedules.pause(name, note=note, until=until, reason=reason)
        if schedule.paused_reason is None:  # a pause with a note is one config sync keeps
            warn_config_source(schedule, "enables it again (give --note to keep it paused, "
                                         "or set its goatbeat.enabled to False)")
        # A pause of a schedule paused alike changes no row: say so, not "paused".
        headline = (f"{name!r} was already paused; nothing changed"
                    if schedule.row_version == current.row_version else f"paused {name!r}")
        show_schedule(schedules, schedule, as_json, headline=headline)


@goatbeat.command(cls=CeleryCommand)
@click.argument("names", metavar="[NAME]...", nargs=-1)
@tag_option
@reason_option
@json_option
@click.pass_context
def resume(ctx: click.Context, names: tuple[str, ...], tag: str | None, reason: str | None,
           as_json: bool) -> None:
    """Run paused schedule NAME again from its next occurrence (no backlog); with several
    names or --tag, each of them that is paused."""
    if bulk_wanted(names, tag):
        run_bulk(ctx, "resume", names, tag, reason, as_json)
        return
    name = names[0]
    with opened(ctx) as schedules:
        with reported():
            current = schedules.get(name)
            schedule = schedules.resume(name, reason=reason)
        headline = (f"{name!r} was not paused; nothing changed"
                    if schedule.row_version == current.row_version else f"resumed {name!r}")
        show_schedule(schedules, schedule, as_json, headline=headline)


@goatbeat.command(name="next", cls=CeleryCommand)
@click.argument("name")
@click.option("--count", type=click.IntRange(1, 1000), default=5, show_default=True, metavar="N",
              help="How many runs to list (at most 1000).")
@json_option
@click.pass_context
def next_(ctx: click.Context, name: str, count: int, as_json: bool) -> None:
    """When NAME's next N runs are due: after its offset or jitter, within its start, end and
    pause, no more than its max runs leave."""
    with opened(ctx) as schedules, reported(as_options=True):
        runs = schedules.next_runs(name, count)
        now = schedules.now()
    if as_json:
        emit([display.iso(instant) for instant in runs])
    elif not runs:
        say(f"{name!r} has no next run (paused, ended, or out of runs)")
    else:
        click.echo("\n".join(display.relative(instant, now) for instant in runs))


@goatbeat.command(cls=CeleryCommand)
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@reason_option
@json_option
@click.pass_context
def remove(ctx: click.Context, name: str, yes: bool, reason: str | None, as_json: bool) -> None:
    """Delete schedule NAME; its executions stay as history."""
    with opened(ctx) as schedules:
        with reported():
            schedule = schedules.get(name)
        refuse_config_row(schedule)
        if not yes:
            click.confirm(display.shown(f"Remove schedule {name!r} "
                                      f"({display.describe_trigger(schedule.spec.trigger)}, "
                                      f"{schedule.spec.task})?"), abort=True, err=True)
        with reported():
            schedules.delete(name, reason=reason)
    if as_json:
        emit({"removed": name})
    else:
        say(f"removed {name!r}")
