"""The database schema's migrations, shipped in the package (no ``alembic.ini`` needed).

Every function here is handed an engine or a connection; this package knows nothing of URLs
or stores and imports neither (the stores import it). Through a store, with the engine it
makes for a URL, driver errors mapped and one log line saying what changed::

    from goatbeat_celery.store import upgrade_schema
    upgrade_schema("postgresql://beat@db/app")   # what `celery -A proj goatbeat migrate` runs

and directly, on an engine of your own::

    from goatbeat_celery.migrations import upgrade, check_schema
    upgrade(engine)
    check_schema(engine)                          # SchemaOutOfDate if the schema is behind

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

from goatbeat_celery.core.types.errors import SchemaOutOfDate
from goatbeat_celery.migrations.trigram import TRIGRAM_INDEX_NAMES

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

__all__ = [
    "MIGRATE_COMMAND",
    "VERSION_TABLE",
    "Bind",
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

#: The same on MySQL and MariaDB, as a named lock.
_MYSQL_LOCK = "goatbeat_migrate"

#: What the migrations run on: an engine, or a connection (used inside its transaction if one
#: is open, and the caller commits; else in a transaction of its own).
Bind = sa.Engine | sa.Connection


def include_object(obj: Any, name: str | None, type_: str, reflected: bool,
                   compare_to: Any) -> bool:
    """Look only at goatbeat's tables when comparing a database with goatbeat's metadata: a
    table the database has and the metadata does not is the application's, left alone; so are
    the optional trigram indexes (goatbeat_celery.migrations.trigram), there only where
    PostgreSQL has pg_trgm."""
    if type_ == "index" and name in TRIGRAM_INDEX_NAMES:
        return False
    return not (type_ == "table" and reflected and compare_to is None)


def alembic_config(connection: sa.Connection | None = None, *,
                   target_metadata: sa.MetaData | None = None) -> Config:
    """An Alembic configuration pointing at the migrations inside the installed package;
    ``target_metadata`` (goatbeat_celery.store.schema.metadata) is only needed to compare or
    autogenerate."""
    config = Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    if connection is not None:
        config.attributes["connection"] = connection
    if target_metadata is not None:
        config.attributes["target_metadata"] = target_metadata
    return config


@lru_cache(maxsize=1)
def head_revision() -> str:
    """The revision this version of goatbeat_celery needs."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the package ships at least one revision"
    return str(head)


@contextmanager
def _transaction(bind: Bind) -> Iterator[sa.Connection]:
    if isinstance(bind, sa.Engine):
        with bind.begin() as connection:
            yield connection
    elif bind.in_transaction():
        yield bind
    else:
        with bind.begin():
            yield bind


def _run(bind: Bind, action: str, revision: str) -> tuple[str | None, str | None]:
    with _transaction(bind) as connection, _alembic_quiet():
        locked = connection.dialect.name in ("mysql", "mariadb")
        if connection.dialect.name == "postgresql":
            connection.execute(sa.select(sa.func.pg_advisory_xact_lock(_ADVISORY_LOCK_ID)))
        elif locked:
            # A named lock of the session (DDL commits there, so no transaction can hold it),
            # released below: a pooled connection outlives this call.
            connection.execute(sa.text("SELECT GET_LOCK(:name, 300)"), {"name": _MYSQL_LOCK})
        try:
            before = _read_revision(connection)
            config = alembic_config(connection)
            if action == "upgrade":
                command.upgrade(config, revision)
            else:
                command.downgrade(config, revision)
            return before, _read_revision(connection)
        finally:
            if locked:
                connection.execute(sa.text("SELECT RELEASE_LOCK(:name)"), {"name": _MYSQL_LOCK})


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


def upgrade(bind: Bind, revision: str = "head") -> tuple[str | None, str | None]:
    """Bring the schema up to ``revision`` in one transaction (DDL is transactional on both
    PostgreSQL and SQLite); concurrent callers wait for each other rather than collide.
    Returns the revisions before and after (``None``: base)."""
    return _run(bind, "upgrade", revision)


def downgrade(bind: Bind, revision: str) -> tuple[str | None, str | None]:
    """Take the schema back to ``revision`` (``"base"`` drops goatbeat's tables and history).
    Returns the revisions before and after (``None``: base)."""
    return _run(bind, "downgrade", revision)


def current_revision(bind: Bind) -> str | None:
    """The revision the database is at, or ``None`` when it was never migrated."""
    if isinstance(bind, sa.Connection):
        return _read_revision(bind)
    with bind.connect() as connection:
        return _read_revision(connection)


def _read_revision(connection: sa.Connection) -> str | None:
    # Configuring a context announces its dialect at INFO: each store opened would say so.
    with _alembic_quiet():
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        current = context.get_current_revision()
    return None if current is None else str(current)


def check_schema(bind: Bind) -> None:
    """Raise SchemaOutOfDate unless the database is exactly at :func:`head_revision`."""
    current = current_revision(bind)
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
