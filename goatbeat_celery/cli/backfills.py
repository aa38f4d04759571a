"""Backfills of a past range: ``backfill``, ``backfills`` and ``backfill-cancel``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import click
from celery.bin.base import CeleryCommand

from goatbeat_celery import display
from goatbeat_celery.cli.context import app_command, opened, reported, with_options
from goatbeat_celery.cli.group import goatbeat
from goatbeat_celery.cli.options import InstantParam, json_option, limit_option, reason_option
from goatbeat_celery.cli.output import emit, say, warn
from goatbeat_celery.core.rules.backfill import MAX_PER_TICK, BackfillMode
from goatbeat_celery.core.types.errors import ConfigurationError


@goatbeat.command(cls=CeleryCommand)
@click.argument("name")
@click.option("--from", "start", type=InstantParam(), required=True, metavar="ISO",
              help="The first instant of the range (with its zone).")
@click.option("--to", "end", type=InstantParam(), required=True, metavar="ISO",
              help="The last instant of the range, not in the future.")
@click.option("--mode", type=click.Choice([m.value for m in BackfillMode]),
              default=BackfillMode.MISSING.value, show_default=True,
              help="missing: occurrences with no execution; failed: those that failed, were "
                   "lost or never sent; all: every one.")
@click.option("--newest-first", is_flag=True, help="Run the end of the range first.")
@click.option("--per-tick", type=click.IntRange(min=1, max=MAX_PER_TICK), metavar="N",
              help="Occurrences the leader claims a tick (default: goatbeat_backfill_per_tick).")
@click.option("--dry-run", is_flag=True, help="List what would run; store nothing.")
@reason_option
@json_option
@click.pass_context
def backfill(ctx: click.Context, name: str, start: datetime, end: datetime, mode: str,
             newest_first: bool, per_tick: int | None, dry_run: bool, reason: str | None,
             as_json: bool) -> None:
    """Run NAME's occurrences between --from and --to that --mode selects, without moving its
    next run; the leader sends them after the live schedules, a few each tick."""
    with opened(ctx) as schedules, reported(), _backfill_options():
        if dry_run:
            preview = schedules.backfill(name, start, end, mode=mode, newest_first=newest_first,
                                         per_tick=per_tick, dry_run=True)
        else:
            created = schedules.backfill(name, start, end, mode=mode,
                                         newest_first=newest_first, per_tick=per_tick,
                                         reason=reason)
            # The leader of the schedule's shard runs its backfills.
            lease_name = schedules.lease_name(name)
            info = schedules.lease(name)
            if info is None or not info.held:
                warn(f"no replica holds lease {lease_name!r} right now: the backfill runs "
                     "when one becomes leader")
    if dry_run:
        if as_json:
            emit(display.backfill_preview_json(preview))
            return
        say(f"{len(preview.runs)} of {preview.total} occurrences of {name!r} would run "
            f"(mode {preview.mode.value})")
        if preview.runs:
            click.echo(display.table(display.PREVIEW_COLUMNS,
                                     display.backfill_preview_rows(preview)))
        return
    if as_json:
        emit(display.backfill_json(created))
    else:
        say(f"backfill {created.id} of {name!r} queued: {created.total} occurrences to look "
            f"at (mode {created.mode.value}); `{app_command('backfills')}` shows its progress")


#: Fields of a backfill request → the options of ``backfill`` that give them.
_BACKFILL_OPTION = {"start": "--from", "end": "--to", "mode": "--mode",
                    "per_tick": "--per-tick", "range": "--from/--to", "reason": "--reason"}


@contextmanager
def _backfill_options() -> Iterator[None]:
    """A refused backfill's problems, each named by the option that gave the field."""
    try:
        yield
    except ConfigurationError as exc:
        if exc.subject != "backfill":
            raise
        raise ConfigurationError([with_options(problem, _BACKFILL_OPTION)
                                  for problem in exc.details], subject="backfill") from exc


