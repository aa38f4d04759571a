"""Schedules changed inside ``transaction.atomic()`` commit or roll back with it.

A Django project keeps goatbeat's tables in its own database, and writes in transactions:
code that created a django-celery-beat ``PeriodicTask`` in an atomic block had it rolled back
with the block. So does a change made through :class:`~goatbeat_celery.api.Schedules` on
PostgreSQL: while the thread is inside an atomic block of the ``DATABASES`` entry that is
goatbeat's database, the store runs its statements on that block's own connection, in a
savepoint (a refused change undoes only itself, and raises as it would outside), and Django
commits them, or rolls them back, with the rest. The leader hears of the change when Django
commits. Outside an atomic block (autocommit), or on another database, nothing changes: the
store's own pool, each change committed when it returns.

On SQLite goatbeat keeps a connection of its own (Django's reads dates with its own
converters), and a change commits at once, whatever the block does.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import sqlalchemy as sa

from goatbeat_celery.store import django_databases as databases
from goatbeat_celery.store import enclosing


class _Lent:
    """Django's psycopg connection, lent to SQLAlchemy inside Django's transaction: Django
    commits and rolls back, so SQLAlchemy's commit, rollback and close do nothing; goatbeat's
    loaders are set on each cursor, never on Django's connection."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        # Imported here: psycopg is the postgres extra's, and only a PostgreSQL database joins.
        from goatbeat_celery.store.postgres.loaders import _InstantLoader, _JSONLoader

        cursor = self._connection.cursor(*args, **kwargs)
        for name in ("json", "jsonb"):
            cursor.adapters.register_loader(name, _JSONLoader)
        cursor.adapters.register_loader("timestamptz", _InstantLoader)
        return cursor

    def commit(self) -> None:
        pass

    def rollback(self) -> None:
        pass

    def close(self) -> None:
        pass

    def add_notice_handler(self, handler: Any) -> None:
        pass  # SQLAlchemy adds one per connect: Django's connection keeps its own

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)


@functools.cache
def _atomic_joiner(alias: str) -> enclosing.Enclosing:
    from django.db import connections, transaction

    # Each connect lends the calling thread's connection (Django keeps one per thread); the
    # dialect is set up once, on the first, for every store of the process (kept per alias).
    engine = sa.create_engine("postgresql+psycopg://", poolclass=sa.NullPool,
                              creator=lambda: _Lent(connections[alias].connection),
                              use_native_hstore=False)  # goatbeat's tables have none

    @contextmanager
    def joined() -> Iterator[sa.Connection]:
        with transaction.atomic(using=alias), engine.connect() as conn:
            yield conn

    def current() -> AbstractContextManager[sa.Connection] | None:
        connection = connections[alias]
        if not connection.in_atomic_block:
            return None
        connection.ensure_connection()
        return joined()

    return current


def joiner(url: sa.URL) -> enclosing.Enclosing | None:
    """:data:`goatbeat_celery.store.enclosing.Joiner` of Django's atomic blocks: those of the
    ``DATABASES`` entry naming the PostgreSQL database ``url`` names."""
    from django.conf import settings

    if url.get_backend_name() != "postgresql" or not settings.configured:
        return None
    alias = databases.alias_for(url.render_as_string(hide_password=False), settings.DATABASES)
    return None if alias is None else _atomic_joiner(alias)


def register() -> None:
    enclosing.register(joiner)
