"""The PostgreSQL store folds run reports into their rows in SQL (``_RECORD_RUNS``); the other
stores apply :func:`goatbeat_celery.core.rules.runs.apply_event` in Python. Both must write the
same run columns, for any row (including values written by hand that cannot be read as
stored: unknown states, ``infinity``, years Python cannot hold, NaN and huge runtimes) and any
sequence of reports.

Each example writes one execution row inside a transaction, reads the transaction's clock,
applies the reports one statement each (as the store's rounds do), reads the row back as the
store reads it, and rolls back; the expectation is ``apply_event`` on the row as read, at that
same clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goatbeat_celery.core.rules.runs import (
    MAX_ATTEMPTS,
    RunEvent,
    RunOutcome,
    RunRecord,
    RunState,
    apply_event,
    settled_after_report,
)
from goatbeat_celery.store.postgres import _RECORD_RUNS, _on_connect, _report_arrays
from goatbeat_celery.store.schema import seconds_to_timedelta, utc_from_db
from goatbeat_celery.store.sql import run_values

pytestmark = pytest.mark.slow

KEY = "fold-key"
RUNS = [None, "r1", "r2", "r3"]
WORKERS = ["celery@a", "celery@b"]

#: An instant as a row may hold it: none, one near the transaction's clock (seconds from it),
#: or text only an operator writes.
instants = st.one_of(
    st.none(),
    st.floats(min_value=-300, max_value=300, allow_nan=False).map(lambda s: ("near", s)),
    st.sampled_from(["infinity", "-infinity", "20000-01-01 00:00:00+00",
                     "0001-01-01 00:00:00+00"]).map(lambda text: ("text", text)),
)
rows = st.fixed_dictionaries({
    "run_state": st.sampled_from([None, *(state.value for state in RunState), "exploded"]),
    "run_id": st.sampled_from(RUNS),
    "worker": st.sampled_from([None, *WORKERS]),
    "run_attempts": st.one_of(st.integers(min_value=0, max_value=4),
                              st.sampled_from([-1, MAX_ATTEMPTS - 1, MAX_ATTEMPTS])),
    "started_at": instants,
    "finished_at": instants,
    "heartbeat_at": instants,
    "runtime": st.one_of(st.none(), st.floats(min_value=0, max_value=1e4),
                         st.sampled_from([math.nan, math.inf, -math.inf, 1e300,
                                          86_400_000_000_000.0, -86_399_999_913_600.0])),
    "run_error": st.sampled_from([None, "boom", 'quote " and \\ backslash', "NULL", "{a,b}"]),
    "run_traceback": st.sampled_from([None, "Traceback:\n  line 1\nValueError: boom"]),
    "settled": st.sampled_from([None, False, True]),
})
ages = st.integers(min_value=0, max_value=300_000_000).map(lambda us: timedelta(microseconds=us))


@st.composite
def reports(draw: Any) -> RunEvent:
    kind = draw(st.sampled_from(["started", "retried", "finished"]))
    worker = draw(st.sampled_from(WORKERS))
    age = draw(ages)
    if kind == "started":
        return RunEvent.started(KEY, run=draw(st.sampled_from(RUNS[1:])), worker=worker,
                                age=age)
    run = draw(st.sampled_from(RUNS))
    runtime = draw(st.one_of(st.none(), ages))
    error = draw(st.sampled_from([None, "ValueError: bad", 'a "quoted" \\ error']))
    started_age = draw(st.one_of(st.none(), ages))
    traceback = draw(st.sampled_from([None, 'Traceback:\n  "q" \\ {a,b}\nValueError: bad']))
    if kind == "retried":
        return RunEvent.retried(KEY, run=run, worker=worker, age=age, runtime=runtime,
                                error=error, started_age=started_age, traceback=traceback)
    return RunEvent.finished(KEY, run=run, worker=worker, age=age,
                             outcome=draw(st.sampled_from(list(RunOutcome))),
                             runtime=runtime, error=error, started_age=started_age,
                             traceback=traceback)


@pytest.fixture(scope="module")
def connection(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection with the store's loaders, on the session's migrated database."""
    url = sa.engine.make_url(pg_url).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False),
                         options="-c TimeZone=UTC") as conn:
        _on_connect(conn, None)
        yield conn


def _instant(value: Any, now: datetime) -> str | None:
    if value is None:
        return None
    kind, payload = value
    return (now + timedelta(seconds=payload)).isoformat() if kind == "near" else payload


def _read(cursor: psycopg.Cursor[Any]) -> tuple[RunRecord, bool | None]:
    """The row's run columns as the store reads them (sql.run_values), and its ``settled``."""
    cursor.execute("SELECT run_state, run_id, worker, run_attempts, started_at, finished_at, "
                   "heartbeat_at, runtime, run_error, run_traceback, settled "
                   "FROM goatbeat_execution "
                   "WHERE key = %s", (KEY,))
    (state, run_id, worker, attempts, started, finished, heartbeat, runtime, error, traceback,
     settled) = cursor.fetchone()  # type: ignore[misc]
    _, record = run_values((
        state, run_id, worker, attempts, utc_from_db(started), utc_from_db(finished),
        utc_from_db(heartbeat), None if runtime is None else seconds_to_timedelta(runtime),
        error, traceback))
    return record, settled


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row=rows, events=st.lists(reports(), min_size=1, max_size=3))
def test_the_sql_fold_writes_what_apply_event_decides(
        connection: psycopg.Connection[Any], row: dict[str, Any],
        events: list[RunEvent]) -> None:
    with connection.cursor() as cursor:
        try:
            cursor.execute("SELECT now()")
            now = utc_from_db(cursor.fetchone()[0])  # type: ignore[index]
            assert now is not None
            cursor.execute(
                "INSERT INTO goatbeat_execution (key, schedule_name, occurrence_at, due_at, "
                "token, state, claimed_at, submitted_at, attempts, missed, manual, run_state, "
                "run_id, worker, run_attempts, started_at, finished_at, heartbeat_at, runtime, "
                "run_error, run_traceback, settled) VALUES (%(key)s, 'fold', now(), now(), 1, "
                "'submitted', "
                "now(), now(), 1, 0, false, %(run_state)s, %(run_id)s, %(worker)s, "
                "%(run_attempts)s, CAST(%(started_at)s AS timestamptz), "
                "CAST(%(finished_at)s AS timestamptz), CAST(%(heartbeat_at)s AS timestamptz), "
                "CAST(%(runtime)s AS double precision), %(run_error)s, %(run_traceback)s, "
                "%(settled)s)",
                {**row, "key": KEY, "runtime": None if row["runtime"] is None
                 else repr(row["runtime"]),
                 **{name: _instant(row[name], now)
                    for name in ("started_at", "finished_at", "heartbeat_at")}})
            expected, settled = _read(cursor)
            for event in events:
                after = apply_event(expected, event, now)
                if after is not expected:
                    settled = settled_after_report(settled, after.run_state)
                expected = after
                cursor.execute(_RECORD_RUNS, _report_arrays([event]))
                assert cursor.fetchone()[0] == 1  # type: ignore[index]
                assert _read(cursor) == (expected, settled), event
        finally:
            connection.rollback()
