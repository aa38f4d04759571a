"""The PostgreSQL store's direct connection, for one-statement autocommit calls."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, NamedTuple

import psycopg
import sqlalchemy as sa
from psycopg import abc, pq
from psycopg.adapt import Transformer
from psycopg.errors import error_from_result
from psycopg.generators import execute
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect

from goatbeat_celery.store.errors import translated
from goatbeat_celery.store.postgres.engine import _close, _on_connect
from goatbeat_celery.store.sql.base import SQLStoreBase


class Prepared(NamedTuple):
    """A statement the direct connection prepares once under ``name`` and then runs with its
    parameters as text, in the order of ``params`` (:func:`prepared`)."""

    name: bytes
    sql: bytes
    params: tuple[str, ...]


def prepared(name: str, statement: sa.ClauseElement) -> Prepared:
    """``statement`` compiled with numbered parameters ($1, $2, ...) for
    :meth:`PostgresDirect._direct_prepared`."""
    dialect: Any = psycopg_dialect.dialect
    compiled: Any = statement.compile(dialect=dialect(paramstyle="numeric_dollar"))
    return Prepared(name.encode(), str(compiled).encode(), tuple(compiled.positiontup or ()))


class PostgresDirect(SQLStoreBase):
    """The idle leader's renewals and looks for waiting work: a connection of its own,
    spared the pool's checkout and liveness ping (half a millisecond of CPU each)."""

    _conninfo: str
    _direct_kwargs: dict[str, Any]
    _direct_conn: psycopg.Connection[Any] | None
    _direct_lock: threading.Lock
    _direct_names: set[bytes]
    _direct_loader: abc.Transformer | None

    def _direct(self, what: str, sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
        """The first row of one autocommit statement on the direct connection
        (:meth:`_direct_rows`)."""
        rows = self._direct_rows(what, sql, params)
        return rows[0] if rows else None

    def _direct_rows(self, what: str, sql: str,
                     params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """The rows of one autocommit statement on the direct connection, opened on first
        use; one found broken (a server restart) is opened again and the statement tried once
        more, as the pool's ping would have it."""
        return self._on_direct(what, lambda conn: conn.execute(
            sql, params, prepare=True).fetchall())

    def _direct_prepared(self, what: str, statement: Prepared,
                         values: dict[str, str]) -> list[tuple[Any, ...]]:
        """The rows of ``statement`` run with ``values`` (text, by parameter name) on the
        direct connection, as :meth:`_direct_rows`, straight through libpq: the idle leader's
        renewal, each wake, spares psycopg's cursor and the adaptation of its parameters, a
        third of the statement's CPU when the wake starts from cold caches."""
        params = [values[name].encode() for name in statement.params]

        def run(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            pgconn = conn.pgconn
            if statement.name not in self._direct_names:
                pgconn.send_prepare(statement.name, statement.sql)
                _result(conn, conn.wait(execute(pgconn)))
                self._direct_names.add(statement.name)
            pgconn.send_query_prepared(statement.name, params)
            result = _result(conn, conn.wait(execute(pgconn)))
            rows = self._direct_loader
            if rows is None:  # one per connection, as a cursor keeps one
                rows = self._direct_loader = Transformer(conn)
            rows.set_pgresult(result)
            return rows.load_rows(0, result.ntuples, tuple)
        return self._on_direct(what, run)

    def _on_direct(self, what: str, call: Any) -> list[tuple[Any, ...]]:
        with self._direct_lock, translated(what, self._where):
            for last in (False, True):
                conn = self._direct_conn
                if conn is None or conn.closed:
                    self._direct_names, self._direct_loader = set(), None
                    conn = self._direct_conn = psycopg.connect(
                        self._conninfo, autocommit=True, **self._direct_kwargs)
                    _on_connect(conn, None)
                try:
                    rows: list[tuple[Any, ...]] = call(conn)
                    return rows
                except psycopg.Error:
                    if last or not (conn.broken or conn.closed):
                        raise
                    self._drop_direct()
        raise AssertionError("unreachable")

    def _drop_direct(self) -> None:
        conn, self._direct_conn = self._direct_conn, None
        _close(conn)


def _result(conn: psycopg.Connection[Any], results: Sequence[pq.abc.PGresult]) -> Any:
    """The one result of a statement run through libpq; the server's error as psycopg raises
    it."""
    result = results[-1]
    if result.status not in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
        raise error_from_result(result, encoding=conn.info.encoding)
    return result
