"""A statement PostgreSQL cancels at goatbeat's statement timeout is told apart from an outage:
the database answered, what was asked reads too much. Beat treats both alike (retry); a person
asking a face is told to ask for less."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from goatbeat_celery.core.types.errors import StoreTimeout, StoreUnavailable
from goatbeat_celery.core.types.run_query import RunQuery
from goatbeat_celery.store import open_store
from goatbeat_celery.store.errors import translated
from goatbeat_celery.store.postgres.engine import create_postgres_engine


def test_a_statement_past_the_timeout_is_a_store_timeout(pg_url: str) -> None:
    engine = create_postgres_engine(pg_url, statement_timeout=0.2)
    try:
        with pytest.raises(StoreTimeout, match="statement timeout") as caught, \
                translated("read the runs", "postgresql://test"), engine.connect() as conn:
            conn.execute(sa.text("SELECT pg_sleep(2)"))
        # Beat's retry rules see an outage, as before.
        assert isinstance(caught.value, StoreUnavailable)
        # The same engine answers a statement within the timeout.
        with translated("read the runs", "postgresql://test"), engine.connect() as conn:
            assert conn.execute(sa.text("SELECT 1")).scalar_one() == 1
    finally:
        engine.dispose()


def test_a_run_search_given_a_time_budget_is_cancelled_at_it_and_the_store_goes_on(
        pg_empty_url: str) -> None:
    store = open_store(pg_empty_url)
    engine = sa.create_engine(pg_empty_url)
    blocker = engine.connect()
    # A read waits on a table another session holds: only its budget ends the wait (released
    # after 10 s in any case, so that a budget not applied fails the test instead of hanging).
    blocker.execute(sa.text("LOCK TABLE goatbeat_execution IN ACCESS EXCLUSIVE MODE"))
    release = threading.Timer(10, blocker.rollback)
    release.start()
    try:
        started = time.monotonic()
        with pytest.raises(StoreTimeout, match="find runs"):
            store.find_runs(RunQuery(text="t01:05"), within=0.2)
        assert time.monotonic() - started < 10
        blocker.rollback()
        # The budget was the search's alone: the store's next reads wait as long as they need.
        assert store.find_runs(RunQuery(text="t01:05")) == []
        with store._engine.connect() as conn:  # noqa: SLF001  (the pool the search used)
            assert conn.exec_driver_sql("SHOW statement_timeout").scalar_one() == "5s"
    finally:
        release.cancel()
        blocker.close()
        engine.dispose()
        store.close()
