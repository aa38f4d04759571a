"""The PostgreSQL store: the production backend, shared by every replica.

Lease expiry and due-ness are judged by the database's ``now()``, never a host clock. Every
blocking call is bounded (connect timeout, ``statement_timeout``, TCP keepalives) so that no
call can outlive a leader's local deadline, and a session frozen inside a transaction is ended
by the server (``idle_in_transaction_session_timeout``) so its row locks cannot block a takeover.
Edits wake waiting replicas at once through ``LISTEN/NOTIFY`` on channel ``goatbeat``.
"""

from __future__ import annotations

import json
import logging
import math
import select
import socket
import threading
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import URL

from goatbeat_celery.core.claims import ClaimPlan
from goatbeat_celery.core.errors import ConfigurationError, StoreError
from goatbeat_celery.core.faults import CLAIM_CLEARS
from goatbeat_celery.core.fence import fenced_clock
from goatbeat_celery.core.model import UTC, LeaseGrant, Waiting
from goatbeat_celery.core.runs import (
    ENDED_BY_ANY_REPORT,
    ENDED_STATE_VALUES,
    MAX_ATTEMPTS,
    RunEvent,
    RunState,
)
from goatbeat_celery.core.shards import Shard
from goatbeat_celery.store.errors import translated
from goatbeat_celery.store.migrate import prepare_schema
from goatbeat_celery.store.schema import (
    UNREADABLE_INSTANT,
    Seconds,
    UTCDateTime,
    execution_table,
    lease_table,
    schedule_table,
    seconds_to_timedelta,
    utc_from_db,
)
from goatbeat_celery.store.sql import (
    EXECUTION_COLUMNS,
    Insert,
    RunChange,
    SQLStore,
    due_params,
    execution_columns,
    waiting_from_row,
)
from goatbeat_celery.store.url import normalise_url

logger = logging.getLogger(__name__)

#: The NOTIFY channel edits, manual runs and lease releases are announced on.
CHANNEL = "goatbeat"


# A claim batch in two statements of fixed text, whatever its size, with arrays unnested
# server-side instead of one VALUES row (and a dozen parameters) per execution. The first checks
# the fence (lease row share-locked) and locks the schedules; the second inserts the executions
# and advances the schedules, counting every planned run (a key that already existed is taken
# back afterwards, see _record_claims: rare, and cheaper than joining the inserted rows back).
_LOCK_FOR_CLAIM = sa.text(
    """
    SELECT f.holder, f.token, f.expires_at, f.now,
           s.name, s.version, s.task, s.args, s.kwargs, s.options, s.total_runs
    FROM (SELECT holder, token, expires_at, now() AS now
          FROM goatbeat_lease WHERE name = :lease FOR SHARE) AS f
    LEFT JOIN LATERAL (
        SELECT name, version, task, args, kwargs, options, total_runs
        FROM goatbeat_schedule
        WHERE name = ANY(CAST(:names AS text[]))
        FOR UPDATE SKIP LOCKED
    ) AS s ON true
    """
)


def _array_type(column: sa.Column[Any]) -> str:
    """The array type a column's values are unnested from (text whatever a string column's
    length or collation: the column checks both on insert)."""
    if isinstance(column.type, sa.String):
        return "text[]"
    return f"{column.type.compile(dialect=postgresql.dialect())}[]"  # type: ignore[no-untyped-call]


