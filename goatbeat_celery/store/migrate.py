"""The migrations, run on a store's database as every store call is.

:mod:`goatbeat_celery.migrations` is handed an engine (or a connection) and knows nothing of
stores; these wrappers map driver errors to StoreError / StoreUnavailable, as at the store's
edge, and say in one log line what a migration changed. The SQLite and PostgreSQL stores run
the migrations through them; :func:`goatbeat_celery.store.upgrade_schema` does for a URL.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import sqlalchemy as sa

from goatbeat_celery import migrations
from goatbeat_celery.migrations import Bind
from goatbeat_celery.store.errors import translated
from goatbeat_celery.store.url import mask_url

logger = logging.getLogger(__name__)

__all__ = ["check_schema", "current_revision", "downgrade", "prepare_schema", "upgrade"]


def _where(bind: Bind) -> str:
    return mask_url(bind.engine.url)


def upgrade(bind: Bind, revision: str = "head") -> None:
    """:func:`goatbeat_celery.migrations.upgrade`, driver errors mapped."""
    _migrate(bind, "upgrade", revision)


def downgrade(bind: Bind, revision: str) -> None:
    """:func:`goatbeat_celery.migrations.downgrade`, driver errors mapped."""
    _migrate(bind, "downgrade", revision)


def _migrate(bind: Bind, action: str, revision: str) -> None:
    where = _where(bind)
    with translated(f"migrate ({action} {revision})", where):
        run = migrations.upgrade if action == "upgrade" else migrations.downgrade
        before, after = run(bind, revision)
    if before != after:
        logger.info("goatbeat schema of %s: %s -> %s", where, before or "base",
                    after or "base", extra={"action": "migrated"})


def current_revision(bind: Bind) -> str | None:
    """:func:`goatbeat_celery.migrations.current_revision`, driver errors mapped."""
    with translated("read the schema revision", _where(bind)):
        return migrations.current_revision(bind)


def check_schema(bind: Bind) -> None:
    """:func:`goatbeat_celery.migrations.check_schema`, driver errors mapped."""
    with translated("read the schema revision", _where(bind)):
        migrations.check_schema(bind)


def prepare_schema(engine: sa.Engine, *, create: bool,
                   migration_engine: Callable[[], sa.Engine] | None = None) -> None:
    """What a store does with its schema when it opens: with ``create``, bring it up to head
    if it is behind (through an engine from ``migration_engine``, disposed after, or else
    ``engine``; a schema at head takes no lock); without, raise SchemaOutOfDate unless it is
    at head."""
    if not create:
        check_schema(engine)
        return
    if current_revision(engine) == migrations.head_revision():
        return
    if migration_engine is None:
        upgrade(engine)
        return
    migrator = migration_engine()
    try:
        upgrade(migrator)
    finally:
        migrator.dispose()
