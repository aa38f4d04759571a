"""What the PostgreSQL benchmarks share: a migrated database of their own, and the engines of
a store to count its statements on."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from goatbeat_celery.store import upgrade_schema
from goatbeat_celery.store.postgres import PostgresStore

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@contextmanager
def scratch_database(prefix: str) -> Iterator[str]:
    """The URL of a new database, migrated, on the server of ``GOATBEAT_BENCH_PG_URL`` (default:
    the test server), named ``prefix`` and this process's id; dropped at the end."""
    base = make_url(os.environ.get("GOATBEAT_BENCH_PG_URL", DEFAULT_URL))
    name = f"{prefix}_{os.getpid()}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        url = base.set(database=name).render_as_string(hide_password=False)
        upgrade_schema(url)
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def store_engines(store: PostgresStore) -> list[sa.Engine]:
    """The store's SQLAlchemy engines (an engine with options shares its parent's listeners:
    left out, or its statements would count twice)."""
    from sqlalchemy.engine.base import OptionEngine

    return [value for value in vars(store).values()
            if isinstance(value, sa.Engine) and not isinstance(value, OptionEngine)]
