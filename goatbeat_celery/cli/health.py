"""``health``: whether this host's replica leads, stands by, lost its lease, is not running, or
cannot lead for want of a privilege, as an exit status an orchestrator's probe reads."""

from __future__ import annotations

import socket

import click
from celery.bin.base import CeleryCommand

from goatbeat_celery import config as config_module
from goatbeat_celery.cli import access
from goatbeat_celery.cli.context import celery_app, opened, reported
from goatbeat_celery.cli.group import goatbeat
from goatbeat_celery.cli.options import json_option
from goatbeat_celery.cli.output import emit, say
from goatbeat_celery.core.rules.health import Health, ReplicaHealth, judge

#: The exit status of each verdict (docs/cli.md#health); 69 is the database unreachable, as
#: for every command.
EXIT_CODES = {
    Health.LEADING: 0,
    Health.STANDBY: 3,
    Health.LEASE_LOST: 4,
    Health.NOT_RUNNING: 5,
    Health.CANNOT_LEAD: 6,
}


@goatbeat.command(cls=CeleryCommand)
@click.option("--holder", metavar="HOST[:PID]",
              help="The replica to judge: a host name (its replicas; the one heard from last) "
                   "or host:pid. Default: this host's name.")
@json_option
@click.pass_context
def health(ctx: click.Context, holder: str | None, as_json: bool) -> None:
    """Exit 0 when this host's replica leads, 3 on standby, 4 when it lost its lease (it led,
    and its lease expired unrenewed or was taken), 5 when it is not running, 6 when it cannot
    lead for want of a privilege, 69 when the database cannot be reached."""
    wanted = holder or socket.gethostname()
    with reported():
        url = config_module.load(celery_app(ctx), with_schedules=False).config.database_url
        denied = access.denial(url)
    if denied is not None:
        verdict = ReplicaHealth(health=Health.CANNOT_LEAD, holder=None, reason=denied)
    else:
        with opened(ctx) as schedules, reported():
            settings = schedules.config.settings
            rows = schedules.leases()
            if settings.shards == 1:
                row = schedules.lease()
                if row is not None:
                    rows.append(row)
        verdict = judge(rows, wanted=wanted, lease_name=settings.lease_name,
                        shards=settings.shards, ttl=settings.lease_ttl)
    code = EXIT_CODES[verdict.health]
    if as_json:
        emit({"health": verdict.health.value, "exit_code": code, "replica": verdict.holder,
              "asked": wanted, "reason": verdict.reason, "leases": list(verdict.leases)})
    else:
        say(f"{verdict.health.value}: {verdict.holder or wanted}: {verdict.reason}")
    ctx.exit(code)
