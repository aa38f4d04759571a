"""``status`` (who leads, lag, what is set aside) and ``check`` (settings, beat_schedule,
database, schema)."""

from __future__ import annotations

import click
from celery.bin.base import CeleryCommand

from goatbeat_celery import display
from goatbeat_celery.cli import checks as checks_module
from goatbeat_celery.cli.context import (
    app_command,
    app_given,
    celery_app,
    masked_url,
    opened,
    reported,
)
from goatbeat_celery.cli.group import goatbeat
from goatbeat_celery.cli.options import json_option
from goatbeat_celery.cli.output import emit, say

#: Active backfills ``status`` lists at most.
_STATUS_BACKFILLS = 100


@goatbeat.command(cls=CeleryCommand)
@json_option
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Who leads (lease holder, token, expiry by the database clock; with shards, of each
    shard), submission lag, and the schedules the leader has set aside."""
    with opened(ctx) as schedules, reported():
        settings = schedules.config.settings
        # With shards, the lease shown first is shard 0's: its leader does the global work.
        lease_name = schedules.lease_name()
        info = schedules.lease()
        # The member rows of every replica, and with several shards the shards' rows.
        rows = schedules.leases()
        sharding = None if settings.shards == 1 else rows
        pending = schedules.oldest_pending()
        now = schedules.now()
        next_due = schedules.next_due_at()
        set_aside = schedules.list(set_aside=True)
        backfilling = schedules.backfills(active=True, limit=_STATUS_BACKFILLS)
        url = masked_url(schedules)
    lag = None if pending is None else (now - pending.due_at).total_seconds()
    lease = display.lease_json(lease_name, info, settings)
    standbys = display.standby_replicas(rows, info, settings)
    if as_json:
        emit({
            "database": url,
            "now": display.iso(now),
            "lease": lease,
            "pending": None if pending is None else {
                "key": pending.key, "schedule": pending.schedule_name,
                "due_at": display.iso(pending.due_at), "attempts": pending.attempts,
                "lag_seconds": lag,
            },
            "next_due_at": display.iso(next_due),
            "set_aside": display.set_aside_json(set_aside),
            "active_backfills": [b.id for b in reversed(backfilling)],
            "standbys": display.standbys_json(standbys, now),
            **({} if sharding is None else display.shards_json(sharding, settings)),
        })
        return
    expiry = display.NONE
    if info is not None and info.expires_at is not None:
        expiry = display.relative(info.expires_at, info.store_now)
        if not info.held:
            expiry += " expired"
    pairs: list[tuple[str, display.Value]] = [
        ("database", url),
        ("database clock", display.when(now)),
        ("lease", lease_name),
        ("held", "yes" if lease["held"] else "no"),
        ("holder", lease["holder"] or display.NONE),
        ("token", str(lease["token"])),
        ("acquired", display.when(None if info is None else info.acquired_at)),
        ("last renewal", display.lease_health(info, settings)),
        ("expires", expiry),
        ("standbys", display.standbys_line(standbys, now)),
        ("previous holder", display.previous_holder_line(info)),
        ("oldest pending", display.NONE if pending is None else
         f"{pending.key} due {display.when(pending.due_at)}, "
         f"{display.human_seconds(lag or 0.0)} late, {pending.attempts} attempt(s)"),
        ("next due", display.relative(next_due, now)),
        ("set aside", display.set_aside_lines(set_aside, app_command("list"))),
    ]
    if backfilling:
        # Only when there are some: most deployments never backfill.
        pairs.append(("backfills", f"{len(backfilling)} active (`{app_command('backfills')}` "
                                   "shows their progress)"))
    if info is None:
        pairs[3] = ("held", "no (no replica has taken this lease yet)")
    if sharding is not None:
        pairs[2:3] = [("lease", f"{lease_name} (shard 0: config sync, settling runs, "
                                "pruning)")]
        pairs.append(("shards", display.shard_lines(sharding, settings)))
    click.echo(display.fields(pairs))


@goatbeat.command(cls=CeleryCommand)
@click.option("--role", type=click.Choice(["beat", "worker"]), default="beat", show_default=True,
              help="Whose privileges to check: beat's (and the CLI's), or a worker's that "
                   "tracks runs (run it with the workers' settings).")
@json_option
@click.pass_context
def check(ctx: click.Context, role: str, as_json: bool) -> None:
    """Check settings, beat_schedule, the database (connection, schema, privileges, other
    leases) and the broker.

    Exits non-zero when any check fails.
    """
    results = checks_module.run_checks(celery_app(ctx), app_given=app_given(ctx), role=role)
    failures = checks_module.failed(results)
    warnings = [c for c in results if c.outcome is checks_module.Outcome.WARN]
    if as_json:
        emit({"ok": not failures, "checks": [c.as_json() for c in results]})
    else:
        width = max(len(c.name) for c in results)
        for result in results:
            label = {"fail": "FAIL"}.get(result.outcome.value, result.outcome.value)
            # Details are lines joined here; what they quote (entry names, errors) is escaped.
            first, *rest = result.detail.split("\n")
            say(f"{label:<4}  {result.name:<{width}}  {first}")
            for line in rest:
                say(f"{'':<4}  {'':<{width}}  {line}")
        noted = f" ({len(warnings)} warning{'s' if len(warnings) > 1 else ''})" if warnings else ""
        click.echo(f"all checks passed{noted}" if not failures else
                   f"{len(failures)} check(s) failed")
    if failures:
        ctx.exit(1)
