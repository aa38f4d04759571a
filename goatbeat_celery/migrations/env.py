"""Alembic environment of goatbeat_celery's own tables.

Run through :mod:`goatbeat_celery.migrations` (``upgrade()``, ``celery goatbeat migrate``), which
hands over a connection already inside a transaction; plain ``alembic -x url=...`` works too,
given a URL SQLAlchemy opens as written (``postgresql+psycopg://…``, ``sqlite:///…``). The
version is kept in its own table so that an application's Alembic history in the same database
is left alone.

Like the rest of the package it imports no store: the tables' metadata, needed only to compare
or autogenerate, is handed in as ``config.attributes["target_metadata"]``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from goatbeat_celery.migrations import VERSION_TABLE, include_object


def _configure(connection: sa.Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=context.config.attributes.get("target_metadata"),
        version_table=VERSION_TABLE,
        include_object=include_object,
    )


def run_migrations_online() -> None:
    config = context.config
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )
    if not url:
        raise RuntimeError("no database: pass -x url=... or use goatbeat_celery.migrations")
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        with engine.connect() as connection:
            _configure(connection)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


def run_migrations_offline() -> None:
    url = context.get_x_argument(as_dictionary=True).get("url") or context.config.get_main_option(
        "sqlalchemy.url"
    )
    context.configure(
        url=url or None,
        target_metadata=context.config.attributes.get("target_metadata"),
        version_table=VERSION_TABLE,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