# Every column of the executions comes from the rows core.claims planned (execution_columns),
# one array each, so that what a claim writes is decided there alone; what a claim clears on
# its schedule is core.faults.CLAIM_CLEARS.
_RECORD_CLAIMS = sa.text(
    """
    WITH inserted AS (
        INSERT INTO goatbeat_execution ({columns})
        SELECT {columns}
        FROM unnest({arrays}) AS e({columns})
        ON CONFLICT (key) DO NOTHING
        RETURNING key
    ), advanced AS (
        UPDATE goatbeat_schedule AS s
        SET next_occurrence_at = a.next_occurrence_at, next_run_at = a.next_run_at,
            last_occurrence_at = coalesce(a.last_occurrence_at, s.last_occurrence_at),
            total_runs = s.total_runs + a.runs,
            total_missed = s.total_missed + a.missed,
            total_skipped = s.total_skipped + a.skipped,
            version = s.version + 1,
            {clears}
        FROM unnest(CAST(:a_names AS text[]), CAST(:a_versions AS bigint[]),
                    CAST(:a_next_occurrences AS timestamptz[]),
                    CAST(:a_next_runs AS timestamptz[]),
                    CAST(:a_last_occurrences AS timestamptz[]),
                    CAST(:a_runs AS bigint[]), CAST(:a_missed AS bigint[]),
                    CAST(:a_skipped AS bigint[]))
             AS a(name, version, next_occurrence_at, next_run_at, last_occurrence_at, runs,
                  missed, skipped)
        -- The ANY() restates the join as an index condition, so the planner probes the primary
        -- key instead of hashing the whole table.
        WHERE s.name = ANY(CAST(:a_names AS text[]))
          AND s.name = a.name AND s.version = a.version
    )
    SELECT key FROM inserted
    """.format(
        columns=", ".join(EXECUTION_COLUMNS),
        arrays=", ".join(f"CAST(:e_{name} AS {_array_type(execution_table.c[name])})"
                         for name in EXECUTION_COLUMNS),
        clears=", ".join(f"{name} = :clear_{name}" for name in CLAIM_CLEARS),
    )
)
_CLAIM_CLEARS = {f"clear_{name}": value for name, value in CLAIM_CLEARS.items()}


# Run decisions (core.runs) written back in one statement whatever their number, each only
# where the row still holds the run columns it was decided on (compare-and-set); returns the
# keys written. Rows are locked in key order, as the keys come sorted. Run on the driver's
# cursor, as the read before it.
_WRITE_RUNS = (
    # ``old`` reads the rows as they were (a CTE sees the snapshot before the UPDATE): whether
    # a policy waited on the run already (``settled`` false before this report).
    """
    WITH old AS (SELECT key, settled FROM goatbeat_execution
                 WHERE key = ANY(CAST(%(keys)s AS text[])))
    UPDATE goatbeat_execution AS e
    SET run_state = u.run_state, run_id = u.run_id, worker = u.worker,
        run_attempts = u.run_attempts, started_at = u.started_at, finished_at = u.finished_at,
        heartbeat_at = u.heartbeat_at, runtime = u.runtime, run_error = u.run_error,
        -- core.runs.settled_after_report: a run nothing waited on turns unsettled as it ends.
        settled = CASE WHEN e.settled IS NULL AND u.run_state IN ({ended}) THEN false
                       ELSE e.settled END
    FROM old, unnest(CAST(%(keys)s AS text[]), CAST(%(old_states)s AS text[]),
                CAST(%(old_runs)s AS text[]), CAST(%(old_attempts)s AS integer[]),
                CAST(%(old_heartbeats)s AS timestamptz[]), CAST(%(states)s AS text[]),
                CAST(%(runs)s AS text[]), CAST(%(workers)s AS text[]),
                CAST(%(attempts)s AS integer[]), CAST(%(started)s AS timestamptz[]),
                CAST(%(finished)s AS timestamptz[]), CAST(%(heartbeats)s AS timestamptz[]),
                CAST(%(runtimes)s AS double precision[]), CAST(%(errors)s AS text[]))
         AS u(key, old_state, old_run, old_attempts, old_heartbeat, run_state, run_id, worker,
              run_attempts, started_at, finished_at, heartbeat_at, runtime, run_error)
    WHERE e.key = ANY(CAST(%(keys)s AS text[])) AND e.key = u.key AND old.key = e.key
      AND e.run_state IS NOT DISTINCT FROM u.old_state
      AND e.run_id IS NOT DISTINCT FROM u.old_run
      AND e.run_attempts = u.old_attempts
      AND e.heartbeat_at IS NOT DISTINCT FROM u.old_heartbeat
    RETURNING e.key, e.run_state, old.settled
    """.format(ended=", ".join(f"'{state}'" for state in ENDED_STATE_VALUES))
)


