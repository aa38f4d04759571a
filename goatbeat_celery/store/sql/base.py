"""What the parts of the SQL store share: engines, dialect hooks and transactions."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.dialects.mysql import Insert as MySQLInsert
from sqlalchemy.dialects.postgresql import Insert as PGInsert
from sqlalchemy.dialects.sqlite import Insert as SQLiteInsert

from goatbeat_celery.core.protocols import StoreConnection
from goatbeat_celery.core.rules.claims import InFlight, in_flight
from goatbeat_celery.core.rules.fence import fenced_clock
from goatbeat_celery.core.types.audit import AuditNote
from goatbeat_celery.core.types.errors import GoatbeatError, ScheduleConflict
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.store.enclosing import Enclosing
from goatbeat_celery.store.errors import translated
from goatbeat_celery.store.schema import (
    audit_table,
    execution_table,
    lease_table,
    schedule_table,
)
from goatbeat_celery.store.sessions import CLOCK_PATH, ClockOnly, LeaseSessions
from goatbeat_celery.store.sql.execution_rows import execution_values
from goatbeat_celery.store.sql.predicates import _IS_IN_FLIGHT
from goatbeat_celery.store.url import mask_url

S = schedule_table
E = execution_table
L = lease_table


Insert = PGInsert | SQLiteInsert | MySQLInsert


def refused_edit(conn: sa.Connection, table: sa.Table, name: str, expected_version: int | None,
                 kind: str, missing: Callable[[str], GoatbeatError]) -> GoatbeatError:
    """Why a versioned UPDATE of the row named ``name`` matched none: it is gone, or another
    edit moved it past ``expected_version``."""
    version = conn.execute(
        sa.select(table.c.version).where(table.c.name == name)
    ).scalar_one_or_none()
    if version is None:
        return missing(name)
    return ScheduleConflict.stale(kind, name, version, expected_version)


class _Write:
    """One write transaction; ``announce`` asks for waiting replicas to be woken on commit."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self.announce = False


