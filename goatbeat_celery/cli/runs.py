"""A schedule's runs: ``run-now`` and ``history``."""

from __future__ import annotations

import click
from celery.bin.base import CeleryCommand

from goatbeat_celery import display
from goatbeat_celery.cli.context import lease_manager, opened, reported
from goatbeat_celery.cli.group import goatbeat
from goatbeat_celery.cli.options import json_option, limit_option, reason_option
from goatbeat_celery.cli.output import emit, say, warn
from goatbeat_celery.core.rules.shards import shard_lease_name, shard_of


@goatbeat.command(name="run-now", cls=CeleryCommand)
@click.argument("name")
@reason_option
@json_option
@click.pass_context
def run_now(ctx: click.Context, name: str, reason: str | None, as_json: bool) -> None:
    """Queue an extra run of NAME under its own key; the leader sends it."""
    with opened(ctx) as schedules, reported():
        execution = schedules.run_now(name, reason=reason)
        settings = schedules.config.settings
        # The leader of the schedule's shard sends it.
        lease_name = shard_lease_name(settings.lease_name, shard_of(name, settings.shards))
        info = lease_manager(schedules).inspect(lease_name)
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
    lateness (submitted - due), runtime, submission attempts, worker, and why it failed or
    did not run."""
    with opened(ctx) as schedules, reported():
        executions = schedules.history(name, limit=limit)
    if as_json:
        emit([display.execution_json(e) for e in executions])
    elif not executions:
        say(f"no executions of {name!r} yet")
    elif wide:
        click.echo(display.table(display.EXECUTION_COLUMNS,
                               [display.execution_row(e) for e in executions]))
    else:
        click.echo(display.table(display.HISTORY_COLUMNS,
                               [display.history_row(e) for e in executions],
                               width=display.terminal_width(), clipped=display.HISTORY_CLIPPED,
                               dropped=display.HISTORY_DROPPED, roomy=display.HISTORY_ROOMY))
