"""What the SQL stores add to the shared contract: database URLs, bounded calls and outages on
PostgreSQL, several processes on one SQLite file, and values that must read back exactly."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from goatbeat_celery.core.types.claims import PlannedClaim
from goatbeat_celery.core.types.errors import ConfigurationError, StoreError, StoreUnavailable
from goatbeat_celery.core.types.execution import idempotency_key
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.spec import ScheduleSpec
from goatbeat_celery.store import mask_url, open_store
from goatbeat_celery.store.url import normalise_url

from .conftest import Store
from .support import LONG_TTL, interval_spec

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite", "postgres"])
def sql_store(request: pytest.FixtureRequest) -> Iterator[Store]:
    if request.param == "sqlite":
        tmp_path: Path = request.getfixturevalue("tmp_path")
        store: Store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    else:
        store = open_store(request.getfixturevalue("pg_empty_url"))
    yield store
    store.close()


# -- URLs ---------------------------------------------------------------------------------
def test_an_unknown_scheme_is_refused_naming_database_url_and_the_accepted_schemes() -> None:
    with pytest.raises(ConfigurationError) as refused:
        open_store("oracle://beat:s3cret@db/app")
    message = str(refused.value)
    assert "database_url" in message
    for scheme in ("memory://", "sqlite:///", "postgresql://", "postgres://", "mysql+pymysql://"):
        assert scheme in message
    assert "s3cret" not in message


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_an_in_memory_sqlite_database_is_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match="memory://"):
        open_store(url)


@pytest.mark.parametrize("url,shown", [
    ("postgresql://beat:s3cret@db:5432/app", "postgresql://beat:***@db:5432/app"),
    ("postgresql+psycopg://beat:s3cret@db/app?sslmode=require",
     "postgresql+psycopg://beat:***@db/app?sslmode=require"),
    ("postgres://beat@db/app", "postgres://beat@db/app"),
    ("sqlite:////var/lib/goatbeat/beat.db", "sqlite:////var/lib/goatbeat/beat.db"),
    ("memory://", "memory://"),
])
def test_mask_url_hides_the_password_and_nothing_else(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_mask_url_hides_the_password_of_a_url_it_cannot_parse() -> None:
    masked = mask_url("postgresql://beat:s3cret@db:notaport/app")
    assert "s3cret" not in masked
    assert masked.startswith("postgresql://beat:")


@pytest.mark.parametrize("url", ["postgres://beat@db/app", "postgresql://beat@db/app",
                                 "postgresql+psycopg://beat@db/app"])
def test_every_postgres_spelling_connects_through_psycopg_3(url: str) -> None:
    assert normalise_url(url).drivername == "postgresql+psycopg"


def test_an_option_of_another_backend_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="statement_timeout"):
        open_store(f"sqlite:///{tmp_path / 'beat.db'}", statement_timeout=1.0)


def test_a_postgres_store_refuses_an_injected_clock(pg_empty_url: str) -> None:
    with pytest.raises(ConfigurationError, match="database clock"):
        open_store(pg_empty_url, clock=lambda: datetime.now(UTC))


# -- PostgreSQL: bounded calls and outages --------------------------------------------------
def test_server_options_in_the_url_are_kept_beside_the_store_own(pg_empty_url: str) -> None:
    url = make_url(pg_empty_url).update_query_dict(
        {"options": "-c work_mem=7MB", "application_name": "nightly-beat"})
    store = open_store(url.render_as_string(hide_password=False), statement_timeout=3)
    try:
        store.wait(0)  # the LISTEN connection too
        probe = sa.create_engine(pg_empty_url, poolclass=sa.NullPool)
        try:
            with probe.connect() as connection:
                names = connection.execute(sa.text(
                    "SELECT application_name FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()")).scalars()
                assert set(names) == {"nightly-beat"}
        finally:
            probe.dispose()
        engine: sa.Engine = store._engine  # type: ignore[attr-defined]
        with engine.connect() as connection:
            settings = connection.execute(sa.text(
                "SELECT current_setting('work_mem'), current_setting('statement_timeout'), "
                "current_setting('TimeZone')")).one()
        assert tuple(settings) == ("7MB", "3s", "UTC")
    finally:
        store.close()


def test_an_unreachable_server_fails_fast_without_showing_the_password() -> None:
    started = time.monotonic()
    # Port 9 (discard) is closed on the test machine: the connection is refused at once.
    with pytest.raises(StoreUnavailable) as refused:
        open_store("postgresql://beat:s3cret@127.0.0.1:9/app", connect_timeout=2)
    assert time.monotonic() - started < 10
    assert "s3cret" not in str(refused.value)
    assert refused.value.__cause__ is not None


@pytest.mark.parametrize("several", [False, True], ids=["one lease", "several leases"])
def test_a_call_waiting_on_a_lock_is_cut_by_the_statement_timeout(
        pg_empty_url: str, several: bool) -> None:
    """A renewal, one lease or several at once (acquire_many, run straight through libpq),
    that waits on a row lock ends at the statement timeout as an outage, and the next one
    renews."""
    store = open_store(pg_empty_url, statement_timeout=1.0)
    blocker = sa.create_engine(pg_empty_url, poolclass=sa.NullPool)

    def renew() -> LeaseGrant | None:
        if several:
            return store.acquire_many(["beat.m", "beat"], "a", LONG_TTL)[1]
        return store.acquire("beat", "a", LONG_TTL)
    try:
        grant = renew()
        assert grant is not None
        with blocker.connect() as connection:
            connection.execute(sa.text(
                "SELECT 1 FROM goatbeat_lease WHERE name = 'beat' FOR UPDATE"))
            started = time.monotonic()
            with pytest.raises(StoreUnavailable, match="acquire lease"):
                renew()
            assert time.monotonic() - started < 5
            connection.rollback()
        renewed = renew()
        assert renewed is not None and renewed.token == grant.token
    finally:
        blocker.dispose()
        store.close()


def _drop_connections(url: str) -> int:
    """What a server restart does to a client: every session but this one is ended, and gone
    from pg_stat_activity when this returns (PostgreSQL 14's wait), so that a later test of
    the same database does not count a backend still on its way out."""
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        with engine.connect() as connection:
            killed = connection.execute(sa.text(
                "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()")).scalar_one()
            return int(killed)
    finally:
        engine.dispose()


def test_the_store_carries_on_after_the_server_dropped_its_connections(
    pg_empty_url: str,
) -> None:
    store = open_store(pg_empty_url)
    peer = open_store(pg_empty_url)
    try:
        store.create_schedule(interval_spec("report"), next_occurrence_at=None,
                              next_run_at=None)
        store.wait(0)  # the first wait opens the LISTEN connection
        assert _drop_connections(pg_empty_url) >= 3  # the pools' and the LISTEN connection

        assert store.get_schedule("report").name == "report"
        grant = store.acquire("beat", "a", LONG_TTL)
        assert grant is not None
        # The LISTEN connection is opened again as soon as wait() finds it gone (waking
        # early, since announcements were missed meanwhile); it never hangs or fails.
        deadline = time.monotonic() + 10
        while store.wait(0):
            assert time.monotonic() < deadline, "wait() keeps waking with nothing announced"
        heard: list[bool] = []
        waiter = threading.Thread(target=lambda: heard.append(store.wait(10)))
        waiter.start()
        while waiter.is_alive():
            peer.request_run("report")  # repeated until the waiter, once listening, hears one
            waiter.join(0.2)
        assert heard == [True]
    finally:
        peer.close()
        store.close()


def test_a_renewal_after_the_server_dropped_its_connection_prepares_its_statement_again(
        pg_empty_url: str) -> None:
    store = open_store(pg_empty_url)
    try:
        first = store.acquire_many(["beat.m", "beat"], "a", LONG_TTL)
        assert _drop_connections(pg_empty_url) >= 1

        renewed = store.acquire_many(["beat.m", "beat"], "a", LONG_TTL)

        assert [(g.name, g.token, g.changed_holder) for g in renewed if g is not None] == [
            (g.name, g.token, False) for g in first if g is not None]
        assert len(renewed) == 2
    finally:
        store.close()


def test_a_store_that_never_waits_opens_no_listen_connection(pg_empty_url: str) -> None:
    store = open_store(pg_empty_url)
    try:
        store.now()
        assert _drop_connections(pg_empty_url) == 1  # the pool's only
    finally:
        store.close()


def test_the_first_wait_returns_at_once_then_waits_for_news(pg_empty_url: str) -> None:
    store = open_store(pg_empty_url)
    try:
        started = time.monotonic()
        assert store.wait(30) is True  # nobody listened before: look again
        assert time.monotonic() - started < 10
        assert store.wait(0.2) is False
    finally:
        store.close()


def test_close_does_not_wait_for_a_long_wait_in_another_thread(pg_empty_url: str) -> None:
    store = open_store(pg_empty_url)
    store.wait(0)  # listening from now on
    outcome: list[object] = []

    def wait() -> None:
        try:
            outcome.append(store.wait(60))
        except StoreError as exc:  # closed under it: the wait ends with an error
            outcome.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    deadline = time.monotonic() + 10
    while not store._listen_lock.locked():  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the waiter never started waiting"
        time.sleep(0.01)
    started = time.monotonic()
    store.close()
    waiter.join(10)
    assert time.monotonic() - started < 5
    assert not waiter.is_alive() and len(outcome) == 1


def test_close_is_idempotent_and_releases_the_connections(pg_empty_url: str) -> None:
    store = open_store(pg_empty_url)
    store.now()
    store.wait(0)
    store.close()
    store.close()
    assert _drop_connections(pg_empty_url) == 0


# -- SQLite: several processes on one file -----------------------------------------------
_CONTENDER = """
import json, sys
from datetime import timedelta
from goatbeat_celery.core.types.errors import ScheduleConflict
from goatbeat_celery.store import open_store

url, holder, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = open_store(url)
print("ready", flush=True)
assert sys.stdin.readline().strip() == "go"
grants, resubmitted = [], 0
for _ in range(rounds):
    try:
        store.request_run("report")  # a write of its own, between the others'
    except ScheduleConflict:  # another replica asked at the same microsecond
        pass
    grant = store.acquire("beat", holder, timedelta(seconds=60))
    if grant is not None:
        grants.append([grant.token, holder, grant.changed_holder])
        # Fenced: reads the lease, then writes the pending rows it takes.
        resubmitted += len(store.take_pending(lease=grant, limit=5))
        assert store.release(grant)
store.close()
print(json.dumps({"grants": grants, "resubmitted": resubmitted}))
"""


def test_processes_sharing_a_sqlite_file_never_hand_one_token_to_two_holders(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    setup = open_store(url)  # the schema and the schedule exist before the race starts
    setup.create_schedule(interval_spec("report"), next_occurrence_at=None, next_run_at=None)
    setup.close()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    processes = [
        subprocess.Popen([sys.executable, "-c", _CONTENDER, url, f"replica-{n}", "60"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
        for n in range(3)
    ]
    for process in processes:  # every replica has its store open before any starts
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    grants: list[tuple[int, str, bool]] = []
    resubmitted = 0
    for process in processes:
        out, err = process.communicate(timeout=120)
        # A replica that met "database is locked" (or any other error) exits non-zero.
        assert process.returncode == 0, err
        report = json.loads(out)
        grants.extend(tuple(grant) for grant in report["grants"])
        resubmitted += report["resubmitted"]

    tokens = sorted(token for token, _, _ in grants)
    # Every grant followed a release, so each took the lease over with the next token.
    assert tokens == list(range(1, len(grants) + 1))
    assert all(changed for _, _, changed in grants)
    assert resubmitted > 0


# -- values that must read back exactly --------------------------------------------------
@pytest.mark.parametrize("field,value", [
    ("misfire_grace", timedelta(microseconds=1)),
    ("misfire_grace", timedelta(seconds=0.1)),
    ("misfire_grace", timedelta(days=3650, microseconds=999_999)),
    ("offset", timedelta(seconds=59, microseconds=123_457)),
    ("jitter", timedelta(seconds=1) / 3),
])
def test_durations_read_back_to_the_microsecond(sql_store: Store, field: str,
                                                value: timedelta) -> None:
    created = sql_store.create_schedule(interval_spec("report", 3600, **{field: value}),
                                        next_occurrence_at=None, next_run_at=None)
    assert getattr(sql_store.get_schedule("report").spec, field) == value
    assert created.spec == sql_store.get_schedule("report").spec


def test_instants_in_any_zone_and_era_are_kept_and_ordered_by_instant(sql_store: Store) -> None:
    india = timezone(timedelta(hours=5, minutes=30))
    pacific = timezone(timedelta(hours=-8))
    # Listed in the order of their instants, whatever their wall times say.
    instants = [
        datetime(999, 12, 31, 23, 59, 59, 1, tzinfo=UTC),
        datetime(2026, 3, 1, 5, 0, tzinfo=india),           # 23:30 UTC the day before
        datetime(2026, 3, 1, 0, 0, tzinfo=UTC),
        datetime(2026, 2, 28, 16, 0, 0, 1, tzinfo=pacific),  # 00:00:00.000001 UTC
        datetime(2026, 3, 1, 0, 0, 0, 2, tzinfo=UTC),
    ]
    for index, instant in enumerate(reversed(instants)):
        sql_store.create_schedule(interval_spec(f"s{index}"), next_occurrence_at=instant,
                                  next_run_at=instant)

    due = sql_store.due_schedules(10).schedules

    assert [s.next_run_at for s in due] == instants
    assert all(s.next_run_at is not None and s.next_run_at.utcoffset() == timedelta(0)
               for s in due)


BAD_JSON: dict[str, tuple[dict[str, Any], str]] = {
    "tuple-in-kwargs": ({"kwargs": {"pair": (1, 2)}}, "kwargs"),
    "object-in-args": ({"args": (datetime(2026, 1, 1, tzinfo=UTC),)}, "args"),
    "nan-in-args": ({"args": (math.nan,)}, "args"),
    "integer-key-in-options": ({"options": {1: "x"}}, "options"),
    "nul-character": ({"options": {"queue": "a\x00b"}}, "options"),
}


@pytest.mark.parametrize("fields,label", list(BAD_JSON.values()), ids=list(BAD_JSON))
def test_a_value_json_cannot_keep_is_refused_naming_the_field_and_nothing_is_written(
    sql_store: Store, fields: dict[str, Any], label: str
) -> None:
    spec: ScheduleSpec = interval_spec("report", **fields)
    with pytest.raises(ConfigurationError) as refused:
        sql_store.create_schedule(spec, next_occurrence_at=None, next_run_at=None)
    assert any("'report'" in problem and label in problem for problem in refused.value.problems)
    assert sql_store.list_schedules() == []


@pytest.mark.parametrize("name", ['a"b\\c', "{x},y z", "NULL", "été:08:00"])
def test_names_with_quotes_braces_commas_and_colons_go_through_the_claim_path(
    sql_store: Store, name: str
) -> None:
    grant = sql_store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    occurrence = sql_store.now() - timedelta(minutes=1)
    sql_store.create_schedule(interval_spec(name), next_occurrence_at=occurrence,
                              next_run_at=occurrence)
    (schedule,) = sql_store.due_schedules(10).schedules
    following = occurrence + timedelta(minutes=1)

    result = sql_store.claim([PlannedClaim(
        schedule_name=name, version=schedule.row_version, occurrences=((occurrence, occurrence),),
        missed=0, next_occurrence_at=following, next_run_at=following)], lease=grant)
    sql_store.record_failures({result.dispatches[0].key: "broker down"})
    pending = sql_store.take_pending(lease=grant, limit=10)

    assert [d.key for d in result.dispatches] == [idempotency_key(name, occurrence)]
    assert [d.key for d in pending] == [idempotency_key(name, occurrence)]
    assert sql_store.mark_submitted([pending[0].key]) == 1
    assert sql_store.get_schedule(name).total_runs == 1


# -- the hot queries can use their partial indexes ----------------------------------------
def _plan(store: Any, statement: sa.Select[Any], params: dict[str, Any]) -> str:
    engine: sa.Engine = store._engine
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            # Tiny test tables would be scanned whatever the indexes: forbid that, so the plan
            # shows which index the query can use at all.
            connection.execute(sa.text("SET enable_seqscan = off"))
            sql = statement.compile(dialect=engine.dialect)
            lines = connection.exec_driver_sql("EXPLAIN " + str(sql),
                                               {**sql.params, **params}).scalars()
        else:
            lines = (str(row[3]) for row in connection.execute(
                sa.text("EXPLAIN QUERY PLAN " + str(statement.compile(dialect=engine.dialect))
                        .replace("?", ":p")), {"p": "2026-01-01 00:00:00.000000"}))
        return "\n".join(lines)


def test_the_due_query_reads_the_partial_index_of_enabled_schedules(sql_store: Store) -> None:
    for index in range(20):
        sql_store.create_schedule(interval_spec(f"s{index}", enabled=index % 2 == 0),
                                  next_occurrence_at=None, next_run_at=None)
    plan = _plan(sql_store, sql_store._due_statement(),  # type: ignore[attr-defined]
                 {"due_limit": 500, "goatbeat_now": "2026-01-01 00:00:00.000000"})
    assert plan.count("ix_goatbeat_schedule_due") == 2, plan  # due rows, and the earliest


def test_a_postgres_renewal_reads_what_waits_for_the_look_made_at_once(
        pg_empty_url: str) -> None:
    """An idle leader's wake is one round trip: the renewal of its lease and member row reads
    what waits, and the look made in the same wake takes that answer; the next look asks
    again, and a wait (the next wake) or a write through the store drops the answer."""
    store = open_store(pg_empty_url)
    other = open_store(pg_empty_url)
    try:
        assert None not in store.acquire_many(["beat.m", "beat"], "a", timedelta(seconds=30))
        store.acquire_many(["beat.m", "beat"], "a", timedelta(seconds=30))  # renewals
        schedule = other.create_schedule(interval_spec("job"), next_occurrence_at=other.now(),
                                         next_run_at=other.now())

        assert store.waiting().next_due_at is None  # the renewal's answer, read before it
        assert store.waiting().next_due_at == schedule.next_run_at  # asked again

        store.acquire_many(["beat.m", "beat"], "a", timedelta(seconds=30))  # reads it due
        other.delete_schedule("job")
        store.wait(0)  # the wake ended
        assert store.waiting().next_due_at is None

        other.create_schedule(interval_spec("job"), next_occurrence_at=other.now(),
                              next_run_at=other.now())
        store.acquire_many(["beat.m", "beat"], "a", timedelta(seconds=30))  # reads it due
        store.delete_schedule("job")  # a write of its own drops the renewal's answer
        assert store.waiting().next_due_at is None
    finally:
        other.close()
        store.close()


def test_rows_sharing_their_payloads_read_each_as_its_own_values(sql_store: Store) -> None:
    fields: dict[str, Any] = {"args": (1, "a"), "kwargs": {"size": 2.5, "who": None},
                              "options": {"queue": "reports", "priority": 3}}
    now = sql_store.now()
    for name in ("a", "b", "c"):
        sql_store.create_schedule(interval_spec(name, **fields), next_occurrence_at=now,
                                  next_run_at=now)

    first, second, third = sql_store.due_schedules(10).schedules

    for schedule in (first, second, third):
        assert (schedule.spec.args, schedule.spec.kwargs, schedule.spec.options) == (
            fields["args"], fields["kwargs"], fields["options"])
        assert schedule.spec.trigger.params == {"every": 60}
    # Each row's own objects, however the driver's values are read: code hooked around the
    # send may change what it is handed.
    assert first.spec.kwargs is not second.spec.kwargs
    assert first.spec.options is not third.spec.options
    assert first.spec.trigger.params is not second.spec.trigger.params

