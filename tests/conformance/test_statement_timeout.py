"""A statement PostgreSQL cancels at goatbeat's statement timeout is told apart from an outage:
the database answered, what was asked reads too much. Beat treats both alike (retry); a person
asking a face is told to ask for less."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from goatbeat_celery.core.types.errors import StoreTimeout, StoreUnavailable
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
