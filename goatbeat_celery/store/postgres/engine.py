"""Engines and connections to PostgreSQL whose every blocking call is bounded in time."""

from __future__ import annotations

import math
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import URL

from goatbeat_celery.store.postgres.loaders import _InstantLoader, _JSONLoader
from goatbeat_celery.store.url import normalise_url


def split_server_options(url: URL) -> tuple[URL, str]:
    """``url`` without its ``options`` parameter, and that parameter: the store passes its own
    server options and appends them to the user's rather than replacing them."""
    given = url.query.get("options", "")
    if isinstance(given, tuple):
        given = " ".join(given)
    return url.difference_update_query(["options"]), given


def connect_args(*, connect_timeout: float, statement_timeout: float | None,
                 idle_in_transaction_timeout: float | None,
                 application_name: str | None, server_options: str = "") -> dict[str, Any]:
    """libpq parameters bounding every blocking call (``server_options``: the user's own)."""
    # Custom plans only: a generic plan cannot see how many keys an array parameter holds and
    # may pick a whole scan of a partial index over a precise primary-key lookup.
    options = [server_options] if server_options else []
    options += ["-c TimeZone=UTC", "-c plan_cache_mode=force_custom_plan"]
    if statement_timeout:
        options.append(f"-c statement_timeout={_millis(statement_timeout)}")
    if idle_in_transaction_timeout:
        options.append(
            f"-c idle_in_transaction_session_timeout={_millis(idle_in_transaction_timeout)}"
        )
    args: dict[str, Any] = {
        # libpq takes whole seconds (and treats 1 as 2).
        "connect_timeout": max(2, math.ceil(connect_timeout)),
        "options": " ".join(options),
        # A server that vanishes without closing the socket is noticed in about 11 s.
        "keepalives": 1,
        "keepalives_idle": 5,
        "keepalives_interval": 2,
        "keepalives_count": 3,
        "tcp_user_timeout": _millis(max(connect_timeout, statement_timeout or 0) + 5),
    }
    if application_name is not None:
        args["application_name"] = application_name
    return args


def _millis(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def create_postgres_engine(
    url: str | URL, *, connect_timeout: float = 5.0, statement_timeout: float | None = 5.0,
    idle_in_transaction_timeout: float | None = 10.0, pool_size: int = 5, max_overflow: int = 5,
    application_name: str = "goatbeat_celery",
) -> sa.Engine:
    """An engine on psycopg 3 whose calls are all bounded in time."""
    sa_url, server_options = split_server_options(normalise_url(url))
    engine = sa.create_engine(
        sa_url,
        # A connection killed by a server restart is replaced rather than failing a call.
        pool_pre_ping=True,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_timeout=connect_timeout,
        connect_args=connect_args(
            connect_timeout=connect_timeout, statement_timeout=statement_timeout,
            idle_in_transaction_timeout=idle_in_transaction_timeout,
            # An application_name given in the URL wins.
            application_name=None if "application_name" in sa_url.query else application_name,
            server_options=server_options,
        ),
    )
    sa.event.listen(engine, "connect", _on_connect)
    return engine


def create_migration_engine(url: str | URL) -> sa.Engine:
    """An engine fit to run the migrations: one connection, and no statement or idle timeout
    (a migration may rewrite a large table)."""
    return create_postgres_engine(url, statement_timeout=None, idle_in_transaction_timeout=None,
                                  pool_size=1, max_overflow=0)


def _close(conn: psycopg.Connection[Any] | None) -> None:
    """Close a connection of the store's own (direct or LISTEN), if open."""
    if conn is not None:
        try:
            conn.close()
        except psycopg.Error:  # already broken; nothing left to release
            pass


def _on_connect(dbapi_connection: psycopg.Connection[Any], record: Any) -> None:
    for name in ("json", "jsonb"):
        dbapi_connection.adapters.register_loader(name, _JSONLoader)
    dbapi_connection.adapters.register_loader("timestamptz", _InstantLoader)
