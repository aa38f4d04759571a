"""django-celery-beat's DatabaseScheduler on PostgreSQL (``bench_django_settings``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime, timedelta, timezone

import populate
import sqlalchemy as sa

from .base import Adapter


class DjangoCeleryBeat(Adapter):
    kind = "django"
    label = "django-celery-beat (PostgreSQL)"
    scheduler = "django_celery_beat.schedulers:DatabaseScheduler"
    no_failover = "n/a (one replica only)"

    def setup(self) -> None:
        url = self.world.create_database("goatbeat_bench_dj")
        self.database = url.database or ""
        self.engine = sa.create_engine(url, poolclass=sa.NullPool)
        # Django in this process too: the loader makes its template row with the ORM, and
        # edits go through the models.
        os.environ.update(self.env())
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench_django_settings")
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)

    def teardown(self) -> None:
        from django.db import connections

        connections.close_all()
        self.engine.dispose()

    def load(self, plan: populate.Plan) -> None:
        populate.django(self.engine, plan)

    def env(self) -> dict[str, str]:
        pg = self.world.pg
        return {"BENCH_DJANGO_DB": self.database,
                "BENCH_PG_HOST": pg.host or "127.0.0.1",
                "BENCH_PG_PORT": str(pg.port or 5432),
                "BENCH_PG_USER": pg.username or "postgres",
                "BENCH_PG_PASSWORD": pg.password or ""}

    def edit_due_now(self, name: str) -> None:
        from django_celery_beat.models import PeriodicTask

        task = PeriodicTask.objects.get(name=name)
        task.last_run_at = datetime.now(timezone.utc) - timedelta(seconds=7200)
        task.save()  # its post_save signal marks the schedule changed

    @contextmanager
    def idle_tick(self) -> Iterator[Callable[[], None]]:
        from django.db import close_old_connections, transaction
        from django_celery_beat.models import PeriodicTasks

        def call() -> None:
            # What DatabaseScheduler.schedule_changed() runs on every tick.
            close_old_connections()
            with suppress(transaction.TransactionManagementError):
                transaction.commit()
            PeriodicTasks.last_change()

        yield call
