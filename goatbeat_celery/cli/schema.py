"""``migrate``: goatbeat's tables brought to this version's schema."""

from __future__ import annotations

from typing import Any

import click
from celery.bin.base import CeleryCommand

from goatbeat_celery.cli.context import CommandError, app_command, app_given, celery_app, reported
from goatbeat_celery.cli.group import goatbeat
from goatbeat_celery.cli.options import json_option
from goatbeat_celery.cli.output import emit, say, warn


@goatbeat.command(cls=CeleryCommand)
@json_option
@click.pass_context
def migrate(ctx: click.Context, as_json: bool) -> None:
    """Create or upgrade goatbeat's tables to this version's schema (Alembic, to head)."""
    from goatbeat_celery import config as config_module
    from goatbeat_celery.beat import sql_broker
    from goatbeat_celery.migrations import alembic_config, head_revision
    from goatbeat_celery.store import mask_url, migration_engine
    from goatbeat_celery.store.migrate import current_revision, upgrade

    app = celery_app(ctx)
    with reported():
        url = config_module.load(app, with_schedules=False).config.database_url
        if app_given(ctx) is None:
            warn(f"no -A given: migrating the database of Celery's default app ({mask_url(url)});"
                 f" `{app_command('migrate')}` migrates your app's")
        engine = migration_engine(url)
        try:
            before = current_revision(engine)
            head = head_revision()
            if before is not None and before not in _known_revisions(alembic_config()):
                raise CommandError(
                    f"the database is at revision {before}, which this version of "
                    f"goatbeat_celery does not know (its newest is {head}): it was migrated by "
                    "a newer version; upgrade goatbeat_celery instead")
            upgrade(engine)
            after = current_revision(engine)
        finally:
            engine.dispose()
        queues = sql_broker.prepare(app)
    shown = mask_url(url)
    if as_json:
        emit({"database": shown, "from": before, "to": after, "head": head,
              "upgraded": before != after, "broker_queues": queues})
        return
    if before == after:
        say(f"{shown}: already at revision {after} (head); nothing to do")
    else:
        say(f"{shown}: upgraded from {before or 'base (no tables)'} to {after} (head)")
    if queues:
        say(f"{mask_url(app.conf.broker_url)}: the database broker's queues declared "
            f"({', '.join(queues)}), so a worker and beat can start together")


def _known_revisions(config: Any) -> set[str]:
    from alembic.script import ScriptDirectory

    return {str(rev.revision) for rev in ScriptDirectory.from_config(config).walk_revisions()}
