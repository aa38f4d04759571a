"""Real stores for the property tests, one of each kind (ids ``sqlite`` and ``postgres``).

Each test gets a fresh one: a new SQLite file, or a new migrated PostgreSQL database (created and
dropped by ``tests.conftest.migrated_database``). Hypothesis runs many examples in one test, so a
:class:`Rig` empties its tables between examples (:meth:`Rig.reset`) instead of recreating them.
Rows are written behind the store's back through :attr:`Rig.raw`, a plain SQLAlchemy engine on
the same database, the way an operator's ``psql`` or ``sqlite3`` would write them.

Clocks: the SQLite store takes an injected clock that the tests move instantly; PostgreSQL's is
the database's ``now()``, which only real time moves.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL

from goatbeat_celery.store import Store, open_store
from goatbeat_celery.testing import ManualClock
from tests.conformance.conftest import CLOCK_START
from tests.conftest import STORE_TABLES, migrated_database
from tests.support.sqlite_files import migrated_sqlite


@dataclass
class Rig:
    """One real store, a raw engine on its database, and its clock."""

    name: str
    url: str
    store: Store
    raw: sa.Engine
    #: The injected clock (SQLite), which each example starts again from CLOCK_START; None on
    #: PostgreSQL, whose clock is the database's.
    clock: ManualClock | None

    @property
    def monotonic(self) -> Callable[[], float]:
        """The monotonic clock an Engine on this store should use: one that moves with the
        store's clock."""
        return self.clock.monotonic if self.clock is not None else time.monotonic

    def now(self) -> datetime:
        return self.store.now()

    def reset(self) -> None:
        """Empty the store's tables (and restart the injected clock) for the next example."""
        with self.raw.begin() as connection:
            if self.name == "postgres":
                connection.execute(sa.text(f"TRUNCATE {', '.join(STORE_TABLES)}"))
            else:
                for table in STORE_TABLES:
                    connection.execute(sa.text(f"DELETE FROM {table}"))
        if self.clock is not None:
            self.clock.reset()

    def close(self) -> None:
        self.store.close()
        self.raw.dispose()


def _sqlite(tmp_path: Path) -> Iterator[Rig]:
    clock = ManualClock(CLOCK_START)
    url = migrated_sqlite(tmp_path / "goatbeat.db")
    rig = Rig(name="sqlite", url=url, store=open_store(url, clock=clock),
              raw=sa.create_engine(url, poolclass=sa.NullPool), clock=clock)
    yield rig
    rig.close()


def _postgres(server_url: URL) -> Iterator[Rig]:
    with migrated_database(server_url, f"goatbeat_prop_{uuid.uuid4().hex[:12]}") as url:
        rig = Rig(name="postgres", url=url, store=open_store(url),
                  raw=sa.create_engine(url, poolclass=sa.NullPool), clock=None)
        yield rig
        rig.close()


@pytest.fixture(params=["sqlite", "postgres"], ids=["sqlite", "postgres"])
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    """A fresh real store of each kind; PostgreSQL missing fails the test (pg_server_url)."""
    if request.param == "sqlite":
        yield from _sqlite(tmp_path)
    else:
        yield from _postgres(request.getfixturevalue("pg_server_url"))
