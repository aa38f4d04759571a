"""``web``: the web dashboard served from the command line."""

from __future__ import annotations

import click
from celery.bin.base import CeleryCommand

from goatbeat_celery.cli.context import CommandError, masked_url, opened, reported, with_options
from goatbeat_celery.cli.group import goatbeat
from goatbeat_celery.cli.output import say
from goatbeat_celery.core.links import doc


class _WebCommand(CeleryCommand):  # type: ignore[misc]  # Celery's classes are untyped
    """An option ``web`` does not take (``--port``, ``--host``, …) is answered with where the
    address is given: ``--bind``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return list(super().parse_args(ctx, args))
        except click.NoSuchOption as exc:
            raise click.NoSuchOption(
                exc.option_name, ctx=exc.ctx, possibilities=exc.possibilities,
                message=f"{exc.message.rstrip('.')}. The address to listen on is given as "
                        "--bind HOST:PORT, e.g. --bind 127.0.0.1:8765 (a port alone: "
                        "--bind :8765).") from None


#: The dashboard's settings its problems name → the option that gives each.
_WEB_OPTION = {"allowed_hosts": "--allowed-host"}


@goatbeat.command(cls=_WebCommand)
@click.option("--bind", default="127.0.0.1:8765", show_default=True, metavar="HOST:PORT",
              help="Where to listen. An address other hosts can reach is refused unless "
                   "GOATBEAT_WEB_TOKEN is set.")
@click.option("--read-only", "read_only", is_flag=True,
              help="Show everything, change nothing: no forms, every POST refused.")
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="NAME",
              help="A host name the dashboard answers to besides 127.0.0.1, [::1] and "
                   "localhost (the name a proxy or tunnel reaches it by); repeatable.")
@click.pass_context
def web(ctx: click.Context, bind: str, read_only: bool,
        allowed_hosts: tuple[str, ...]) -> None:
    """Serve the web dashboard: lease, schedules, history and lateness; pause, resume, run
    now, edit, create and remove.

    With GOATBEAT_WEB_TOKEN set (16 characters or more), every request must give it: the
    sign-in page, `Authorization: Bearer TOKEN`, or basic auth with TOKEN as password.
    Needs celery-goatbeat's web extra (docs/getting-started.md#install).
    """
    import os

    try:
        from goatbeat_celery.web import WebSettings, create_app
        from goatbeat_celery.web.security import (
            TOKEN_VARIABLE,
            bind_problem,
            parse_bind,
        )
        from goatbeat_celery.web.server import DEFAULT_PORT, serve
    except ImportError as exc:
        raise CommandError(f"the web dashboard needs celery-goatbeat's web extra, installed as "
                           f"{doc('getting-started.md#install')} says ({exc})") from exc
    try:
        host, port = parse_bind(bind, DEFAULT_PORT)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--bind") from exc
    settings = WebSettings(token=os.environ.get(TOKEN_VARIABLE) or None, read_only=read_only,
                           allowed_hosts=allowed_hosts)
    problems = settings.problems()
    if problems:
        raise CommandError("; ".join(str(with_options(problem, _WEB_OPTION))
                                     for problem in problems))
    refused = bind_problem(host, settings)
    if refused is not None:
        raise CommandError(refused)
    with opened(ctx) as schedules:
        with reported():
            app = create_app(schedules, settings)
        shown_host = f"[{host}]" if ":" in host else host
        mode = ", read-only" if read_only else ""
        auth = "token required" if settings.token else "no token: this host only"
        say(f"goatbeat web on http://{shown_host}:{port}/ ({auth}{mode}); database "
            f"{masked_url(schedules)}")
        serve(app, host, port)