@goatbeat.command(cls=CeleryCommand)
@click.option("--schedule", "name", metavar="NAME", help="Only the backfills of NAME.")
@click.option("--active/--finished", "active", default=None,
              help="Only active backfills, or only finished ones (done, cancelled, failed).")
@limit_option(50, "How many, newest first.")
@json_option
@click.pass_context
def backfills(ctx: click.Context, name: str | None, active: bool | None, limit: int,
              as_json: bool) -> None:
    """Backfills and their progress, newest first."""
    with opened(ctx) as schedules, reported():
        found = schedules.backfills(name=name, active=active, limit=limit)
    if as_json:
        emit([display.backfill_json(b) for b in found])
    elif not found:
        say("no backfills")
    else:
        click.echo(display.table(display.BACKFILL_COLUMNS,
                                 [display.backfill_row(b) for b in found]))
        for failed in (b for b in found if b.error is not None):
            say(f"backfill {failed.id}: {failed.error}")


@goatbeat.command(name="backfill-cancel", cls=CeleryCommand)
@click.argument("backfill_id", type=click.IntRange(min=1), metavar="ID")
@reason_option
@json_option
@click.pass_context
def backfill_cancel(ctx: click.Context, backfill_id: int, reason: str | None,
                    as_json: bool) -> None:
    """Stop backfill ID: nothing more is claimed for it; what it claimed is still sent."""
    with opened(ctx) as schedules, reported():
        cancelled = schedules.cancel_backfill(backfill_id, reason=reason)
    if as_json:
        emit(display.backfill_json(cancelled))
    else:
        say(f"backfill {cancelled.id} is {cancelled.state.value} "
            f"({cancelled.claimed} occurrences claimed)")


@goatbeat.command(name="backfill-show", cls=CeleryCommand)
@click.argument("backfill_id", type=click.IntRange(min=1), metavar="ID")
@json_option
@click.pass_context
def backfill_show(ctx: click.Context, backfill_id: int, as_json: bool) -> None:
    """Backfill ID, its progress and what became of its occurrences: its runs by outcome,
    its re-runs, and how many failed (`backfill-rerun-failed ID` runs those again)."""
    with opened(ctx) as schedules, reported():
        found = schedules.backfill_outcomes(backfill_id)
    b = found.backfill
    if as_json:
        emit({**display.backfill_json(b), "outcomes": display.backfill_outcomes_json(found)})
        return
    click.echo(display.fields([
        ("backfill", str(b.id)), ("schedule", b.schedule_name),
        ("range", f"{display.when(b.start)} … {display.when(b.end)}"),
        ("mode", b.mode.value + (", newest first" if b.newest_first else "")),
        ("state", b.state.value), ("examined", f"{b.examined} of {b.total}"),
        ("claimed", str(b.claimed)), *(() if b.error is None else (("error", b.error),)),
        *display.backfill_outcome_lines(found)]))
    if found.failed:
        say(f"`{app_command(f'backfill-rerun-failed {b.id}')}` runs the {len(found.failed)} "
            "failed ones again under new keys")


@goatbeat.command(name="backfill-rerun-failed", cls=CeleryCommand)
@click.argument("backfill_id", type=click.IntRange(min=1), metavar="ID")
@reason_option
@json_option
@click.pass_context
def backfill_rerun_failed(ctx: click.Context, backfill_id: int, reason: str | None,
                          as_json: bool) -> None:
    """Run again, now, the occurrences of backfill ID whose latest run failed, was lost or was
    never sent, each under a new key (the keys they ran under are used already)."""
    with opened(ctx) as schedules, reported():
        rerun = schedules.rerun_failed(backfill_id, reason=reason)
    if as_json:
        emit(display.rerun_json(rerun))
        return
    count = len(rerun.executions)
    say(f"re-run {rerun.round} of backfill {backfill_id}: {count} "
        f"occurrence{'' if count == 1 else 's'} of {rerun.backfill.schedule_name!r} queued "
        f"under keys ending :backfill-{backfill_id}-rerun-{rerun.round}; "
        f"`{app_command(f'backfill-show {backfill_id}')}` shows how they end")