class SQLStoreBase(StoreConnection):
    """The engines, dialect hooks and transaction plumbing every part of :class:`SQLStore`
    shares, and the few helpers more than one part calls.

    ``engine`` runs write transactions; ``read_engine`` runs reads and ``single_engine`` writes
    made of one statement each (both default to ``engine``; a subclass may hand the same pool
    with other options, say autocommit, to save the round trips of BEGIN and COMMIT).
    """

    #: How many strings one ``IN`` test may carry.
    _IN_CHUNK: ClassVar[int] = 500
    #: Whether the dialect reads each schedule's newest runs in one statement (a LATERAL
    #: join); otherwise one indexed read per schedule (a UNION ALL of them, or one statement
    #: each).
    _LATERAL: ClassVar[bool] = False

    def __init__(self, engine: sa.Engine, *, read_engine: sa.Engine | None = None,
                 single_engine: sa.Engine | None = None) -> None:
        self._engine = engine
        self._reader = read_engine or engine
        self._single = single_engine or engine
        self._where = mask_url(engine.url)
        self._closed = False
        self._due_stmts: dict[tuple[bool, bool], sa.Select[Any]] = {}
        #: The schedules of the last due read, by name (SQLDue.due_schedules).
        self._due_read: Mapping[str, Schedule] = {}
        # The alert pages read from the first schedule with a scope of no instant or names (a
        # full cycle's first page, every 5 minutes), by limit and scope: built once, so that
        # SQLAlchemy keys its cache on them once (SQLAlerts.alert_evidence).
        self._alert_pages: dict[tuple[int, Any], sa.Select[Any]] = {}
        #: How a crashed lease holder is detected before its expiry (store.sessions); a
        #: subclass that can watch sessions replaces it.
        self._sessions: LeaseSessions = ClockOnly(CLOCK_PATH)

    # -- dialect hooks -------------------------------------------------------------------
    def _now_sql(self) -> sa.ColumnElement[datetime]:
        """The store's clock as an expression, read once for each statement it is used in."""
        raise NotImplementedError

    def _insert(self, table: sa.Table) -> Insert:
        raise NotImplementedError

    def _paused(self) -> sa.ColumnElement[bool]:
        """Rows paused at the store's clock (core.rules.status: disabled, or within a pause with an
        end)."""
        return sa.or_(S.c.enabled.is_(False),
                      sa.and_(S.c.paused_until.is_not(None), S.c.paused_until > self._now_sql()))

    def _in(self, column: sa.ColumnElement[str], values: Sequence[str]) -> sa.ColumnElement[bool]:
        return column.in_(values)

    def _nulls_last(self, column: sa.ColumnElement[Any]) -> tuple[sa.ColumnElement[Any], ...]:
        """``column`` ascending, NULLs after every value, as ORDER BY terms."""
        return (column.asc().nulls_last(),)

    def _subset(self, query: sa.Select[Any]) -> sa.ScalarSelect[Any]:
        """``query`` (one column, maybe a LIMIT) for ``IN`` in a statement that may change the
        table it reads."""
        return query.scalar_subquery()

    def _insert_new(self, conn: sa.Connection, table: sa.Table,
                    rows: dict[str, Any] | Sequence[dict[str, Any]], *,
                    conflict: Sequence[sa.Column[Any]] = (), conflict_where: str | None = None,
                    returning: Sequence[sa.Column[Any]] = ()) -> list[sa.Row[Any]]:
        """Insert ``rows`` (one, or several of the same columns) but those whose ``conflict``
        columns (a unique index, partial under ``conflict_where``) are taken; returns the
        ``returning`` columns of the rows inserted."""
        stmt: Any = self._insert(table)
        if isinstance(rows, dict):
            stmt, rows = stmt.values(**rows), []
        if conflict:
            stmt = stmt.on_conflict_do_nothing(
                index_elements=list(conflict),
                index_where=None if conflict_where is None else sa.text(conflict_where))
        if not returning:
            conn.execute(stmt, list(rows) or None)
            return []
        return list(conn.execute(stmt.returning(*returning), list(rows) or None).all())

    def _update_row(self, conn: sa.Connection, stmt: sa.Update,
                    table: sa.Table) -> sa.Row[Any] | None:
        """Run ``stmt``, an UPDATE of at most one row of ``table``; the row as written, or None
        when it matched none."""
        return conn.execute(stmt.returning(*table.c)).one_or_none()

    def _announce_in(self, conn: sa.Connection) -> None:
        """Inside a write transaction that other replicas should hear about."""

    def _announced(self) -> None:
        """After such a transaction committed."""

    # -- plumbing ------------------------------------------------------------------------
    #: The application's transactions this store joins (store.enclosing); a dialect whose
    #: store may join them sets it when it is opened.
    _enclosing: Enclosing | None = None

    def _joined(self) -> AbstractContextManager[sa.Connection] | None:
        """Inside the application's open transaction, the context its statements run in."""
        return None if self._enclosing is None else self._enclosing()

    @contextmanager
    def _write(self, what: str) -> Iterator[_Write]:
        with translated(what, self._where):
            joined = self._joined()
            with self._engine.begin() if joined is None else joined as conn:
                txn = _Write(conn)
                yield txn
                if txn.announce:
                    # Joined: heard when the application's transaction commits, if it does.
                    self._announce_in(conn)
            if txn.announce:
                self._announced()

    @contextmanager
    def _write_each(self, what: str) -> Iterator[sa.Connection]:
        """A connection for writes whose statements each stand alone (idempotent ones)."""
        with translated(what, self._where):
            joined = self._joined()
            with self._single.begin() if joined is None else joined as conn:
                yield conn

    @contextmanager
    def _read(self, what: str) -> Iterator[sa.Connection]:
        with translated(what, self._where):
            # Joined, a read sees what the application's transaction wrote so far.
            joined = self._joined()
            with self._reader.connect() if joined is None else joined as conn:
                yield conn

    def _read_within(self, what: str, seconds: float) -> AbstractContextManager[sa.Connection]:
        """A read the database gives up after ``seconds`` (StoreTimeout), where it can bound a
        statement; here a plain read (a dialect that can overrides it)."""
        return self._read(what)

    def _chunks(self, values: Sequence[str]) -> Iterator[Sequence[str]]:
        for start in range(0, len(values), self._IN_CHUNK):
            yield values[start:start + self._IN_CHUNK]

    def _record(self, conn: sa.Connection, entries: Sequence[tuple[str, AuditNote | None]],
                now: datetime | sa.ColumnElement[datetime] | None = None) -> None:
        """Write each ``(schedule name, note)`` as an audit entry, in the transaction of the
        change, at ``now`` (default: the store's clock)."""
        rows = [{"schedule_name": name, "action": note.action.value, "actor": note.actor,
                 "reason": note.reason,
                 "changes": {key: list(pair) for key, pair in note.changes.items()}}
                for name, note in entries if note is not None]
        if not rows:
            return
        at = self._now_sql() if now is None else now
        if isinstance(at, datetime):
            conn.execute(sa.insert(audit_table), [{**row, "at": at} for row in rows])
            return
        for row in rows:  # the clock as an SQL expression: one statement a row (one, mostly)
            conn.execute(sa.insert(audit_table).values(at=at, **row))

    def _fence(self, conn: sa.Connection, lease: LeaseGrant) -> datetime:
        """Check ``lease`` is the current, unexpired grant, with the lease row share-locked so a
        takeover waits for this transaction; return the store's clock."""
        row = conn.execute(
            sa.select(L.c.holder, L.c.token, L.c.expires_at, self._now_sql().label("now"))
            .where(L.c.name == lease.name)
            .with_for_update(read=True)
        ).one_or_none()
        return fenced_clock(lease, row)

    def failover_path(self) -> str:
        self._sessions.probe()
        return self._sessions.path

    # -- clock and waiting ---------------------------------------------------------------
    def now(self) -> datetime:
        with self._read("read the clock") as conn:
            now: datetime = conn.execute(sa.select(self._now_sql())).scalar_one()
            return now

    def has_table(self, name: str) -> bool:
        with self._read(f"look for the table {name}") as conn:
            return self._table_exists(conn, name)

    def _table_exists(self, conn: sa.Connection, name: str) -> bool:
        """Dialect hook: whether the database holds a table ``name`` the user can see."""
        return sa.inspect(conn).has_table(name)

    def wait(self, timeout: float) -> bool:
        raise NotImplementedError

    def notify(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._sessions.close()
        self._engine.dispose()

    # -- shared by several parts ---------------------------------------------------------
    def _insert_executions(self, conn: sa.Connection,
                           executions: Sequence[Execution]) -> set[str]:
        """Insert what is new; returns the keys inserted (an existing key inserts nothing)."""
        if not executions:
            return set()
        rows = self._insert_new(conn, E, [execution_values(e) for e in executions],
                                conflict=[E.c.key], returning=[E.c.key])
        return {row.key for row in rows}

    def _in_flight(self, conn: sa.Connection, names: Sequence[str]) -> dict[str, InFlight]:
        """The runs in flight of the schedules ``names`` (core.rules.claims.in_flight decides
        which), read through their partial index."""
        rows: dict[str, list[tuple[str, str, str | None]]] = {name: [] for name in names}
        for chunk in self._chunks(sorted(rows)):
            for row in conn.execute(
                sa.select(E.c.schedule_name, E.c.key, E.c.state, E.c.run_state)
                .where(self._in(E.c.schedule_name, chunk), _IS_IN_FLIGHT)
                .order_by(E.c.claimed_at, E.c.key)
            ):
                rows[row.schedule_name].append((row.key, row.state, row.run_state))
        return {name: in_flight(found) for name, found in rows.items()}
