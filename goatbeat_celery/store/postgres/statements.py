"""The PostgreSQL store's own statements: claim batches, run reports and lease renewals in
one round trip each, whatever their size."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from goatbeat_celery.core.rules.faults import CLAIM_CLEARS
from goatbeat_celery.core.rules.runs import (
    ENDED_BY_ANY_REPORT,
    ENDED_STATE_VALUES,
    MAX_ATTEMPTS,
    RunEvent,
    RunState,
)
from goatbeat_celery.store.postgres.arrays import array_literal
from goatbeat_celery.store.schema import execution_table, lease_table
from goatbeat_celery.store.sql import EXECUTION_COLUMNS

# A claim batch in two statements of fixed text, whatever its size, with arrays unnested
# server-side instead of one VALUES row (and a dozen parameters) per execution. The first checks
# the fence (lease row share-locked) and locks the schedules; the second inserts the executions
# and advances the schedules, counting every planned run (a key that already existed is taken
# back afterwards, see _record_claims: rare, and cheaper than joining the inserted rows back).
# The task and arguments are not read again: a row locked at the version the due read saw holds
# what it read (every change to a schedule moves its version); the rest come from _CLAIM_PAYLOADS.
_LOCK_FOR_CLAIM = sa.text(
    """
    SELECT f.holder, f.token, f.expires_at, f.now, s.name, s.version, s.total_runs
    FROM (SELECT holder, token, expires_at, now() AS now
          FROM goatbeat_lease WHERE name = :lease FOR SHARE) AS f
    LEFT JOIN LATERAL (
        SELECT name, version, total_runs
        FROM goatbeat_schedule
        WHERE name = ANY(CAST(:names AS text[]))
        FOR UPDATE SKIP LOCKED
    ) AS s ON true
    """
)

#: What a dispatch carries of the locked rows the due read did not see at that version.
_CLAIM_PAYLOADS = """
    SELECT name, task, args, kwargs, options, trigger, rotate, rotate_handover
    FROM goatbeat_schedule
    WHERE name = ANY(CAST(%(names)s AS text[]))
"""


def _array_type(column: sa.Column[Any]) -> str:
    """The array type a column's values are unnested from (text whatever a string column's
    length or collation: the column checks both on insert)."""
    if isinstance(column.type, sa.String):
        return "text[]"
    return f"{column.type.compile(dialect=postgresql.dialect())}[]"  # type: ignore[no-untyped-call]


# Every column of the executions comes from the rows core.rules.claims planned (execution_columns),
# one array each, so that what a claim writes is decided there alone; what a claim clears on
# its schedule is core.rules.faults.CLAIM_CLEARS.
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


# Run decisions (core.rules.runs) written back in one statement whatever their number, each only
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
        run_traceback = u.run_traceback,
        -- core.rules.runs.settled_after_report: a run nothing waited on turns unsettled as it ends.
        settled = CASE WHEN e.settled IS NULL AND u.run_state IN ({ended}) THEN false
                       ELSE e.settled END
    FROM old, unnest(CAST(%(keys)s AS text[]), CAST(%(old_states)s AS text[]),
                CAST(%(old_runs)s AS text[]), CAST(%(old_attempts)s AS integer[]),
                CAST(%(old_heartbeats)s AS timestamptz[]), CAST(%(states)s AS text[]),
                CAST(%(runs)s AS text[]), CAST(%(workers)s AS text[]),
                CAST(%(attempts)s AS integer[]), CAST(%(started)s AS timestamptz[]),
                CAST(%(finished)s AS timestamptz[]), CAST(%(heartbeats)s AS timestamptz[]),
                CAST(%(runtimes)s AS double precision[]), CAST(%(errors)s AS text[]),
                CAST(%(tracebacks)s AS text[]))
         AS u(key, old_state, old_run, old_attempts, old_heartbeat, run_state, run_id, worker,
              run_attempts, started_at, finished_at, heartbeat_at, runtime, run_error,
              run_traceback)
    WHERE e.key = ANY(CAST(%(keys)s AS text[])) AND e.key = u.key AND old.key = e.key
      AND e.run_state IS NOT DISTINCT FROM u.old_state
      AND e.run_id IS NOT DISTINCT FROM u.old_run
      AND e.run_attempts = u.old_attempts
      AND e.heartbeat_at IS NOT DISTINCT FROM u.old_heartbeat
    RETURNING e.key, e.run_state, old.settled
    """.format(ended=", ".join(f"'{state}'" for state in ENDED_STATE_VALUES))
)


