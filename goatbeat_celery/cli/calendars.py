"""Exclusion calendars: ``calendar add``, ``edit``, ``show``, ``list`` and ``remove``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

import click
from celery.bin.base import CeleryCommand

from goatbeat_celery import display
from goatbeat_celery.cli.context import app_command, opened, reported
from goatbeat_celery.cli.group import goatbeat
from goatbeat_celery.cli.options import json_option
from goatbeat_celery.cli.output import emit, say
from goatbeat_celery.core.rules.calendars import Calendar, parse_entries


@goatbeat.group(name="calendar")
def calendar() -> None:
    """Exclusion calendars: dates and ranges (holidays, freeze windows) on which the schedules
    observing them (add/edit --calendar NAME) do not run.

    ENTRY is a date, 2026-12-24, or a range with both ends included, 2026-12-24..2027-01-02;
    each schedule reads them as dates in its own zone (cron: its timezone; others: UTC).
    """


def _entries(words: Sequence[str], label: str) -> tuple[list[date], list[tuple[date, date]]]:
    """Typed dates and ranges, read as a stored calendar's entries are, or a usage error
    naming every bad one."""
    dates, ranges, problems = parse_entries(list(words), label)
    if problems:
        raise click.UsageError(display.shown("; ".join(map(str, problems))))
    return list(dates), list(ranges)


def show_calendar(calendar: Calendar, as_json: bool, headline: str | None = None,
                  observed_by: Sequence[str] | None = None) -> None:
    if as_json:
        document = display.calendar_json(calendar)
        if observed_by is not None:
            document["observed_by"] = list(observed_by)
        emit(document)
        return
    if headline:
        say(headline)
    click.echo(display.fields(display.calendar_fields(calendar, observed_by)))


@calendar.command(name="add", cls=CeleryCommand)
@click.argument("name")
@click.argument("entries", nargs=-1, metavar="[ENTRY]...")
@click.option("--description", metavar="TEXT", help="What the calendar is for.")
@json_option
@click.pass_context
def calendar_add(ctx: click.Context, name: str, entries: tuple[str, ...],
                 description: str | None, as_json: bool) -> None:
    """Store a new calendar NAME excluding each ENTRY."""
    dates, ranges = _entries(entries, "ENTRY")
    with opened(ctx) as schedules, reported():
        created = schedules.create_calendar(name, dates=dates, ranges=ranges,
                                            description=description)
    show_calendar(created, as_json, headline=f"added calendar {name!r}")


@calendar.command(name="edit", cls=CeleryCommand)
@click.argument("name")
@click.option("--add", "added", multiple=True, metavar="ENTRY",
              help="A date or range to exclude; repeat for several.")
@click.option("--remove", "removed", multiple=True, metavar="ENTRY",
              help="A date or range to exclude no more, as listed by show; repeat for several.")
@click.option("--clear", is_flag=True, help="Remove every entry first (then --add).")
@click.option("--description", metavar="TEXT", help="What it is for (\"\" removes it).")
@json_option
@click.pass_context
def calendar_edit(ctx: click.Context, name: str, added: tuple[str, ...],
                  removed: tuple[str, ...], clear: bool, description: str | None,
                  as_json: bool) -> None:
    """Change calendar NAME; the leader applies it the next time it plans."""
    if not (added or removed or clear or description is not None):
        raise click.UsageError("nothing to change: give --add, --remove, --clear or "
                               "--description")
    add_dates, add_ranges = _entries(added, "--add")
    drop_dates, drop_ranges = _entries(removed, "--remove")
    with opened(ctx) as schedules, reported():
        current = schedules.get_calendar(name)
        dates = [] if clear else list(current.dates)
        ranges = [] if clear else list(current.ranges)
        absent = []
        for word in removed:
            day, span = _entries([word], "--remove")
            if (day and day[0] not in dates) or (span and span[0] not in ranges):
                absent.append(word)
        if absent:
            raise click.UsageError(display.shown(
                f"--remove: {', '.join(absent)} not in calendar {name!r}; "
                f"`{app_command('calendar show ' + name)}` lists its entries"))
        dates = [d for d in dates if d not in drop_dates] + add_dates
        ranges = [r for r in ranges if r not in drop_ranges] + add_ranges
        kept_description: Any = current.description
        if description is not None:
            kept_description = description or None
        edited = schedules.update_calendar(name, dates=dates, ranges=ranges,
                                           description=kept_description,
                                           expected_version=current.version)
    show_calendar(edited, as_json, headline=f"edited calendar {name!r}")


@calendar.command(name="show", cls=CeleryCommand)
@click.argument("name")
@json_option
@click.pass_context
def calendar_show(ctx: click.Context, name: str, as_json: bool) -> None:
    """Every date and range of calendar NAME, and the schedules observing it."""
    with opened(ctx) as schedules, reported():
        found = schedules.get_calendar(name)
        observed_by = schedules.observing(name)
    show_calendar(found, as_json, observed_by=observed_by)


@calendar.command(name="list", cls=CeleryCommand)
@json_option
@click.pass_context
def calendar_list(ctx: click.Context, as_json: bool) -> None:
    """Every calendar, by name."""
    with opened(ctx) as schedules, reported():
        found = schedules.list_calendars()
    if as_json:
        emit([display.calendar_json(c) for c in found])
    elif not found:
        say(f"no calendars; add one with `{app_command('calendar add NAME 2026-12-24')}`")
    else:
        click.echo(display.table(("NAME", "EXCLUDED", "DESCRIPTION"),
                               [display.calendar_row(c) for c in found],
                               width=display.terminal_width()))


@calendar.command(name="remove", cls=CeleryCommand)
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.pass_context
def calendar_remove(ctx: click.Context, name: str, yes: bool, as_json: bool) -> None:
    """Delete calendar NAME; refused while schedules observe it (edit them first)."""
    with opened(ctx) as schedules:
        with reported():
            schedules.get_calendar(name)
        if not yes:
            click.confirm(display.shown(f"Remove calendar {name!r}?"), abort=True, err=True)
        with reported():
            schedules.delete_calendar(name)
    if as_json:
        emit({"removed": name})
    else:
        say(f"removed calendar {name!r}")
