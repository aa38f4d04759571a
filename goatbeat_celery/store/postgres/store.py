"""The PostgreSQL store: the SQL store with PostgreSQL's clock, arrays and statements."""

from __future__ import annotations

import functools
import logging
import operator
import socket
import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.rows import namedtuple_row
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import URL

from goatbeat_celery.core.rules.claims import ClaimPlan
from goatbeat_celery.core.rules.fence import fenced_clock
from goatbeat_celery.core.rules.runs import ENDED_STATE_VALUES, RunEvent
from goatbeat_celery.core.rules.shards import Shard
from goatbeat_celery.core.types.claims import Waiting
from goatbeat_celery.core.types.errors import (
    ConfigurationError,
    StoreError,
    StoreTimeout,
)
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.lease import LeaseGrant, LeaseInfo
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.store.enclosing import enclosing_for
from goatbeat_celery.store.errors import translated
from goatbeat_celery.store.migrate import prepare_schema
from goatbeat_celery.store.postgres.arrays import array_literal
from goatbeat_celery.store.postgres.direct import PostgresDirect, Prepared, prepared
from goatbeat_celery.store.postgres.engine import (
    connect_args,
    create_migration_engine,
    create_postgres_engine,
    split_server_options,
)
from goatbeat_celery.store.postgres.listen import PostgresListening
from goatbeat_celery.store.postgres.loaders import _converted_due_row, _LockedRow, fast_instants
from goatbeat_celery.store.postgres.sessions import PostgresSessions
from goatbeat_celery.store.postgres.statements import (
    _CLAIM_CLEARS,
    _CLAIM_PAYLOADS,
    _LOCK_FOR_CLAIM,
    _RECORD_CLAIMS,
    _RECORD_RUNS,
    _RENEW,
    _TAKE_BACK_RUNS,
    _WRITE_RUNS,
    _WRITE_RUNS_ARRAYS,
    _report_arrays,
)
from goatbeat_celery.store.postgres.stuck import end_stuck_holders
from goatbeat_celery.store.schema import UTCDateTime, lease_table, utc_from_db
from goatbeat_celery.store.sessions import CLOCK_PATH, ClockOnly
from goatbeat_celery.store.sql import (
    Insert,
    RunChange,
    SQLStore,
    due_params,
    execution_columns,
    waiting_from_row,
)
from goatbeat_celery.store.sql.lease import (
    lease_info,
    leases_named_like,
    prefix_pattern,
    stale_names_like,
)
from goatbeat_celery.store.url import normalise_url

logger = logging.getLogger(__name__)