# Run reports (core.runs.apply_event) folded into their rows in one statement per round, with
# no read before: the rows are locked in key order and the report's rule is applied to each
# as it is then, server-side. This is apply_event written in SQL, for a worker's writer thread,
# which shares its process (and, under the threads pool, the interpreter lock) with the tasks:
# reading the rows back and merging them in Python cost it about twice as much. The two are
# held equal by a property test (tests/property/test_run_fold.py: random rows and reports).
# A value that cannot be read as stored (written by hand) reads as none, as run_values does.
_RECORD_RUNS = (
    """
    WITH u AS (
        SELECT * FROM unnest(CAST(%(keys)s AS text[]), CAST(%(kinds)s AS text[]),
                             CAST(%(runs)s AS text[]), CAST(%(workers)s AS text[]),
                             CAST(%(ages)s AS bigint[]), CAST(%(outcomes)s AS text[]),
                             CAST(%(runtimes)s AS double precision[]),
                             CAST(%(errors)s AS text[]), CAST(%(started_ages)s AS bigint[]))
        AS u(key, kind, run, worker, age, outcome, runtime, error, started_age)
    ), cur AS (
        SELECT e.key, e.settled, now() AS now,
               CASE WHEN e.run_state IN ({states}) THEN e.run_state END AS run_state,
               e.run_id, e.worker, e.run_attempts,
               {readable_started}, {readable_finished}, {readable_heartbeat},
               CASE WHEN e.runtime >= {min_seconds} AND e.runtime < {beyond_seconds}
                    THEN e.runtime END AS runtime,
               e.run_error
        FROM goatbeat_execution AS e
        WHERE e.key = ANY(CAST(%(keys)s AS text[]))
        ORDER BY e.key
        FOR UPDATE
    ), j AS (
        SELECT r.*, u.kind, u.run AS ev_run, u.worker AS ev_worker, u.outcome AS ev_outcome,
               u.runtime AS ev_runtime, u.error AS ev_error,
               r.now - u.age * interval '1 microsecond' AS at,
               r.now - u.started_age * interval '1 microsecond' AS ev_started,
               CASE WHEN r.run_attempts >= 0 AND r.run_attempts < {max_attempts}
                    THEN r.run_attempts + 1 ELSE r.run_attempts END AS next_attempt,
               CASE WHEN u.kind = 'retried' OR u.outcome IS NULL THEN 'retrying'
                    ELSE u.outcome END AS ended_state
        FROM cur AS r JOIN u ON u.key = r.key
    ), b AS (
        -- Which of apply_event's cases the report is (NULL: it changes nothing).
        SELECT j.*, CASE
            WHEN kind = 'started' THEN
                CASE WHEN run_id IS NOT DISTINCT FROM ev_run THEN NULL
                     WHEN started_at > at THEN 'count'
                     ELSE 'start' END
            WHEN ev_run IS NULL THEN
                CASE WHEN run_state = 'running' THEN
                         CASE WHEN worker = ev_worker THEN 'end' END
                     WHEN kind = 'retried' THEN NULL
                     WHEN run_state IS NULL OR run_state IN ({ended_by_any}) THEN 'end'
                END
            WHEN run_id IS DISTINCT FROM ev_run THEN
                CASE WHEN ev_started IS NULL OR started_at > ev_started THEN NULL
                     ELSE 'whole' END
            ELSE 'end'
        END AS step
        FROM j
    ), d AS (
        SELECT key, settled,
               CASE step WHEN 'start' THEN 'running' WHEN 'count' THEN run_state
                         ELSE ended_state END AS run_state,
               CASE WHEN step IN ('start', 'whole') THEN ev_run ELSE run_id END AS run_id,
               CASE WHEN step IN ('start', 'whole') THEN ev_worker ELSE worker END AS worker,
               CASE WHEN step = 'end' THEN run_attempts ELSE next_attempt END AS run_attempts,
               CASE step WHEN 'start' THEN at WHEN 'whole' THEN ev_started
                         ELSE started_at END AS started_at,
               -- An end no earlier than the start the row shows (core.runs._ended).
               CASE step WHEN 'start' THEN NULL WHEN 'count' THEN finished_at
                         WHEN 'end' THEN GREATEST(at, started_at) ELSE at END AS finished_at,
               CASE WHEN step = 'start' THEN now WHEN step = 'count' THEN heartbeat_at
                    WHEN kind = 'retried' THEN at WHEN step = 'whole' THEN now
                    ELSE heartbeat_at END AS heartbeat_at,
               CASE step WHEN 'start' THEN NULL WHEN 'count' THEN runtime
                         ELSE ev_runtime END AS runtime,
               CASE step WHEN 'start' THEN NULL WHEN 'count' THEN run_error
                         ELSE ev_error END AS run_error
        FROM b WHERE step IS NOT NULL
    ), written AS (
        UPDATE goatbeat_execution AS e
        SET run_state = d.run_state, run_id = d.run_id, worker = d.worker,
            run_attempts = d.run_attempts, started_at = d.started_at,
            finished_at = d.finished_at, heartbeat_at = d.heartbeat_at, runtime = d.runtime,
            run_error = d.run_error,
            -- core.runs.settled_after_report: a run nothing waited on turns unsettled as it ends.
            settled = CASE WHEN e.settled IS NULL AND d.run_state IN ({ended}) THEN false
                           ELSE e.settled END
        FROM d
        WHERE e.key = ANY(CAST(%(keys)s AS text[])) AND e.key = d.key
    )
    -- The rows found, and whether an end was written that a policy waits on (settled false).
    SELECT (SELECT count(*) FROM cur),
           EXISTS (SELECT 1 FROM d WHERE d.settled IS false AND d.run_state IN ({ended}))
    """.format(
        states=", ".join(f"'{state.value}'" for state in RunState),
        ended_by_any=", ".join(sorted(f"'{state.value}'" for state in ENDED_BY_ANY_REPORT)),
        ended=", ".join(f"'{state}'" for state in ENDED_STATE_VALUES),
        max_attempts=MAX_ATTEMPTS,
        # What timedelta holds, in seconds (seconds_to_timedelta reads nothing beyond; the
        # float nearest its maximum is just past it).
        min_seconds=repr(timedelta.min.total_seconds()),
        beyond_seconds=repr(timedelta.max.total_seconds()),
        **{f"readable_{name}": (
            # What Python's datetime holds (psycopg reads infinity and other years as
            # UNREADABLE_INSTANT, which run_values reads as none).
            f"CASE WHEN e.{column} >= '0001-01-01 00:00:00+00' "
            f"AND e.{column} < '10000-01-01 00:00:00+00' THEN e.{column} END AS {column}")
           for name, column in (("started", "started_at"), ("finished", "finished_at"),
                                ("heartbeat", "heartbeat_at"))},
    )
)
#: The array parameters of _RECORD_RUNS, in the order of its unnest.
_RECORD_RUNS_ARRAYS = ("keys", "kinds", "runs", "workers", "ages", "outcomes", "runtimes",
                       "errors", "started_ages")
