"""Schedule stores: PostgreSQL (production), MySQL / MariaDB, SQLite (one host, the default),
memory (tests).

:func:`open_store` picks one from a database URL. The object it returns is the
:class:`~goatbeat_celery.core.protocols.ScheduleStore`, the
:class:`~goatbeat_celery.core.protocols.LeaseManager`, the
:class:`~goatbeat_celery.core.protocols.RunLog` and the
:class:`~goatbeat_celery.core.protocols.AlertLog`, the
:class:`~goatbeat_celery.core.protocols.Outbox` and the
:class:`~goatbeat_celery.core.protocols.TokenStore`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

import sqlalchemy as sa

from goatbeat_celery.core.protocols import (
    AlertLog,
    LeaseManager,
    Outbox,
    RunLog,
    ScheduleStore,
    TokenStore,
)
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.store.url import ACCEPTED_SCHEMES, Backend, backend_of, mask_url

__all__ = ["ACCEPTED_SCHEMES", "Store", "downgrade_schema", "mask_url", "migration_engine",
           "open_store", "reading_engine", "upgrade_schema"]

#: Options each backend accepts besides ``clock`` and ``create_schema``.
_OPTIONS: dict[Backend, frozenset[str]] = {
    Backend.MEMORY: frozenset(),
    Backend.SQLITE: frozenset({"busy_timeout", "session_locks"}),
    Backend.POSTGRES: frozenset({
        "connect_timeout", "statement_timeout", "idle_in_transaction_timeout", "pool_size",
        "max_overflow", "application_name", "session_locks",
    }),
    Backend.MYSQL: frozenset({
        "connect_timeout", "statement_timeout", "idle_in_transaction_timeout", "pool_size",
        "max_overflow", "session_locks",
    }),
}


class Store(ScheduleStore, LeaseManager, RunLog, AlertLog, Outbox, TokenStore, Protocol):
    """A schedule store that is also the lease manager, the run log (where workers' run
    reports land), the alert log, the outbox (events delivered off the scheduling path) and
    the HTTP API's token store, as :func:`open_store` returns."""


def open_store(url: str, *, clock: Callable[[], datetime] | None = None,
               create_schema: bool | None = None, **options: Any) -> Store:
    """Open the store ``url`` names.

    * ``memory://`` — in this process only (tests); ``clock`` may be injected.
    * ``sqlite:///path/to/file.db`` — one host; ``clock`` may be injected; the schema is
      created or brought up to date unless ``create_schema=False``.
    * ``postgresql://``, ``postgresql+psycopg://``, ``postgres://`` — production, on the
      database clock (``clock`` is refused); a schema behind the code raises SchemaOutOfDate
      unless ``create_schema=True`` runs the migrations.
    * ``mysql+pymysql://``, ``mariadb+pymysql://`` (``mysql://``, ``mariadb://``) — MySQL 8 or
      MariaDB 10.6 and later, on the database clock, as PostgreSQL.

    An unknown scheme or option raises ConfigurationError naming ``database_url``.
    """
    backend = backend_of(url)
    unknown = sorted(set(options) - _OPTIONS[backend])
    if unknown:
        allowed = ", ".join(sorted(_OPTIONS[backend])) or "none"
        raise ConfigurationError(
            [Problem("database_url", f"option {name!r} does not apply to {backend.value} stores "
                     f"(accepted: {allowed})") for name in unknown]
        )
    if backend is Backend.MEMORY:
        from goatbeat_celery.store.memory import MemoryStore, system_clock

        return MemoryStore(clock or system_clock)
    if backend is Backend.SQLITE:
        from goatbeat_celery.store.sqlite import SQLiteStore

        return SQLiteStore(url, clock=clock,
                           create_schema=True if create_schema is None else create_schema,
                           **options)
    if clock is not None:
        clock_of = "now()" if backend is Backend.POSTGRES else "UTC_TIMESTAMP()"
        raise ConfigurationError([Problem(
            "clock", f"a {'PostgreSQL' if backend is Backend.POSTGRES else 'MySQL'} store always "
            f"uses the database clock ({clock_of})",
            "an injected clock is only for memory:// and sqlite:// stores")])
    if backend is Backend.MYSQL:
        from goatbeat_celery.store.mysql import MySQLStore

        return MySQLStore(url, create_schema=bool(create_schema), **options)
    from goatbeat_celery.store.postgres import PostgresStore

    return PostgresStore(url, create_schema=bool(create_schema), **options)


def migration_engine(url: str) -> sa.Engine:
    """An engine fit to run the migrations on ``url`` (no statement timeout on PostgreSQL:
    a migration may rewrite a large table)."""
    backend = backend_of(url)
    if backend is Backend.SQLITE:
        from goatbeat_celery.store.sqlite import create_sqlite_engine

        return create_sqlite_engine(url)
    if backend is Backend.POSTGRES:
        from goatbeat_celery.store.postgres import create_migration_engine

        return create_migration_engine(url)
    if backend is Backend.MYSQL:
        from goatbeat_celery.store.mysql import create_migration_engine as mysql_migrations

        return mysql_migrations(url)
    raise ConfigurationError(
        [Problem("database_url", f"{mask_url(url)!r} has no schema to migrate (the memory "
                 "store keeps nothing)")]
    )


def reading_engine(url: str) -> sa.Engine:
    """:func:`migration_engine` for reads only, beside a running beat: on SQLite its
    transactions do not take the write lock up front, which the beat's claims wait for."""
    engine = migration_engine(url)
    if backend_of(url) is not Backend.SQLITE:
        return engine
    from goatbeat_celery.store.sqlite import READ_ONLY

    return engine.execution_options(**{READ_ONLY: True})


def upgrade_schema(url: str, revision: str = "head") -> None:
    """Bring the schema of the database ``url`` names up to ``revision`` (what
    ``celery -A proj goatbeat migrate`` runs), through a :func:`migration_engine`."""
    from goatbeat_celery.store.migrate import upgrade

    engine = migration_engine(url)
    try:
        upgrade(engine, revision)
    finally:
        engine.dispose()


def downgrade_schema(url: str, revision: str) -> None:
    """Take the schema of the database ``url`` names back to ``revision`` (``"base"`` drops
    goatbeat's tables), through a :func:`migration_engine`."""
    from goatbeat_celery.store.migrate import downgrade

    engine = migration_engine(url)
    try:
        downgrade(engine, revision)
    finally:
        engine.dispose()