# Run reports (core.rules.runs.apply_event) folded into their rows in one statement per round, with
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
                             CAST(%(errors)s AS text[]), CAST(%(started_ages)s AS bigint[]),
                             CAST(%(tracebacks)s AS text[]))
        AS u(key, kind, run, worker, age, outcome, runtime, error, started_age, traceback)
    ), cur AS (
        SELECT e.key, e.settled, now() AS now,
               CASE WHEN e.run_state IN ({states}) THEN e.run_state END AS run_state,
               e.run_id, e.worker, e.run_attempts,
               {readable_started}, {readable_finished}, {readable_heartbeat},
               CASE WHEN e.runtime >= {min_seconds} AND e.runtime < {beyond_seconds}
                    THEN e.runtime END AS runtime,
               e.run_error, e.run_traceback
        FROM goatbeat_execution AS e
        WHERE e.key = ANY(CAST(%(keys)s AS text[]))
        ORDER BY e.key
        FOR UPDATE
    ), j AS (
        SELECT r.*, u.kind, u.run AS ev_run, u.worker AS ev_worker, u.outcome AS ev_outcome,
               u.runtime AS ev_runtime, u.error AS ev_error, u.traceback AS ev_traceback,
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
               -- An end no earlier than the start the row shows (core.rules.runs._ended).
               CASE step WHEN 'start' THEN NULL WHEN 'count' THEN finished_at
                         WHEN 'end' THEN GREATEST(at, started_at) ELSE at END AS finished_at,
               CASE WHEN step = 'start' THEN now WHEN step = 'count' THEN heartbeat_at
                    WHEN kind = 'retried' THEN at WHEN step = 'whole' THEN now
                    ELSE heartbeat_at END AS heartbeat_at,
               CASE step WHEN 'start' THEN NULL WHEN 'count' THEN runtime
                         ELSE ev_runtime END AS runtime,
               CASE step WHEN 'start' THEN NULL WHEN 'count' THEN run_error
                         ELSE ev_error END AS run_error,
               CASE step WHEN 'start' THEN NULL WHEN 'count' THEN run_traceback
                         ELSE ev_traceback END AS run_traceback
        FROM b WHERE step IS NOT NULL
    ), written AS (
        UPDATE goatbeat_execution AS e
        SET run_state = d.run_state, run_id = d.run_id, worker = d.worker,
            run_attempts = d.run_attempts, started_at = d.started_at,
            finished_at = d.finished_at, heartbeat_at = d.heartbeat_at, runtime = d.runtime,
            run_error = d.run_error, run_traceback = d.run_traceback,
            -- core.rules.runs.settled_after_report: a run nothing waited on turns unsettled as it
            -- ends.
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
                       "errors", "started_ages", "tracebacks")
_MICROSECOND = timedelta(microseconds=1)

#: The array parameters of _WRITE_RUNS, in the order of its unnest.
_WRITE_RUNS_ARRAYS = ("keys", "old_states", "old_runs", "old_attempts", "old_heartbeats",
                      "states", "runs", "workers", "attempts", "started", "finished",
                      "heartbeats", "runtimes", "errors", "tracebacks")


_TAKE_BACK_RUNS = sa.text(
    "UPDATE goatbeat_schedule SET total_runs = total_runs - :runs, "
    "total_skipped = total_skipped - :skipped WHERE name = :name"
)


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
    tracebacks: list[str | None] = []
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
        tracebacks.append(event.traceback)
    columns: tuple[Sequence[str | int | None], ...] = (
        keys, kinds, runs, workers, ages, outcomes, runtimes, errors, started_ages, tracebacks)
    return {name: array_literal(values)
            for name, values in zip(_RECORD_RUNS_ARRAYS, columns, strict=True)}


#: The holder's renewal (PostgresStore.acquire): the new expiry and the token kept.
_RENEW = (
    sa.update(lease_table)
    .where(lease_table.c.name == sa.bindparam("lease_name"),
           lease_table.c.holder == sa.bindparam("holder_name"))
    .values(expires_at=sa.func.now() + sa.bindparam("ttl", type_=sa.Interval()))
    .returning(lease_table.c.token, lease_table.c.expires_at)
)
