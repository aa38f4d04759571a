"""The database schema's migrations, shipped in the package (no ``alembic.ini`` needed).

::

    from goatbeat_celery.migrations import upgrade, check_schema
    upgrade("postgresql://beat@db/app")      # what `celery -A proj goatbeat migrate` runs
    check_schema(engine)                     # SchemaOutOfDate if the schema is behind

The revision is kept in ``goatbeat_alembic_version``, apart from any Alembic history the
application keeps in the same database, and only goatbeat's tables are ever looked at.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from goatbeat_celery.core.errors import SchemaOutOfDate
from goatbeat_celery.store.errors import translated
from goatbeat_celery.store.schema import metadata
from goatbeat_celery.store.url import mask_url

# Alembic announces each of its plugins at INFO as it is imported: beat's start-up log is no
# place for that.
_alembic_logger = logging.getLogger("alembic")
_alembic_level = _alembic_logger.level
_alembic_logger.setLevel(logging.WARNING)
try:
    from alembic import command
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
finally:
    _alembic_logger.setLevel(_alembic_level)


logger = logging.getLogger(__name__)

__all__ = [
    "MIGRATE_COMMAND",
    "VERSION_TABLE",
    "alembic_config",
    "check_schema",
    "current_revision",
    "downgrade",
    "head_revision",
    "upgrade",
]

VERSION_TABLE = "goatbeat_alembic_version"
MIGRATE_COMMAND = "celery -A proj goatbeat migrate"
SCRIPT_LOCATION = Path(__file__).resolve().parent
#: Concurrent upgrades on PostgreSQL queue on this advisory lock instead of racing.
_ADVISORY_LOCK_ID = 0x60A7BEA7


def include_object(obj: Any, name: str | None, type_: str, reflected: bool,
                   compare_to: Any) -> bool:
    """Look only at goatbeat's tables (and what belongs to them) when comparing schemas."""
    if type_ == "table":
        return name in metadata.tables
    table = getattr(obj, "table", None)
    return table is None or table.name in metadata.tables


def alembic_config(connection: sa.Connection | None = None) -> Config:
    """An Alembic configuration pointing at the migrations inside the installed package."""
    config = Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@lru_cache(maxsize=1)
def head_revision() -> str:
    """The revision this version of goatbeat_celery needs."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the package ships at least one revision"
    return str(head)


def _engine(url_or_engine: str | sa.Engine) -> tuple[sa.Engine, bool]:
    """The engine to migrate with, and whether it was made here (and must be disposed)."""
    if isinstance(url_or_engine, sa.Engine):
        return url_or_engine, False
    from goatbeat_celery.store import migration_engine  # the store package imports us

    return migration_engine(url_or_engine), True


def _run(url_or_engine: str | sa.Engine, action: str, revision: str) -> None:
    engine, owned = _engine(url_or_engine)
    try:
        with translated(f"migrate ({action} {revision})", mask_url(engine.url)):
            with engine.begin() as connection, _alembic_quiet():
                if connection.dialect.name == "postgresql":
                    connection.execute(sa.select(sa.func.pg_advisory_xact_lock(_ADVISORY_LOCK_ID)))
                before = _read_revision(connection)
                config = alembic_config(connection)
                if action == "upgrade":
                    command.upgrade(config, revision)
                else:
                    command.downgrade(config, revision)
                after = _read_revision(connection)
        if before != after:
            logger.info("goatbeat schema of %s: %s -> %s", mask_url(engine.url),
                        before or "base", after or "base", extra={"action": "migrated"})
    finally:
        if owned:
            engine.dispose()


@contextmanager
def _alembic_quiet() -> Iterator[None]:
    """Keep Alembic's own INFO lines ("Context impl …", "Running upgrade …") out of the
    application's log: one line of ours says what changed."""
    alembic_logger = logging.getLogger("alembic")
    level = alembic_logger.level
    alembic_logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        alembic_logger.setLevel(level)


def upgrade(url_or_engine: str | sa.Engine, revision: str = "head") -> None:
    """Bring the schema up to ``revision`` in one transaction (DDL is transactional on both
    PostgreSQL and SQLite); concurrent callers wait for each other rather than collide."""
    _run(url_or_engine, "upgrade", revision)


def downgrade(url_or_engine: str | sa.Engine, revision: str) -> None:
    """Take the schema back to ``revision`` (``"base"`` drops goatbeat's tables and history)."""
    _run(url_or_engine, "downgrade", revision)


def current_revision(engine: sa.Engine | sa.Connection) -> str | None:
    """The revision the database is at, or ``None`` when it was never migrated."""
    with translated("read the schema revision", mask_url(engine.engine.url)):
        if isinstance(engine, sa.Connection):
            return _read_revision(engine)
        with engine.connect() as connection:
            return _read_revision(connection)


def _read_revision(connection: sa.Connection) -> str | None:
    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    current = context.get_current_revision()
    return None if current is None else str(current)


def check_schema(engine: sa.Engine | sa.Connection) -> None:
    """Raise SchemaOutOfDate unless the database is exactly at :func:`head_revision`."""
    current = current_revision(engine)
    head = head_revision()
    if current == head:
        return
    script = ScriptDirectory.from_config(alembic_config())
    known = current is None or any(rev.revision == current for rev in script.walk_revisions())
    if not known:
        raise SchemaOutOfDate(
            f"database schema is at {current}, which this version of goatbeat_celery does not "
            f"know (it needs {head}): the database was migrated by a newer version; "
            "upgrade goatbeat_celery"
        )
    shown = "base (no goatbeat tables)" if current is None else current
    raise SchemaOutOfDate(
        f"database schema is at {shown}, this version needs {head}: run `{MIGRATE_COMMAND}`"
    )