_MICROSECOND = timedelta(microseconds=1)

#: The array parameters of _WRITE_RUNS, in the order of its unnest.
_WRITE_RUNS_ARRAYS = ("keys", "old_states", "old_runs", "old_attempts", "old_heartbeats",
                      "states", "runs", "workers", "attempts", "started", "finished",
                      "heartbeats", "runtimes", "errors")


_TAKE_BACK_RUNS = sa.text(
    "UPDATE goatbeat_schedule SET total_runs = total_runs - :runs, "
    "total_skipped = total_skipped - :skipped WHERE name = :name"
)


# Positions, in a row of the due statement (clock, earliest due, then the schedule's columns in
# table order), of the values SQLAlchemy's column types would convert.
_DUE_INSTANTS = (0, 1) + tuple(
    2 + index for index, column in enumerate(schedule_table.c)
    if isinstance(column.type, UTCDateTime))
_DUE_DURATIONS = tuple(
    2 + index for index, column in enumerate(schedule_table.c) if isinstance(column.type, Seconds))


def _converted_due_row(row: Sequence[Any]) -> list[Any]:
    values = list(row)
    for index in _DUE_INSTANTS:
        values[index] = utc_from_db(values[index])
    for index in _DUE_DURATIONS:
        value = values[index]
        if value is not None:
            values[index] = seconds_to_timedelta(value)
    return values


