"""The HTTP API's tokens: ``token create``, ``list`` and ``revoke``."""

from __future__ import annotations

from typing import Any

import click
from celery.bin.base import CeleryCommand

from goatbeat_celery import display
from goatbeat_celery.cli.context import app_command, opened, reported
from goatbeat_celery.cli.group import goatbeat
from goatbeat_celery.cli.options import json_option
from goatbeat_celery.cli.output import emit, say
from goatbeat_celery.core.types.tokens import ApiToken


@goatbeat.group(name="token")
def token() -> None:
    """Tokens of the HTTP API (served by `goatbeat web` under /api/v1): each has scopes
    (read, write, run) and may be limited to the schedules whose name starts with a prefix.
    Only a digest of each secret is stored."""


def token_json(found: ApiToken) -> dict[str, Any]:
    return {"name": found.name, "scopes": sorted(scope.value for scope in found.scopes),
            "prefix": found.prefix, "created_at": display.iso(found.created_at),
            "revoked_at": display.iso(found.revoked_at)}


@token.command(name="create", cls=CeleryCommand)
@click.argument("name")
@click.option("--scope", "scopes", required=True, metavar="SCOPES",
              help="What it may do: read, write and run, comma-separated (read,write).")
@click.option("--prefix", metavar="TEXT",
              help="Only the schedules, calendars and backfills whose name starts with TEXT.")
@json_option
@click.pass_context
def token_create(ctx: click.Context, name: str, scopes: str, prefix: str | None,
                 as_json: bool) -> None:
    """Make the token NAME and print its secret, once: keep it where your other secrets
    are; it cannot be shown again (revoke the token and make another if it is lost)."""
    from goatbeat_celery.tokens import Tokens

    with opened(ctx) as schedules, reported():
        made, secret = Tokens.of(schedules).create(name, scopes=scopes, prefix=prefix)
    if as_json:
        emit({**token_json(made), "secret": secret})
        return
    limit = f", names starting {made.prefix!r}" if made.prefix else ""
    say(f"created token {made.name!r} ({','.join(token_json(made)['scopes'])}{limit})")
    # The secret alone on its line, unescaped: it is made of URL-safe characters only.
    click.echo(secret)


@token.command(name="list", cls=CeleryCommand)
@json_option
@click.pass_context
def token_list(ctx: click.Context, as_json: bool) -> None:
    """Every token (never its secret), revoked ones included."""
    from goatbeat_celery.tokens import Tokens

    with opened(ctx) as schedules, reported():
        found = Tokens.of(schedules).list()
    if as_json:
        emit([token_json(t) for t in found])
        return
    if not found:
        say(f"no tokens: `{app_command('token create NAME --scope read')}` makes one")
        return
    rows = [(t.name, ",".join(token_json(t)["scopes"]), t.prefix or display.NONE,
             display.when(t.created_at), display.when(t.revoked_at)) for t in found]
    click.echo(display.table(("NAME", "SCOPES", "PREFIX", "CREATED", "REVOKED"), rows))


@token.command(name="revoke", cls=CeleryCommand)
@click.argument("name")
@click.pass_context
def token_revoke(ctx: click.Context, name: str) -> None:
    """Refuse the token NAME's secret from now on. Its name stays taken."""
    from goatbeat_celery.tokens import Tokens

    with opened(ctx) as schedules, reported():
        Tokens.of(schedules).revoke(name)
    say(f"revoked token {name!r}")
