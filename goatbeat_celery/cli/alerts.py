"""``alerts``: the alerts the leader raised (docs/alerts.md), open ones first."""

from __future__ import annotations

import click
from celery.bin.base import CeleryCommand

from goatbeat_celery import display
from goatbeat_celery.cli.context import opened, reported
from goatbeat_celery.cli.group import goatbeat
from goatbeat_celery.cli.options import json_option, limit_option
from goatbeat_celery.cli.output import emit, say, warn


@goatbeat.command(cls=CeleryCommand)
@click.argument("name", required=False)
@click.option("--all", "everything", is_flag=True,
              help="Resolved alerts too, newest first after the open ones.")
@limit_option(100, "How many alerts at most.")
@json_option
@click.pass_context
def alerts(ctx: click.Context, name: str | None, everything: bool, limit: int,
           as_json: bool) -> None:
    """Open alerts (of schedule NAME, if given): missed, late, failed, lost, overrun, silent;
    with --all, resolved ones too."""
    with opened(ctx) as schedules, reported():
        found = schedules.alerts(name=name, open_only=not everything, limit=limit)
        note = display.untracked_rules_note(schedules.config.settings)
    if as_json:
        emit([alert.as_json() for alert in found])
        return
    if note is not None:
        warn(note)
    if not found:
        say("no open alerts" if not everything else "no alerts")
        return
    click.echo(display.table(display.ALERT_COLUMNS, [display.alert_row(a) for a in found],
                             width=display.terminal_width(), clipped={"REASON": "end"}))