def array_literal(values: Sequence[str | int | bool | datetime | None]) -> str:
    """A PostgreSQL array literal (``{"a","b",NULL}``) of strings, integers, booleans or
    instants, bound as
    one text parameter and cast server-side: much cheaper than adapting a list element by
    element in the driver. All elements must be of one kind (or ``None``)."""
    if len(values) > 1 and all(v is values[0] for v in values):
        # The rows of one claim share most columns (its token, claim time, state): one item.
        return "{" + ",".join([array_literal(values[:1])[1:-1]] * len(values)) + "}"
    kind = next((type(v) for v in values if v is not None), str)
    if issubclass(kind, datetime):
        # ISO-8601 instants contain no character that needs quoting in an array literal.
        items = ["NULL" if v is None else v.isoformat() for v in values]  # type: ignore[union-attr]
    elif kind is int:
        items = ["NULL" if v is None else str(int(v)) for v in values]  # type: ignore[arg-type]
    elif kind is bool:
        items = ["NULL" if v is None else "t" if v else "f" for v in values]
    elif kind is str:
        items = ["NULL" if v is None else _quote(v) for v in values]  # type: ignore[arg-type]
    else:
        raise TypeError(f"cannot put {kind.__name__} values in an array literal")
    return "{" + ",".join(items) + "}"


def _quote(text: str) -> str:
    if "\\" in text or '"' in text:
        text = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text + '"'


