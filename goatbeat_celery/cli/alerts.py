"""``alerts``: the alerts the leader raised (docs/alerts.md), open ones first; ``alerts ack
NAME`` acknowledges the open alerts of schedule NAME, ``alerts silence NAME --until ISO``
silences them until an instant."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click
from celery.bin.base import CeleryCommand

from goatbeat_celery import display
from goatbeat_celery.cli.context import CommandError, opened, reported
from goatbeat_celery.cli.group import goatbeat
from goatbeat_celery.cli.options import InstantParam, json_option, limit_option, reason_option
from goatbeat_celery.cli.output import emit, say, warn
from goatbeat_celery.core.rules.alerts import Alert, AlertRule


class _AlertsGroup(click.Group):
    """``alerts [NAME] [--all]`` lists, as it always did; ``alerts ack|silence …`` acts. A
    first word that is no subcommand is the list's (a schedule's name, or an option)."""

    #: The subcommand that takes the words when the first is none of the group's.
    default_command = "list"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = [self.default_command, *args]
        elif not args:
            args = [self.default_command]
        return super().parse_args(ctx, args)


@goatbeat.group(name="alerts", cls=_AlertsGroup)
def alerts() -> None:
    """Open alerts (missed, late, failed, lost, overrun, silent), and what to do about them:
    ``alerts [NAME] [--all]`` lists them, ``alerts ack NAME`` acknowledges, ``alerts silence
    NAME --until ISO`` silences."""


@alerts.command(name="list", cls=CeleryCommand)
@click.argument("name", required=False)
@click.option("--all", "everything", is_flag=True,
              help="Resolved alerts too, newest first after the open ones.")
@limit_option(100, "How many alerts at most.")
@json_option
@click.pass_context
def list_alerts(ctx: click.Context, name: str | None, everything: bool, limit: int,
                as_json: bool) -> None:
    """Open alerts (of schedule NAME, if given): missed, late, failed, lost, overrun, silent;
    with --all, resolved ones too. An open one acknowledged or silenced says so."""
    with opened(ctx) as schedules, reported():
        found = schedules.alerts(name=name, open_only=not everything, limit=limit)
        note = display.untracked_rules_note(schedules.config.settings)
        now = schedules.now()
    if as_json:
        emit([alert.as_json() for alert in found])
        return
    if note is not None:
        warn(note)
    if not found:
        say("no open alerts" if not everything else "no alerts")
        return
    click.echo(display.table(display.ALERT_COLUMNS,
                             [display.alert_row(a, now) for a in found],
                             width=display.terminal_width(), clipped={"REASON": "end"}))


rule_option = click.option(
    "--rule", type=click.Choice([rule.value for rule in AlertRule]), default=None,
    help="Only the open alert of this rule (default: every open alert of NAME).")


def _each_open(schedules: Any, name: str, rule: str | None) -> list[Alert]:
    with reported():
        schedules.get(name)  # a clear "no schedule named" (with close names) for a typo
        found: list[Alert] = schedules.open_alerts_of(name, rule)
    if not found:
        raise CommandError(f"schedule {name!r} has no open alert"
                           + (f" of rule {rule}" if rule else ""))
    return found


def _told(found: list[Alert], as_json: bool, done: str, now: datetime) -> None:
    if as_json:
        emit([alert.as_json() for alert in found])
        return
    for alert in found:
        say(f"{done} alert {alert.id} ({alert.rule.value} on {alert.schedule_name!r}): "
            + "; ".join(display.alert_handling(alert, now)))


@alerts.command(name="ack", cls=CeleryCommand)
@click.argument("name")
@rule_option
@click.option("--note", metavar="TEXT", help="What you are doing about it, shown with it.")
@reason_option
@json_option
@click.pass_context
def ack(ctx: click.Context, name: str, rule: str | None, note: str | None, reason: str | None,
        as_json: bool) -> None:
    """Acknowledge the open alerts of schedule NAME: they stay open, shown as acknowledged
    by you, and are not told again (webhooks, signals) when counted again; their resolution
    is."""
    with opened(ctx) as schedules:
        found = _each_open(schedules, name, rule)
        with reported(as_options=True):
            done = [schedules.acknowledge_alert(a.id, note=note, reason=reason)
                    for a in found]
            now = schedules.now()
    _told(done, as_json, "acknowledged", now)


@alerts.command(name="silence", cls=CeleryCommand)
@click.argument("name")
@rule_option
@click.option("--until", type=InstantParam(), metavar="ISO", required=True,
              help="Tell nothing of them before this instant; then, if still open, they are "
                   "told again.")
@reason_option
@json_option
@click.pass_context
def silence(ctx: click.Context, name: str, rule: str | None, until: datetime,
            reason: str | None, as_json: bool) -> None:
    """Silence the open alerts of schedule NAME until --until: nothing is told of them
    (webhooks, signals) before then; the leader tells each again then if it is still
    open."""
    with opened(ctx) as schedules:
        found = _each_open(schedules, name, rule)
        with reported(as_options=True):
            done = [schedules.silence_alert(a.id, until=until, reason=reason) for a in found]
            now = schedules.now()
    _told(done, as_json, "silenced", now)
