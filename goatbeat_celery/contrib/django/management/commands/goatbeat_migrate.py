"""``manage.py goatbeat_migrate``: what ``celery -A proj goatbeat migrate`` does, with the
settings Django has (the same Alembic migrations, on goatbeat's own version table)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from goatbeat_celery.core.types.errors import GoatbeatError


class Command(BaseCommand):
    help = "Bring goatbeat's schema up to this version of goatbeat_celery (Alembic upgrade)."

    def handle(self, *args: Any, **options: Any) -> None:
        from goatbeat_celery.contrib.django import integration
        from goatbeat_celery.migrations import head_revision
        from goatbeat_celery.store import migration_engine
        from goatbeat_celery.store.migrate import current_revision, upgrade

        try:
            url = integration.goatbeat_config().config.database_url
            engine = migration_engine(url)
            try:
                before = current_revision(engine)
                upgrade(engine)
                after = current_revision(engine)
            finally:
                engine.dispose()
        except GoatbeatError as exc:
            raise CommandError(str(exc)) from exc
        where = integration.masked_database_url()
        if before == after:
            self.stdout.write(f"goatbeat schema of {where} already at {after} (head "
                              f"{head_revision()})")
        else:
            self.stdout.write(f"goatbeat schema of {where}: {before or 'base'} -> {after}")