def _report_arrays(events: Sequence[RunEvent]) -> dict[str, str]:
    """The array parameters of :data:`_RECORD_RUNS` for ``events`` (one per key)."""
    keys: list[str | None] = []
    kinds: list[str | None] = []
    runs: list[str | None] = []
    workers: list[str | None] = []
    ages: list[int | None] = []
    outcomes: list[str | None] = []
    runtimes: list[str | None] = []
    errors: list[str | None] = []
    started_ages: list[int | None] = []
    for event in events:
        keys.append(event.key)
        kinds.append(event.kind.value)
        runs.append(event.run)
        workers.append(event.worker)
        ages.append(event.age // _MICROSECOND)
        outcomes.append(None if event.outcome is None else event.outcome.value)
        # Seconds as text: the array literal is parsed by the server, exactly.
        runtimes.append(None if event.runtime is None
                        else repr(event.runtime.total_seconds()))
        errors.append(event.error)
        started_ages.append(None if event.started_age is None
                            else event.started_age // _MICROSECOND)
    columns: tuple[Sequence[str | int | None], ...] = (
        keys, kinds, runs, workers, ages, outcomes, runtimes, errors, started_ages)
    return {name: array_literal(values)
            for name, values in zip(_RECORD_RUNS_ARRAYS, columns, strict=True)}


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


#: The holder's renewal (PostgresStore.acquire): the new expiry and the token kept.
_RENEW = (
    sa.update(lease_table)
    .where(lease_table.c.name == sa.bindparam("lease_name"),
           lease_table.c.holder == sa.bindparam("holder_name"))
    .values(expires_at=sa.func.now() + sa.bindparam("ttl", type_=sa.Interval()))
    .returning(lease_table.c.token, lease_table.c.expires_at)
)


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


#: The driver's own (compiled, where available) loader of text ``timestamptz`` values.
_TIMESTAMPTZ_LOADER: type[Loader] = psycopg.adapters.get_loader(  # type: ignore[assignment]
    psycopg.postgres.types["timestamptz"].oid, psycopg.pq.Format.TEXT)


class _InstantLoader(Loader):
    """``timestamptz`` values; ``infinity`` or a year Python cannot hold (written by hand) reads
    as UNREADABLE_INSTANT instead of failing the whole result, so one row cannot stop a read.

    Wraps the driver's loader (compiled classes cannot be subclassed) and pays one Python call
    per value only."""

    def __init__(self, oid: int, context: Any = None) -> None:
        super().__init__(oid, context)
        self._load = _TIMESTAMPTZ_LOADER(oid, context).load

    def load(self, data: Buffer) -> datetime | Any:
        try:
            return self._load(data)
        except psycopg.DataError:
            return UNREADABLE_INSTANT


class _JSONLoader(Loader):
    """Text-format json/jsonb values. Most schedules have empty kwargs and options: those skip
    the parser, and the rest skip the encoding detection ``json.loads(bytes)`` does."""

    def load(self, data: Buffer) -> Any:
        if data == b"{}":
            return {}
        if data == b"[]":
            return []
        text = bytes(data).decode()
        try:
            return json.loads(text)
        except (RecursionError, ValueError):
            # Valid JSONB that Python will not read (nested too deeply, an integer of thousands
            # of digits): the text itself, which the reader names as damage, rather than a
            # failed read of every row.
            return text


class PostgresStore(SQLStore):
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

    def __init__(
        self, url: str | URL, *, create_schema: bool = False, connect_timeout: float = 5.0,
        statement_timeout: float = 5.0, idle_in_transaction_timeout: float = 10.0,
        pool_size: int = 5, max_overflow: int = 5,
        application_name: str = "goatbeat_celery",
    ) -> None:
        problems = [
            f"{name}: must be a positive number of seconds, got {value!r}"
            for name, value in (("connect_timeout", connect_timeout),
                                ("statement_timeout", statement_timeout),
                                ("idle_in_transaction_timeout", idle_in_transaction_timeout))
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0
        ]
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
        self._listener: psycopg.Connection[Any] | None = None
        # The idle leader's renewals and looks for waiting work: a connection of its own,
        # spared the pool's checkout and liveness ping (half a millisecond of CPU each).
        self._direct_kwargs = {**self._connect_kwargs, "application_name": None
                               if "application_name" in sa_url.query else application_name}
        self._direct_conn: psycopg.Connection[Any] | None = None
        self._direct_lock = threading.Lock()
        dialect = engine.dialect
        self._renew_sql = str(_RENEW.compile(dialect=dialect))
        self._waiting_sql = str(self._waiting_statement().compile(dialect=dialect))
        self._due_sql: dict[bool, str] = {}
        self._listen_lock = threading.Lock()
        self._wake_ends: tuple[socket.socket, socket.socket] | None = None
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
        result = conn.execute(_LOCK_FOR_CLAIM, {"lease": lease.name,
                                                "names": array_literal(names)})
        found = result.all()
        # No row, no grant. psycopg returns instants in the session's zone, UTC; compare them
        # as they come.
        now = fenced_clock(lease, found[0] if found else None).astimezone(UTC)
        return now, {row.name: row for row in found if row.name is not None}

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
         attempts, started, finished, heartbeats, runtimes, errors) = columns
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

    def _fetch_due(self, conn: sa.Connection, limit: int,
                   shard: Shard | None = None) -> Sequence[Sequence[Any]]:
        # The due read is the hottest one: run it on the driver's cursor and convert the few
        # typed columns here, rather than through SQLAlchemy's result rows (half its cost).
        sharded = shard is not None
        sql = self._due_sql.get(sharded)
        if sql is None:
            sql = self._due_sql[sharded] = str(
                self._due_statement(sharded).compile(dialect=conn.dialect))
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(sql, due_params(limit, shard))
            return [_converted_due_row(row) for row in cursor.fetchall()]
        finally:
            cursor.close()

    def _announce_in(self, conn: sa.Connection) -> None:
        # Delivered when (and only if) the transaction commits.
        conn.execute(sa.select(sa.func.pg_notify(CHANNEL, "")))

    # -- lease ---------------------------------------------------------------------------
    def acquire(self, name: str, holder: str, ttl: timedelta) -> LeaseGrant | None:
        # A renewal, the idle leader's only write, in one statement: core.fence.grant_lease's
        # first case (the holder keeps its token and acquired_at; the expiry moves to now +
        # ttl). Anyone else asking goes through the general, locking path.
        row = self._direct("acquire lease", self._renew_sql,
                           {"ttl": ttl, "lease_name": name, "holder_name": holder})
        if row is None:
            return super().acquire(name, holder, ttl)
        token, expires_at = row
        expires = utc_from_db(expires_at)
        assert expires is not None  # just written: now() + ttl
        return LeaseGrant(name=name, holder=holder, token=token, expires_at=expires,
                          changed_holder=False)

    def waiting(self) -> Waiting:
        row = self._direct("look for waiting work", self._waiting_sql, {})
        assert row is not None  # one row, always
        now, next_due, *flags = row
        return waiting_from_row((utc_from_db(now), utc_from_db(next_due), *flags))

    def _direct(self, what: str, sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
        """The first row of one autocommit statement on the direct connection, opened on first
        use; one found broken (a server restart) is opened again and the statement tried once
        more, as the pool's ping would have it."""
        with self._direct_lock, translated(what, self._where):
            for last in (False, True):
                conn = self._direct_conn
                if conn is None or conn.closed:
                    conn = self._direct_conn = psycopg.connect(
                        self._conninfo, autocommit=True, **self._direct_kwargs)
                    _on_connect(conn, None)
                try:
                    return conn.execute(sql, params, prepare=True).fetchone()
                except psycopg.Error:
                    if last or not (conn.broken or conn.closed):
                        raise
                    self._drop_direct()
        raise AssertionError("unreachable")

    def _drop_direct(self) -> None:
        conn, self._direct_conn = self._direct_conn, None
        _close(conn)

    # -- waiting -------------------------------------------------------------------------
    def _listen(self) -> psycopg.Connection[Any]:
        """The LISTENing connection, opened (again) if needed; call with the lock held."""
        if self._listener is not None and not self._listener.closed:
            return self._listener
        with translated("listen for changes", self._where):
            conn = psycopg.connect(self._conninfo, autocommit=True, **self._connect_kwargs)
            try:
                conn.execute(f"LISTEN {CHANNEL}")
            except BaseException:
                conn.close()
                raise
        self._listener = conn
        return conn

    def _drop_listener(self) -> None:
        conn, self._listener = self._listener, None
        _close(conn)

    def wait(self, timeout: float) -> bool:
        # One select on the LISTEN socket and the wake socket: psycopg's own wait looks at the
        # clock every 0.1 s, which an idle leader would pay for all the time it sleeps.
        deadline = time.monotonic() + max(0.0, timeout)
        with self._listen_lock:
            if self._closed or self._wake_ends is None:
                raise StoreError("wait: the store is closed")
            woken_by = self._wake_ends[1]
            reconnected = self._listener is None or self._listener.closed
            conn = self._listen()
            if reconnected:
                # Changes made while no connection listened were not heard: look again now.
                return True
            try:
                while True:
                    # What arrived already (or since the select said so) before sleeping.
                    for _ in conn.notifies(timeout=0.0, stop_after=1):
                        return True
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    ready, _, _ = select.select([conn.pgconn.socket, woken_by.fileno()], [],
                                                [], remaining)
                    if woken_by.fileno() in ready:  # close() is under way; left readable for good
                        return False
            except psycopg.Error as exc:
                # The server went away (a restart, a killed session): listen again at once.
                # StoreUnavailable if it is still down; otherwise report a wake, since
                # whatever was announced meanwhile went unheard.
                logger.info("LISTEN connection to %s lost (%s); listening again",
                            self._where, exc, extra={"action": "listen_reconnect"})
                self._drop_listener()
                self._listen()
                return True

    def notify(self) -> None:
        try:
            with self._write("notify") as txn:
                txn.announce = True
        except StoreError as exc:
            logger.warning("could not notify other replicas: %s", exc,
                           extra={"action": "notify_failed"})

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


__all__ = ["CHANNEL", "PostgresStore", "array_literal", "connect_args", "create_migration_engine",
           "create_postgres_engine"]
