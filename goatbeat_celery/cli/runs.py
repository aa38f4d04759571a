"""A schedule's runs: ``run-now`` and ``history``."""

from __future__ import annotations

import click
from celery.bin.base import CeleryCommand

from goatbeat_celery import display
from goatbeat_celery.cli.bulk import bulk_wanted, run_bulk, tag_option
from goatbeat_celery.cli.context import opened, reported
from goatbeat_celery.cli.group import goatbeat
from goatbeat_celery.cli.options import json_option, limit_option, reason_option
from goatbeat_celery.cli.output import emit, say, warn
from goatbeat_celery.core.rules.origin import run_origin
from goatbeat_celery.core.rules.validation import MAX_LIMIT


@goatbeat.command(name="run-now", cls=CeleryCommand)
@click.argument("names", metavar="[NAME]...", nargs=-1)
@tag_option
@reason_option
@json_option
@click.pass_context
def run_now(ctx: click.Context, names: tuple[str, ...], tag: str | None, reason: str | None,
            as_json: bool) -> None:
    """Queue an extra run of NAME under its own key; the leader sends it. With several names
    or --tag, one of each (a schedule set aside is refused)."""
    if bulk_wanted(names, tag):
        run_bulk(ctx, "run_now", names, tag, reason, as_json)
        return
    name = names[0]
    with opened(ctx) as schedules, reported():
        execution = schedules.run_now(name, reason=reason)
        # The leader of the schedule's shard sends it.
        lease_name = schedules.lease_name(name)
        info = schedules.lease(name)
    if info is None or not info.held:
        warn(f"no replica holds lease {lease_name!r} right now: the run is sent when one "
             "becomes leader")
    if as_json:
        emit(display.execution_json(execution))
    else:
        say(f"queued {execution.key!r}; the leader sends it with task id {execution.key}")


@goatbeat.command(cls=CeleryCommand)
@click.argument("name")
@limit_option(20, "How many executions, newest first.")
@click.option("--wide", is_flag=True,
              help="Show every column (key, occurrence, claimed and submitted instants, missed "
                   "occurrences) and every value whole.")
@json_option
@click.pass_context
def history(ctx: click.Context, name: str, limit: int, wide: bool, as_json: bool) -> None:
    """Recent executions of NAME, newest first: when each was due, its state and its run's,
    what made it (MADE BY, when a run-now or a backfill made one: - is the schedule), lateness
    (submitted - due), runtime, submission attempts, worker, and why it failed or did not
    run."""
    with opened(ctx) as schedules, reported():
        executions = schedules.history(name, limit=limit)
        # A backfill run under its occurrence's own key is told by the backfills' ranges.
        backfills = schedules.backfills(name=name, limit=MAX_LIMIT) if executions else []
    origins = [run_origin(e, backfills) for e in executions]
    if as_json:
        emit([{**display.execution_json(e), "origin": origin}
              for e, origin in zip(executions, origins, strict=True)])
    elif not executions:
        say(f"no executions of {name!r} yet")
    else:
        # The column of what made each run only when one was not the schedule's own.
        shown = any(origins)
        columns = display.EXECUTION_COLUMNS if wide else display.HISTORY_COLUMNS
        row_of = display.execution_row if wide else display.history_row
        rows = [_with_origin(row_of(e), origin, shown)
                for e, origin in zip(executions, origins, strict=True)]
        header = _with_origin(columns, ORIGIN_COLUMN, shown)
        click.echo(display.table(header, rows) if wide else display.table(
            header, rows, width=display.terminal_width(), clipped=display.HISTORY_CLIPPED,
            dropped=display.HISTORY_DROPPED, roomy=display.HISTORY_ROOMY))


#: The column saying what made each run, after its state.
ORIGIN_COLUMN = "MADE BY"


def _with_origin(row: tuple[str, ...], origin: str | None, shown: bool) -> tuple[str, ...]:
    """``row`` (or a header) with :data:`ORIGIN_COLUMN`'s cell after its STATE, if
    ``shown``."""
    return (*row[:2], origin or display.NONE, *row[2:]) if shown else row