class PostgresStore(PostgresListening, PostgresDirect, SQLStore):
    """ScheduleStore and LeaseManager on PostgreSQL (psycopg 3).

    The schema must be at the current revision (SchemaOutOfDate otherwise); pass
    ``create_schema=True`` to run the migrations on open instead.

    The LISTEN connection is opened by the first :meth:`wait` (a store that never waits, as
    in a CLI command, never opens it), which then returns at once: what was announced before
    anyone listened must be looked at. It is opened again the same way after it is lost.
    """

    #: NOTIFY reaches every replica, from any process: edits, releases, and the run reports
    #: that end a run some schedule's policy waits on (:meth:`_write_runs`).
    wakes_on_every_change = True

    #: Arrays carry any number of keys in one bound parameter.
    _IN_CHUNK = 10_000
    #: The newest runs of a page of schedules in one statement.
    _LATERAL = True

    def __init__(
        self, url: str | URL, *, create_schema: bool = False, connect_timeout: float = 5.0,
        statement_timeout: float = 5.0, idle_in_transaction_timeout: float = 10.0,
        pool_size: int = 5, max_overflow: int = 5,
        application_name: str = "goatbeat_celery", session_locks: bool = True,
    ) -> None:
        problems = [
            Problem(name, f"must be a positive number of seconds, got {value!r}")
            for name, value in (("connect_timeout", connect_timeout),
                                ("statement_timeout", statement_timeout),
                                ("idle_in_transaction_timeout", idle_in_transaction_timeout))
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0
        ]
        if not isinstance(session_locks, bool):
            problems.append(Problem("session_locks",
                                    f"expected True or False, got {session_locks!r}"))
        if problems:
            raise ConfigurationError(problems, subject="PostgreSQL store options")
        sa_url = normalise_url(url)
        engine = create_postgres_engine(
            sa_url, connect_timeout=connect_timeout, statement_timeout=statement_timeout,
            idle_in_transaction_timeout=idle_in_transaction_timeout, pool_size=pool_size,
            max_overflow=max_overflow, application_name=application_name,
        )
        # Reads and one-statement writes need no transaction: autocommit spares them the round
        # trips of BEGIN and COMMIT.
        autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
        super().__init__(engine, read_engine=autocommit, single_engine=autocommit)
        # The application's own transactions on this database, which API changes join.
        self._enclosing = enclosing_for(sa_url)
        listen_url, server_options = split_server_options(sa_url)
        self._connect_kwargs = connect_args(
            connect_timeout=connect_timeout, statement_timeout=statement_timeout,
            idle_in_transaction_timeout=None,
            application_name=(None if "application_name" in sa_url.query
                              else f"{application_name}:listen"),
            server_options=server_options,
        )
        self._conninfo = listen_url.set(drivername="postgresql").render_as_string(
            hide_password=False)
        self._listener = None
        # The direct connection (PostgresDirect), opened on first use.
        self._direct_kwargs = {**self._connect_kwargs, "application_name": None
                               if "application_name" in sa_url.query else application_name}
        self._direct_conn = None
        self._direct_lock = threading.Lock()
        self._statement_timeout = float(statement_timeout)
        if session_locks:
            self._sessions = PostgresSessions(self._conninfo, connect_args(
                connect_timeout=connect_timeout, statement_timeout=None,
                idle_in_transaction_timeout=None, server_options=server_options,
                # A standby's lock request waits here as long as the holder lives.
                application_name=(None if "application_name" in sa_url.query
                                  else f"{application_name}:session")))
        else:
            self._sessions = ClockOnly(f"{CLOCK_PATH} (goatbeat_session_locks is off)")
        dialect = engine.dialect
        self._renew_sql = str(_RENEW.compile(dialect=dialect))
        self._renew_many = prepared("goatbeat_renew_leases", self._renewal_and_waiting())
        self._renew_watching = prepared("goatbeat_renew_watching",
                                        self._renewal_and_waiting(watching=True))
        self._direct_names, self._direct_loader = set(), None
        self._list_leases = prepared("goatbeat_list_leases", leases_named_like(sa.func.now()))
        self._stale_sql = str(sa.select(_stale_unkept()).compile(dialect=dialect))
        # What waits, as the renewal of this wake read it beside the leases: the look for
        # waiting work made in the same wake takes it (waiting()); the next wait, or a write
        # of this store's own, drops it.
        self._renewal_waiting: Waiting | None = None
        self._waiting_sql = str(self._waiting_statement().compile(dialect=dialect))
        self._due_sql: dict[tuple[bool, bool], str] = {}
        self._lock_sql = str(_LOCK_FOR_CLAIM.compile(dialect=dialect))
        self._listen_lock = threading.Lock()
        self._wake_ends = None
        try:
            prepare_schema(engine, create=create_schema,
                           migration_engine=lambda: create_migration_engine(sa_url))
        except BaseException:
            engine.dispose()
            raise
        # close() writes to one end to end a wait at once, from any thread; the waiting thread
        # selects on the other end beside the LISTEN socket.
        self._wake_ends = socket.socketpair()
        for end in self._wake_ends:
            end.setblocking(False)

    # -- dialect hooks -------------------------------------------------------------------
    def _now_sql(self) -> sa.ColumnElement[datetime]:
        return sa.func.now(type_=UTCDateTime())

    def _insert(self, table: sa.Table) -> Insert:
        return postgresql.insert(table)

    def has_table(self, name: str) -> bool:
        # On the direct connection an idle leader renews on: by the time it is asked the pool
        # may hold no connection open, and opening one cost 5 ms of CPU. Found as a query
        # finds it (the search path), in one statement: the inspector's catalog reads cost
        # several times more.
        row = self._direct(f"look for the table {name}",
                           "SELECT to_regclass(%(name)s) IS NOT NULL", {"name": name})
        return bool(row and row[0])

    def _in(self, column: sa.ColumnElement[str], values: Sequence[str]) -> sa.ColumnElement[bool]:
        # One array parameter: the same statement text whatever the number of keys. Bound
        # untyped, so that the server reads it as text[] at once: a text parameter cast to
        # text[] is parsed again for every row a sequential scan reads (a thousand keys against
        # a few thousand rows took a second).
        array = sa.cast(sa.bindparam(None, array_literal(values), type_=sa.types.NullType()),
                        postgresql.ARRAY(sa.Text()))
        return column == sa.any_(array)

    def _lock_for_claim(self, conn: sa.Connection, lease: LeaseGrant,
                        names: Sequence[str]) -> tuple[datetime, dict[str, Any]]:
        # On the driver's cursor, as the due read: the rows are few columns of plain values.
        cursor = conn.connection.dbapi_connection.cursor(  # type: ignore[union-attr]
            row_factory=namedtuple_row)
        try:
            cursor.execute(self._lock_sql, {"lease": lease.name, "names": array_literal(names)})
            found = cursor.fetchall()
            # No row, no grant. psycopg returns instants in the session's zone, UTC; compare
            # them as they come.
            now = fenced_clock(lease, found[0] if found else None).astimezone(UTC)
            read = self._due_read
            rows: dict[str, Any] = {}
            unseen: list[str] = []
            for row in found:
                name = row.name
                if name is None:
                    continue
                schedule = read.get(name)
                if schedule is not None and schedule.row_version == row.version:
                    rows[name] = _LockedRow.of(schedule, row.total_runs)
                else:
                    unseen.append(name)
            if unseen:
                # Locked at another version than the due read saw (a conflict, which
                # dispatches nothing), or claimed without a due read of this store's.
                cursor.execute(_CLAIM_PAYLOADS, {"names": array_literal(unseen)})
                locked = {row.name: row for row in found if row.name is not None}
                for payload in cursor.fetchall():
                    rows[payload.name] = _LockedRow(
                        name=payload.name, version=locked[payload.name].version,
                        task=payload.task, args=payload.args, kwargs=payload.kwargs,
                        options=payload.options, trigger=payload.trigger,
                        total_runs=locked[payload.name].total_runs, rotate=payload.rotate,
                        rotate_handover=payload.rotate_handover)
        finally:
            cursor.close()
        return now, rows

    def _record_claims(self, conn: sa.Connection, plan: ClaimPlan) -> set[str]:
        advances = plan.advances
        if not advances:
            return set()
        executions = plan.executions
        result = conn.execute(_RECORD_CLAIMS, {
            **{f"e_{name}": array_literal(column)
               for name, column in execution_columns(executions).items()},
            **_CLAIM_CLEARS,
            "a_names": array_literal([a.name for a in advances]),
            "a_versions": array_literal([a.version for a in advances]),
            "a_next_occurrences": array_literal([a.next_occurrence_at for a in advances]),
            "a_next_runs": array_literal([a.next_run_at for a in advances]),
            "a_last_occurrences": array_literal([a.last_occurrence_at for a in advances]),
            "a_runs": array_literal([a.runs for a in advances]),
            "a_missed": array_literal([a.missed for a in advances]),
            "a_skipped": array_literal([a.skipped for a in advances]),
        })
        inserted = set(result.scalars())
        if len(inserted) < len(executions):
            # Some keys existed already: take back what ClaimPlan.counted does not count.
            existed: dict[str, dict[str, Any]] = {}
            for planned, counted in zip(advances, plan.counted(inserted), strict=True):
                runs, skipped = planned.runs - counted.runs, planned.skipped - counted.skipped
                if runs or skipped:
                    taken = existed.setdefault(planned.name,
                                               {"name": planned.name, "runs": 0, "skipped": 0})
                    taken["runs"] += runs
                    taken["skipped"] += skipped
            conn.execute(_TAKE_BACK_RUNS, list(existed.values()))
        return inserted

    def record_runs(self, events: Sequence[RunEvent]) -> int:
        # Each key's reports in order: its first in the first round, its second (rare: a
        # retry and its next attempt written together) in the second, and so on.
        rounds: list[list[RunEvent]] = []
        seen: dict[str, int] = {}
        for event in events:
            index = seen.get(event.key, 0)
            seen[event.key] = index + 1
            if index == len(rounds):
                rounds.append([])
            rounds[index].append(event)
        unknown = 0
        announce = False
        with self._write_each("record runs") as conn:
            cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
            try:
                for batch in rounds:
                    for start in range(0, len(batch), self._IN_CHUNK):
                        chunk = batch[start:start + self._IN_CHUNK]
                        cursor.execute(_RECORD_RUNS, _report_arrays(chunk))
                        found, waited_on = cursor.fetchone()  # type: ignore[misc]
                        unknown += len(chunk) - found
                        announce = announce or waited_on
            finally:
                cursor.close()
            if announce:
                # A run policy waits on an end written here (a fixed delay, a held run).
                self._announce_in(conn)
        return unknown

    def _write_runs(self, conn: sa.Connection, changes: Sequence[RunChange]) -> set[str]:
        if not changes:
            return set()
        columns: tuple[list[Any], ...] = tuple([] for _ in _WRITE_RUNS_ARRAYS)
        (keys, old_states, old_runs, old_attempts, old_heartbeats, states, runs, workers,
         attempts, started, finished, heartbeats, runtimes, errors, tracebacks) = columns
        for change in sorted(changes, key=lambda change: change.key):
            read, decided = change.read, change.decided
            keys.append(change.key)
            old_states.append(read["run_state"])
            old_runs.append(read["run_id"])
            old_attempts.append(read["run_attempts"])
            old_heartbeats.append(read["heartbeat_at"])
            states.append(None if decided.run_state is None else decided.run_state.value)
            runs.append(decided.run_id)
            workers.append(decided.worker)
            attempts.append(decided.run_attempts)
            started.append(decided.started_at)
            finished.append(decided.finished_at)
            heartbeats.append(decided.heartbeat_at)
            # Seconds as text: the array literal is parsed by the server, exactly.
            runtimes.append(None if decided.runtime is None
                            else repr(decided.runtime.total_seconds()))
            errors.append(decided.run_error)
            tracebacks.append(decided.run_traceback)
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(_WRITE_RUNS, {name: array_literal(values) for name, values
                                         in zip(_WRITE_RUNS_ARRAYS, columns, strict=True)})
            written = cursor.fetchall()
        finally:
            cursor.close()
        if any(settled is False and state in ENDED_STATE_VALUES
               for _key, state, settled in written):
            # A run policy waits on this end (a fixed delay, a held run): wake the leader.
            self._announce_in(conn)
        return {key for key, _state, _settled in written}

    def _fetch_due(self, conn: sa.Connection, limit: int, shard: Shard | None = None,
                   until: datetime | None = None) -> Sequence[Sequence[Any]]:
        # The due read is the hottest one: run it on the driver's cursor and convert the few
        # typed columns here, rather than through SQLAlchemy's result rows (half its cost).
        key = (shard is not None, until is not None)
        sql = self._due_sql.get(key)
        if sql is None:
            sql = self._due_sql[key] = str(
                self._due_statement(*key).compile(dialect=conn.dialect))
        dbapi: psycopg.Connection[Any] = conn.connection.dbapi_connection  # type: ignore[assignment]
        params = due_params(limit, shard, until)
        cursor = dbapi.cursor()
        try:
            # The driver's own instant loader first (one Python call less per instant); a
            # value it cannot read (infinity, a year Python cannot hold) fails the fetch, which
            # is then made again with the loader that reads it as unreadable. A read: nothing
            # to undo.
            fast_instants(cursor)
            try:
                cursor.execute(sql, params)
                fetched = cursor.fetchall()
            except psycopg.DataError:
                cursor.close()
                cursor = dbapi.cursor()
                cursor.execute(sql, params)
                fetched = cursor.fetchall()
            return [_converted_due_row(row) for row in fetched]
        finally:
            cursor.close()

    # -- on the direct connection -------------------------------------------------------
    def acquire(self, name: str, holder: str, ttl: timedelta) -> LeaseGrant | None:
        # A renewal, the idle leader's only write, in one statement: core.rules.fence.grant_lease's
        # first case (the holder keeps its token and acquired_at; the expiry moves to now +
        # ttl). Anyone else asking goes through the general, locking path.
        row = self._direct("acquire lease", self._renew_sql,
                           {"ttl": ttl, "lease_name": name, "holder_name": holder})
        if row is None:
            return self._acquire_locking(name, holder, ttl)
        token, expires_at = row
        expires = utc_from_db(expires_at)
        assert expires is not None  # just written: now() + ttl
        return LeaseGrant(name=name, holder=holder, token=token, expires_at=expires,
                          changed_holder=False)

    def _acquire_locking(self, name: str, holder: str, ttl: timedelta) -> LeaseGrant | None:
        """The general path (SQLLeases.acquire). A lock request on the lease row that ran into
        the statement timeout may be held up by an expired holder's session stuck
        mid-statement, which no server timeout ends (store.postgres.stuck): such sessions are
        ended, and the next attempt takes the lease."""
        try:
            return super().acquire(name, holder, ttl)
        except StoreTimeout as timeout:
            try:
                with translated("end stuck lease holders", self._where):
                    end_stuck_holders(self._conninfo, self._direct_kwargs, name,
                                      within=self._statement_timeout)
            except StoreError as exc:  # a role without the right to end them: as before
                logger.warning("%s", exc, extra={"action": "stuck_holder_not_ended"})
            raise timeout

    def acquire_many(self, names: Sequence[str], holder: str,
                     ttl: timedelta) -> list[LeaseGrant | None]:
        # The leases ``holder`` holds renewed in one statement (as acquire), which also reads
        # what waits for the leader: an idle leader's wake is then one round trip.
        grants, _ = self._renewed(self._renew_many, names, holder, ttl, {})
        return grants

    def acquire_watching(self, names: Sequence[str], holder: str, ttl: timedelta,
                         prefix: str, kept: Collection[str] = ()
                         ) -> tuple[list[LeaseGrant | None], bool]:
        # The same statement, with one more column: the leader's renewal answers whether a
        # member row is to be forgotten, so that it lists them only then.
        return self._renewed(self._renew_watching, names, holder, ttl,
                             {"pattern": prefix_pattern(prefix),
                              "kept": array_literal(sorted(kept))})

    def _renewed(self, statement: Prepared, names: Sequence[str], holder: str, ttl: timedelta,
                 values: dict[str, str]) -> tuple[list[LeaseGrant | None], bool]:
        rows = self._direct_prepared("acquire leases", statement, {
            "ttl": f"{ttl.total_seconds()} seconds", "lease_names": _names_literal(tuple(names)),
            "holder_name": holder, **values})
        renewed: dict[str, LeaseGrant] = {}
        for name, token, expires_at, *_ in rows:
            expires = utc_from_db(expires_at)
            assert expires is not None  # just written: now() + ttl
            renewed[name] = LeaseGrant(name=name, holder=holder, token=token,
                                       expires_at=expires, changed_holder=False)
        stale = False
        if rows:  # every row carries the same answer
            _, _, _, now, next_due, *flags = rows[0]
            if values:
                *flags, stale = flags
            self._renewal_waiting = waiting_from_row(
                (utc_from_db(now), utc_from_db(next_due), *flags))
        grants: list[LeaseGrant | None] = []
        for name in names:  # those not renewed by the general path, as acquire does
            grant = renewed.get(name)
            grants.append(grant if grant is not None
                          else self._acquire_locking(name, holder, ttl))
        if values and not rows:  # not the holder: asked as the other stores ask
            stale = self._stale_leases(values)
        return grants, bool(stale)

    def _stale_leases(self, values: dict[str, str]) -> bool:
        row = self._direct("look for lease rows to forget", self._stale_sql, values)
        return bool(row is not None and row[0])

    def _renewal_and_waiting(self, *, watching: bool = False) -> sa.Select[Any]:
        """The holder's renewal of several leases (acquire_many), each row with the columns of
        the look for waiting work, and with ``watching`` whether a lease row matching the
        pattern bound as ``pattern`` is to be forgotten (acquire_watching)."""
        lease = lease_table
        names = sa.cast(sa.bindparam("lease_names", type_=sa.types.NullType()),
                        postgresql.ARRAY(sa.Text()))
        renewed = (sa.update(lease)
                   .where(lease.c.name == sa.any_(names),
                          lease.c.holder == sa.bindparam("holder_name"))
                   .values(expires_at=sa.func.now()
                           + sa.cast(sa.bindparam("ttl"), sa.Interval()))
                   .returning(lease.c.name, lease.c.token, lease.c.expires_at)
                   .cte("renewed"))
        waiting = self._waiting_statement().subquery("waiting")
        stmt = sa.select(renewed, waiting).select_from(renewed.join(waiting, sa.true()))
        if watching:
            stmt = stmt.add_columns(_stale_unkept().label("stale"))
        return stmt

    def prune(self, *, before: datetime, limit: int) -> int:
        params = self._prune_params(before, limit)
        with self._write_each("prune history") as conn:
            return int(conn.execute(self._prune_statement, params).scalar_one())

    @functools.cached_property
    def _prune_statement(self) -> sa.Select[Any]:
        """The deletes of a prune as data-modifying CTEs, and how many rows they deleted: one
        round trip, not a transaction of eight (an idle leader prunes every 10 minutes and
        finds nothing)."""
        counts = [sa.select(sa.func.count()).select_from(
                      delete.returning(sa.literal_column("1")).cte(f"pruned_{index}"))
                  .scalar_subquery()
                  for index, delete in enumerate(self._prune_deletes)]
        return sa.select(functools.reduce(operator.add, counts))

    def list_leases(self, prefix: str) -> list[LeaseInfo]:
        # On the direct connection, prepared: a sharded replica reads its sharding every
        # renew interval, and a leader the member rows when its renewal says one ran out.
        rows = self._direct_prepared("list leases", self._list_leases,
                                     {"pattern": prefix_pattern(prefix)})
        return [self._with_session(lease_info(row)) for row in rows]

    @contextmanager
    def _write(self, what: str) -> Iterator[Any]:
        self._renewal_waiting = None  # a write of its own: what waits may have changed
        with super()._write(what) as txn:
            yield txn

    @contextmanager
    def _write_each(self, what: str) -> Iterator[sa.Connection]:
        self._renewal_waiting = None
        with super()._write_each(what) as conn:
            yield conn

    @contextmanager
    def _read_within(self, what: str, seconds: float) -> Iterator[sa.Connection]:
        if self._joined() is not None:
            # Within an application's transaction (Django's) its own limits hold: a cancelled
            # statement would end that transaction.
            with self._read(what) as conn:
                yield conn
            return
        with translated(what, self._where), self._engine.connect() as conn, conn.begin():
            # SET LOCAL needs a transaction: the reads' pool is autocommit.
            conn.exec_driver_sql(
                f"SET LOCAL statement_timeout = {max(1, round(seconds * 1000))}")
            yield conn

    def wait(self, timeout: float) -> bool:
        self._renewal_waiting = None  # a new wake asks again
        return super().wait(timeout)

    def waiting(self) -> Waiting:
        seen, self._renewal_waiting = self._renewal_waiting, None
        if seen is not None:
            return seen
        row = self._direct("look for waiting work", self._waiting_sql, {})
        assert row is not None  # one row, always
        now, next_due, *flags = row
        return waiting_from_row((utc_from_db(now), utc_from_db(next_due), *flags))

    def close(self) -> None:
        ends = self._wake_ends
        if ends is not None:
            try:
                ends[0].send(b"x")  # ends a wait under way now, not when it runs out
            except OSError:  # already written (a second close): the waiter is told
                pass
        with self._direct_lock:
            self._drop_direct()
        with self._listen_lock:
            self._drop_listener()
            if ends is not None:
                self._wake_ends = None
                for end in ends:
                    end.close()
        super().close()


def _stale_unkept() -> sa.Exists:
    """Whether a lease row is to be forgotten (:func:`stale_names_like`) that is not among the
    names bound as ``kept``, a text array (acquire_watching)."""
    kept = sa.cast(sa.bindparam("kept", type_=sa.types.NullType()), postgresql.ARRAY(sa.Text()))
    return stale_names_like(sa.func.now(), lease_table.c.name != sa.all_(kept)).exists()


@functools.lru_cache(maxsize=64)
def _names_literal(names: tuple[str, ...]) -> str:
    """The array literal of the lease names a replica renews at every wake, built once."""
    return array_literal(names)
