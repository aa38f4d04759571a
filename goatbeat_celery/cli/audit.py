"""Who changed what: ``audit``; and what config sync would change: ``sync --plan``."""

from __future__ import annotations

import click
from celery.bin.base import CeleryCommand

from goatbeat_celery import display
from goatbeat_celery.cli.context import celery_app, masked_url, opened, reported
from goatbeat_celery.cli.group import goatbeat
from goatbeat_celery.cli.options import json_option, limit_option, reason_option
from goatbeat_celery.cli.output import emit, refuse_config_row, say, warn
from goatbeat_celery.core.types.audit import AuditAction

#: ``sync --plan`` exits with this status when config sync would change the database (0 when
#: it would change nothing), as ``terraform plan -detailed-exitcode`` does.
EXIT_CHANGES = 2


@goatbeat.command(cls=CeleryCommand)
@click.argument("name", required=False)
@limit_option(20, "How many entries, newest first.")
@click.option("--before", "before_id", type=click.IntRange(min=1), metavar="ID",
              help="Only the entries older than entry ID (the next page).")
@json_option
@click.pass_context
def audit(ctx: click.Context, name: str | None, limit: int, before_id: int | None,
          as_json: bool) -> None:
    """The changes made to schedule NAME (or to every schedule), newest first: when, what,
    who (a token's name, os:<user>, django:<username>, config) and why, with each changed
    field before and after. A deleted schedule's entries stay until goatbeat_retention."""
    with opened(ctx) as schedules, reported():
        entries = schedules.audit(name, limit=limit, before_id=before_id)
    if as_json:
        emit([display.audit_json(entry) for entry in entries])
        return
    if not entries:
        say("no changes recorded" + ("" if name is None else f" for {name!r}"))
        return
    columns: tuple[str, ...] = display.AUDIT_COLUMNS
    rows: list[tuple[str, ...]] = [display.audit_row(entry) for entry in entries]
    if name is None:
        columns = ("SCHEDULE", *columns)
        rows = [(entry.schedule_name, *row) for entry, row in zip(entries, rows, strict=True)]
    click.echo(display.table(columns, rows, width=display.terminal_width(),
                             clipped=display.AUDIT_CLIPPED))
    if len(entries) == limit:
        say(f"older entries: --before {entries[-1].id}")


@goatbeat.command(cls=CeleryCommand)
@click.argument("entry_id", type=click.IntRange(min=1), metavar="AUDIT_ID")
@reason_option
@json_option
@click.pass_context
def revert(ctx: click.Context, entry_id: int, reason: str | None, as_json: bool) -> None:
    """Undo the edit recorded as audit entry AUDIT_ID (`audit NAME --json` gives the ids):
    each field it changed set back to its value before, as one edit recorded as a revert.
    Refused when the schedule changed since in any of those fields."""
    with opened(ctx) as schedules, reported():
        entry = schedules.audit_entry(entry_id)
        refuse_config_row(schedules.get(entry.schedule_name))
        reverted = schedules.revert(entry_id, reason=reason)
        now = schedules.now()
    if as_json:
        emit(display.schedule_json(reverted, schedules.config.settings, now))
        return
    say(f"reverted entry {entry_id} of {entry.schedule_name!r}: "
        + display.audit_changes_text({key: (after, before) for key, (before, after)
                                      in entry.changes.items()}))


@goatbeat.command(cls=CeleryCommand)
@click.option("--plan", is_flag=True,
              help="Print what config sync would change; change nothing. Exit status 0: no "
                   f"change, {EXIT_CHANGES}: changes.")
@json_option
@click.pass_context
def sync(ctx: click.Context, plan: bool, as_json: bool) -> None:
    """What the app's beat_schedule would change in the database: the schedules config sync
    would create (+), edit (~), disable (-, their entry is gone) and, with goatbeat_config_prune,
    delete (x). Beat applies it when a replica becomes leader."""
    if not plan:
        raise click.UsageError("beat applies beat_schedule when a replica becomes leader; "
                               "give --plan to see what that would change")
    from goatbeat_celery import config as config_module

    app = celery_app(ctx)
    with reported():
        loaded = config_module.load(app)
        specs = config_module.synced_schedules(app, loaded)
    with opened(ctx) as schedules, reported():
        found = schedules.config_plan(specs)
        where = masked_url(schedules)
    if as_json:
        emit(found.to_json())
    else:
        for line_name, note in found.changes:
            say(display.plan_line(line_name, note))
        counts = {action: sum(note.action is action for _, note in found.changes)
                  for action in display.PLAN_MARKS}
        if found.changes:
            said = ", ".join(f"{count} to {_VERB[action]}" for action, count in counts.items()
                             if count)
            count = len(found.changes)
            say(f"{count} change{'' if count == 1 else 's'} to {where} ({said}), "
                f"{len(found.unchanged)} unchanged")
        else:
            say(f"no changes to {where}: {len(found.unchanged)} unchanged")
    for conflict in found.conflicts:
        warn(f"config entry {conflict!r} is left alone: a schedule of that name was created "
             "through the API (config sync never touches those)")
    if found.changes:
        ctx.exit(EXIT_CHANGES)


_VERB = {AuditAction.CREATE: "create", AuditAction.EDIT: "edit",
         AuditAction.DISABLE: "disable", AuditAction.DELETE: "delete"}
