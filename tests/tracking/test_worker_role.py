"""Workers on a PostgreSQL role of their own, holding only what run tracking needs (SELECT and
UPDATE on the executions, SELECT on the schema revision): their reports and heartbeats are
written, they cannot touch a schedule, and a role missing a grant is named in one error line
while the events wait for the grant."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.links import doc
from goatbeat_celery.core.rules.runs import RunEventKind, RunOutcome, RunState
from goatbeat_celery.core.types.errors import StoreError
from goatbeat_celery.migrations import VERSION_TABLE
from goatbeat_celery.store import open_store
from goatbeat_celery.store.schema import EXECUTION_TABLE
from goatbeat_celery.worker.tracking.writer import RunWriter, _noted
from tests.conformance.support import LONG_TTL, claim_next, create_due
from tests.support.waiting import wait_for

#: The writer wakes every 20 ms and backs off to 80 ms at most.
FLUSH = 0.02
BACKOFF_MAX = 0.08
#: Hundreds of the writer's wake-ups: a busy two-core machine delivers them within seconds.
CATCH_UP = 10.0
#: What docs/deploying.md grants the workers' role.
WORKER_GRANTS = (f"GRANT SELECT, UPDATE ON {EXECUTION_TABLE} TO {{role}}",
                 f"GRANT SELECT ON {VERSION_TABLE} TO {{role}}")


@pytest.fixture
def admin(pg_empty_url: str) -> Iterator[sa.Engine]:
    engine = sa.create_engine(pg_empty_url, poolclass=sa.NullPool,
                              isolation_level="AUTOCOMMIT")
    yield engine
    engine.dispose()


@pytest.fixture
def worker_role(admin: sa.Engine, pg_empty_url: str) -> Iterator[tuple[str, str]]:
    """A new login role with no grant yet, and the URL a worker would connect with."""
    role = f"goatbeat_worker_{secrets.token_hex(4)}"
    password = secrets.token_hex(8)
    with admin.connect() as connection:
        connection.execute(sa.text(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'"))
    url = make_url(pg_empty_url).set(username=role, password=password)
    try:
        yield role, url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f"DROP OWNED BY {role}"))
            connection.execute(sa.text(f"DROP ROLE {role}"))


def grant(admin: sa.Engine, *statements: str, role: str) -> None:
    with admin.connect() as connection:
        for statement in statements:
            connection.execute(sa.text(statement.format(role=role)))


def on(url: str) -> Schedules:
    """The API on the database ``url`` names, as the role it names (a context manager)."""
    return Schedules(open_store(url))


def submitted_execution(url: str, name: str = "report") -> str:
    """The key of an execution beat claimed and the broker took, written as beat (the
    database's owner here)."""
    store = open_store(url)
    try:
        grant_ = store.acquire("beat", "replica", LONG_TTL)
        assert grant_ is not None
        schedule = create_due(store, name)
        (dispatch,) = store.claim([claim_next(schedule)], lease=grant_).dispatches
        assert store.mark_submitted([dispatch.key]) == 1
        return dispatch.key
    finally:
        store.close()


@pytest.fixture
def make_writer(worker_role: tuple[str, str]) -> Iterator[Callable[..., RunWriter]]:
    made: list[RunWriter] = []

    def make(**options: object) -> RunWriter:
        writer = RunWriter(lambda: open_store(worker_role[1]), flush_interval=FLUSH,
                           backoff_max=BACKOFF_MAX, **{"heartbeat_interval": 60.0, **options})
        made.append(writer)
        return writer

    yield make
    for writer in made:
        writer.stop(timeout=2)


def started(key: str) -> tuple[str, str, str | None, str, float, str | None, float | None,
                                 str | None, float | None]:
    return _noted(RunEventKind.STARTED, key, "run-1", "celery@w", time.monotonic())


def test_the_least_rights_role_writes_reports_and_heartbeats(
        admin: sa.Engine, worker_role: tuple[str, str], pg_empty_url: str,
        make_writer: Callable[..., RunWriter]) -> None:
    role, _ = worker_role
    grant(admin, *WORKER_GRANTS, role=role)
    key = submitted_execution(pg_empty_url)
    running = [key]
    writer = make_writer(heartbeat_interval=0.05, running=lambda: list(running))

    writer.put(started(key))
    wait_for(lambda: writer.stats.heartbeats >= 2, timeout=CATCH_UP, what="two heartbeats")
    running.clear()
    began = time.monotonic()
    writer.put(_noted(RunEventKind.FINISHED, key, "run-1", "celery@w", time.monotonic(),
                      RunOutcome.FAILED, runtime=0.25, error="ValueError: no", started=began))
    assert writer.flush(CATCH_UP)

    assert writer.stats.written == 2
    assert writer.stats.failed_writes == 0
    with on(pg_empty_url) as schedules:
        (run,) = schedules.history("report")
    assert run.key == key
    assert run.run_state is RunState.FAILED
    assert run.worker == "celery@w"
    assert run.run_error == "ValueError: no"
    assert run.heartbeat_at is not None


def test_the_least_rights_role_cannot_write_a_schedule_or_an_execution(
        admin: sa.Engine, worker_role: tuple[str, str], pg_empty_url: str) -> None:
    """Writing a schedule, or a claim beat would send, is what makes beat send a task: the
    workers' role can do neither."""
    role, url = worker_role
    grant(admin, *WORKER_GRANTS, role=role)
    key = submitted_execution(pg_empty_url)

    with on(url) as schedules, pytest.raises(StoreError) as refused:
        schedules.create("forged", "proj.anything", every=5)
    assert "permission denied for table goatbeat_schedule" in str(refused.value)
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        for statement in (
                "UPDATE goatbeat_schedule SET task = 'proj.anything'",
                "DELETE FROM goatbeat_schedule",
                f"INSERT INTO {EXECUTION_TABLE} SELECT * FROM {EXECUTION_TABLE}",
                f"DELETE FROM {EXECUTION_TABLE}",
                "UPDATE goatbeat_lease SET holder = 'worker'"):
            with engine.begin() as connection, pytest.raises(sa.exc.ProgrammingError) as caught:
                connection.execute(sa.text(statement))
            assert "permission denied" in str(caught.value), statement
    finally:
        engine.dispose()
    with on(pg_empty_url) as schedules:
        assert [s.name for s in schedules.list()] == ["report"]
        assert [run.key for run in schedules.history("report")] == [key]


def test_a_missing_grant_is_named_once_per_privilege_and_the_events_wait_for_it(
        admin: sa.Engine, worker_role: tuple[str, str], pg_empty_url: str,
        make_writer: Callable[..., RunWriter], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="goatbeat_celery.worker.tracking")
    role, _ = worker_role
    key = submitted_execution(pg_empty_url)
    writer = make_writer(max_events=5)

    for _ in range(8):
        writer.put(started(key))  # the first 3 dropped: past the bound while nothing is written
    wait_for(lambda: writer.stats.failed_writes >= 5, timeout=CATCH_UP,
             what="failed writes without the revision's grant")
    grant(admin, WORKER_GRANTS[1], role=role)
    failed = writer.stats.failed_writes
    wait_for(lambda: writer.stats.failed_writes >= failed + 5, timeout=CATCH_UP,
             what="failed writes without the executions' grant")

    denied = [r for r in caplog.records if getattr(r, "action", None) == "run_tracking_denied"]
    assert [r.levelno for r in denied] == [logging.ERROR, logging.ERROR]
    first, second = (r.getMessage() for r in denied)
    assert "privilege (permission denied for table goatbeat_alembic_version)" in first
    assert "privilege (permission denied for table goatbeat_execution)" in second
    for message in (first, second):
        assert doc("deploying.md#a-worker-role-with-the-least-rights") in message
        assert "***@" in message and "run tracking is not allowed to write" in message
    dropped = [r.getMessage() for r in caplog.records
               if getattr(r, "action", None) == "run_events_dropped"]
    assert dropped[0].startswith("goatbeat: 3 run events dropped (buffer of 5 full: the last "
                                 "write failed: read the schema revision: "), dropped
    assert "permission denied for table goatbeat_alembic_version" in dropped[0]


def test_events_held_for_a_missing_grant_are_written_once_it_is_granted(
        admin: sa.Engine, worker_role: tuple[str, str], pg_empty_url: str,
        make_writer: Callable[..., RunWriter], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="goatbeat_celery.worker.tracking")
    role, _ = worker_role
    grant(admin, WORKER_GRANTS[1], role=role)
    key = submitted_execution(pg_empty_url)
    writer = make_writer()

    writer.put(started(key))
    wait_for(lambda: writer.stats.failed_writes >= 4, timeout=CATCH_UP, what="failed writes")
    grant(admin, WORKER_GRANTS[0], role=role)

    assert writer.flush(CATCH_UP)
    assert writer.stats.dropped == 0
    with on(pg_empty_url) as schedules:
        (run,) = schedules.history("report")
    assert run.run_state is RunState.RUNNING
    assert any(getattr(r, "action", None) == "run_tracking_recovered" for r in caplog.records)
