"""Engines on MySQL 8 and MariaDB 10.6+ (PyMySQL) whose every blocking call is bounded."""

from __future__ import annotations

import math
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL

from goatbeat_celery.store.url import normalise_url

#: The session settings every connection starts with: instants are read and written in UTC
#: (DATETIME holds no zone), strict mode refuses rather than truncates a value, and a row lock
#: is waited for at most ``lock_wait`` seconds.
_SESSION = ("SET time_zone = '+00:00', sql_mode = CONCAT(@@sql_mode, ',STRICT_ALL_TABLES'), "
            "innodb_lock_wait_timeout = {lock_wait}")


def connect_args(*, connect_timeout: float, statement_timeout: float | None) -> dict[str, Any]:
    """PyMySQL parameters bounding every blocking call."""
    # Whole seconds; a network read also ends a statement that runs too long (the server's own
    # statement limits differ between MySQL and MariaDB).
    args: dict[str, Any] = {
        "connect_timeout": max(1, math.ceil(connect_timeout)),
        "init_command": _SESSION.format(lock_wait=max(1, math.ceil(statement_timeout or 50))),
        "charset": "utf8mb4",
    }
    if statement_timeout:
        args["read_timeout"] = max(1, math.ceil(statement_timeout + connect_timeout))
        args["write_timeout"] = args["read_timeout"]
    return args


def idle_transaction_limit(connection: Any, seconds: float) -> None:
    """Have the server end ``connection``'s session once it sits idle inside a transaction
    for ``seconds`` (whole seconds, at least one): a replica frozen there (a pause, SIGSTOP)
    would otherwise keep the lease row share-locked, and every takeover waiting on it, for as
    long as it stays frozen. MariaDB ends just such a session (``idle_transaction_timeout``);
    MySQL has no such limit, so there a session idle that long ends inside a transaction or
    not (``wait_timeout``), and the pool replaces it when next checked out."""
    limit = max(1, math.ceil(seconds))
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@version")
        row = cursor.fetchone()
        variable = ("idle_transaction_timeout" if row and "mariadb" in str(row[0]).lower()
                    else "wait_timeout")
        cursor.execute(f"SET SESSION {variable} = {limit}")


def create_mysql_engine(url: str | URL, *, connect_timeout: float = 5.0,
                        statement_timeout: float | None = 5.0,
                        idle_in_transaction_timeout: float | None = None, pool_size: int = 5,
                        max_overflow: int = 5, autocommit: bool = False) -> sa.Engine:
    """An engine on PyMySQL at READ COMMITTED (as PostgreSQL's default: each statement sees
    what committed before it, and locking reads take no gap locks); with ``autocommit``, one
    whose connections stay in autocommit mode, for reads and one-statement writes (switching a
    pooled connection there and back costs two round trips on MySQL). With
    ``idle_in_transaction_timeout``, the server ends a session idle inside a transaction that
    long (:func:`idle_transaction_limit`)."""
    engine = sa.create_engine(
        normalise_url(url),
        pool_pre_ping=True,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_timeout=connect_timeout,
        # The server closes idle connections after wait_timeout (8 h by default).
        pool_recycle=3600,
        isolation_level="AUTOCOMMIT" if autocommit else "READ COMMITTED",
        # Nothing to roll back on an autocommit connection given back.
        pool_reset_on_return=None if autocommit else "rollback",
        connect_args=connect_args(connect_timeout=connect_timeout,
                                  statement_timeout=statement_timeout),
        # The pool hands out the connection used last: the others may sit idle past a
        # wait_timeout set below, and are replaced only when the load asks for them.
        pool_use_lifo=idle_in_transaction_timeout is not None,
    )
    if idle_in_transaction_timeout:
        limit = idle_in_transaction_timeout
        sa.event.listen(engine, "connect",
                        lambda dbapi_connection, _record: idle_transaction_limit(
                            dbapi_connection, limit))
    return engine


def create_migration_engine(url: str | URL) -> sa.Engine:
    """An engine fit to run the migrations: one connection, no read timeout (a migration may
    rewrite a large table)."""
    return sa.create_engine(
        normalise_url(url), poolclass=sa.NullPool, isolation_level="READ COMMITTED",
        connect_args=connect_args(connect_timeout=5.0, statement_timeout=None))
