"""One store fixture, parametrised over every backend (ids ``memory``, ``sqlite``, ``postgres``,
``mysql``: MariaDB or MySQL, on the database's clock as PostgreSQL).

Each backend's setup lives here, never in the tests. Where backends truly differ, the
difference is a capability of the fixture objects:

* ``clock`` moves the store's clock. Memory and SQLite stores take an injected clock that the
  tests move instantly; PostgreSQL's clock is the database's ``now()``, so moving it means
  waiting on the real clock (polling the database with a deadline).
* ``backend.expiring_ttl`` is the lease TTL of tests that wait for a lease to expire: long on an
  injected clock (moving it is free), a few seconds on PostgreSQL. A test that must do
  work under a grant before it lapses holds it for ``LONG_TTL`` and ends it with
  ``backend.let_expire(grant)``, so that a busy machine cannot lapse it early.
* ``backend.open_peer()`` gives a second store object on the same data, as another replica
  would hold: the same object for memory (its state lives in the process), a new connection
  for SQLite and PostgreSQL.
* ``backend.end_session(peer, holder)`` ends the session of a peer whose ``holder`` holds
  leases, as a crash does: the peer is closed (its connections, its file descriptors), or the
  memory store is told.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

import pytest

from goatbeat_celery.core.protocols import ScheduleStore
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.store import Store, open_store
from goatbeat_celery.store.memory import MemoryStore
from goatbeat_celery.testing import ManualClock
from tests.support.sqlite_files import migrated_sqlite

#: Where injected clocks start: an arbitrary instant, off every grid a test uses, with
#: microseconds so that stores must keep them.
CLOCK_START = datetime(2026, 3, 1, 12, 0, 0, 250_000, tzinfo=UTC)
#: How much later than asked a database clock may be reached before a test gives up.
CLOCK_SLACK = 10.0
#: The lease TTL of tests that wait for a lease to expire on PostgreSQL's real clock: what a
#: test does between taking the lease and looking just before its expiry must fit in it, and a
#: busy two-core machine running the rest of the suite has stalled a test for over 2 s.
EXPIRING_ON_POSTGRES = timedelta(seconds=4)
#: How long :meth:`Backend.let_expire` renews a grant for before letting it lapse.
LAPSE_AFTER = timedelta(milliseconds=10)


class StoreClock(Protocol):
    """Moves the store's clock forward; never backward."""

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass on the store's clock."""

    def move_to(self, instant: datetime) -> None:
        """Make the store's clock read ``instant`` or later."""

    def move_just_before(self, instant: datetime) -> None:
        """Make the store's clock read shortly before ``instant`` (and never at or after it)."""

    def monotonic(self) -> float:
        """A monotonic clock in seconds that moves with the store's clock, for an Engine."""


class DatabaseClock:
    """PostgreSQL's ``now()``: moving it is waiting for it, polled with a deadline."""

    def __init__(self, store: ScheduleStore) -> None:
        self._store = store

    def advance(self, seconds: float) -> None:
        self.move_to(self._store.now() + timedelta(seconds=seconds))

    def move_to(self, instant: datetime) -> None:
        now = self._store.now()
        deadline = time.monotonic() + max(0.0, (instant - now).total_seconds()) + CLOCK_SLACK
        while now < instant:
            assert time.monotonic() < deadline, f"database clock never reached {instant}"
            time.sleep(min(0.05, (instant - now).total_seconds()))
            now = self._store.now()

    def move_just_before(self, instant: datetime) -> None:
        # The real clock cannot be placed; the test's premise is checked instead.
        now = self._store.now()
        assert now < instant, f"database clock {now} already passed {instant}: machine too slow"

    def monotonic(self) -> float:
        return time.monotonic()


@dataclass
class Backend:
    """One store under test and what the tests need to know about its backend."""

    name: str
    store: Store
    clock: StoreClock
    expiring_ttl: timedelta
    _open_peer: Callable[[], Store]
    _peers: list[Store] = field(default_factory=list)

    def open_peer(self) -> Store:
        """Another store object on the same data, closed with the fixture."""
        peer = self._open_peer()
        if peer is not self.store:
            self._peers.append(peer)
        return peer

    def end_session(self, peer: Store, holder: str) -> None:
        """End ``peer``'s session, ``holder`` holding its leases, as its process's crash would."""
        if isinstance(peer, MemoryStore):
            peer.end_session(holder)
        else:
            peer.close()

    def let_expire(self, grant: LeaseGrant) -> LeaseGrant:
        """Let ``grant`` lapse now, as a holder that renews and then dies would: renewed by its
        holder for an instant (the token kept), then the store's clock moved past that
        instant. Returns the renewed grant."""
        renewed = self.store.acquire(grant.name, grant.holder, LAPSE_AFTER)
        assert renewed is not None and renewed.token == grant.token, renewed
        self.clock.move_to(renewed.expires_at)
        return renewed

    def close(self) -> None:
        for peer in self._peers:
            peer.close()
        self.store.close()


def _memory(request: pytest.FixtureRequest) -> Backend:
    clock = ManualClock(CLOCK_START)
    store = open_store("memory://", clock=clock)
    return Backend(name="memory", store=store, clock=clock, expiring_ttl=timedelta(seconds=30),
                   _open_peer=lambda: store)


def _sqlite(request: pytest.FixtureRequest) -> Backend:
    clock = ManualClock(CLOCK_START)
    url = migrated_sqlite(request.getfixturevalue("tmp_path") / "goatbeat.db")
    store = open_store(url, clock=clock)
    return Backend(name="sqlite", store=store, clock=clock, expiring_ttl=timedelta(seconds=30),
                   _open_peer=lambda: open_store(url, clock=clock))


def _postgres(request: pytest.FixtureRequest) -> Backend:
    url: str = request.getfixturevalue("pg_empty_url")
    store = open_store(url)
    return Backend(name="postgres", store=store, clock=DatabaseClock(store),
                   expiring_ttl=EXPIRING_ON_POSTGRES, _open_peer=lambda: open_store(url))


def _mysql(request: pytest.FixtureRequest) -> Backend:
    url: str = request.getfixturevalue("mysql_empty_url")
    store = open_store(url)
    return Backend(name="mysql", store=store, clock=DatabaseClock(store),
                   expiring_ttl=EXPIRING_ON_POSTGRES, _open_peer=lambda: open_store(url))


BACKENDS: dict[str, Callable[[pytest.FixtureRequest], Backend]] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "postgres": _postgres,
    "mysql": _mysql,
}


@pytest.fixture(params=list(BACKENDS), ids=list(BACKENDS))
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    opened = BACKENDS[request.param](request)
    yield opened
    opened.close()


@pytest.fixture
def store(backend: Backend) -> Store:
    return backend.store


@pytest.fixture
def clock(backend: Backend) -> StoreClock:
    return backend.clock
