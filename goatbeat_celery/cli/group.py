"""The ``goatbeat`` command group; each module of the package adds its commands to it."""

from __future__ import annotations

import click

from goatbeat_celery import __version__


@click.group(name="goatbeat")
@click.version_option(__version__, "--version", prog_name="goatbeat_celery",
                      message="%(prog)s %(version)s")
@click.pass_context
def goatbeat(ctx: click.Context) -> None:
    """goatbeat: schedules, lease and database schema of goatbeat_celery.

    Settings (goatbeat_database_url, …) are read from the app given with -A.
    """
