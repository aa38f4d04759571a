"""A leader frozen while it writes one statement of a claim transaction leaves its session
waiting for the rest of it, the lease row share-locked, and neither of PostgreSQL's timeouts
ends such a session: the replica that would take the lease ends it once the lease has expired,
and never before."""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
import sqlalchemy as sa

from goatbeat_celery.core.types.errors import StoreTimeout
from goatbeat_celery.store.postgres.store import PostgresStore
from tests.support.waiting import wait_for

LEASE = "default"
TTL = timedelta(seconds=3)


def message(kind: bytes, body: bytes, *, cut: int = 0) -> bytes:
    """A protocol message; ``cut`` bytes announced and never sent."""
    return kind + struct.pack("!I", len(body) + 4 + cut) + body


@pytest.fixture
def frozen_mid_statement(pg_empty_url: str) -> Iterator[int]:
    """A session as a holder frozen mid-write leaves it: in a transaction that share-locks the
    lease row (as the claim's fence does), one statement's Parse message sent and its Bind cut
    short. Its own timeouts are short, to show that they do not end it. Yields its pid."""
    conninfo = sa.make_url(pg_empty_url).set(drivername="postgresql").render_as_string(
        hide_password=False)
    conn = psycopg.connect(conninfo, options="-c statement_timeout=300 "
                                             "-c idle_in_transaction_session_timeout=300")
    conn.execute("SELECT 1 FROM goatbeat_lease WHERE name = %s FOR SHARE", [LEASE])
    pid = conn.info.backend_pid
    wire = socket.socket(fileno=os.dup(conn.pgconn.socket))
    wire.sendall(message(b"P", b"\0SELECT $1::text\0\0\0")
                 + message(b"B", b"\0\0\0\0\0\1", cut=100))
    try:
        yield pid
    finally:
        wire.close()
        conn.close()


def alive(url: str, pid: int) -> bool:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text("SELECT count(*) FROM pg_stat_activity WHERE pid = :p"),
                                {"p": pid}).scalar_one() == 1
    finally:
        engine.dispose()


@pytest.fixture
def stores(pg_empty_url: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    made = [PostgresStore(pg_empty_url, statement_timeout=0.5, session_locks=False)
            for _ in range(2)]
    try:
        yield made[0], made[1]
    finally:
        for store in made:
            store.close()


@pytest.fixture
def granted(stores: tuple[PostgresStore, PostgresStore]) -> int:
    holder, _ = stores
    grant = holder.acquire(LEASE, "frozen", TTL)
    assert grant is not None
    return grant.token


def test_a_session_stuck_mid_statement_on_an_expired_lease_is_ended_by_its_taker(
        pg_empty_url: str, stores: tuple[PostgresStore, PostgresStore], granted: int,
        frozen_mid_statement: int) -> None:
    holder, taker = stores
    wait_for(lambda: not holder.inspect(LEASE).held,  # type: ignore[union-attr]
             "the lease to expire", timeout=TTL.total_seconds() + 5)
    assert alive(pg_empty_url, frozen_mid_statement), "a server timeout ended it"

    with pytest.raises(StoreTimeout, match="acquire lease"):
        taker.acquire(LEASE, "taker", TTL)  # waits on the row; ends the stuck session

    assert not alive(pg_empty_url, frozen_mid_statement)
    grant = taker.acquire(LEASE, "taker", TTL)
    assert grant is not None and grant.token == granted + 1


def test_before_its_expiry_a_stuck_holder_keeps_its_session_and_its_lease(
        pg_empty_url: str, stores: tuple[PostgresStore, PostgresStore], granted: int,
        frozen_mid_statement: int) -> None:
    holder, taker = stores

    with pytest.raises(StoreTimeout, match="acquire lease"):
        taker.acquire(LEASE, "taker", TTL)

    lease = holder.inspect(LEASE)
    assert lease is not None and lease.held and lease.holder == "frozen", \
        "the test ran past the lease's expiry: nothing was shown"
    assert alive(pg_empty_url, frozen_mid_statement)


def test_a_taker_without_the_right_to_end_sessions_waits_as_before(
        pg_empty_url: str, stores: tuple[PostgresStore, PostgresStore], granted: int,
        frozen_mid_statement: int) -> None:
    holder, _ = stores
    url = sa.make_url(pg_empty_url)
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    role = "goatbeat_test_taker"
    with admin.connect() as conn:
        if not conn.execute(sa.text("SELECT 1 FROM pg_roles WHERE rolname = :r"),
                            {"r": role}).first():
            conn.execute(sa.text(f"CREATE ROLE {role} LOGIN"))
        conn.execute(sa.text(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}"))
        conn.execute(sa.text(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}"))
    admin.dispose()
    taker = PostgresStore(url.set(username=role, password=None).render_as_string(
        hide_password=False), statement_timeout=0.5, session_locks=False)
    try:
        wait_for(lambda: not holder.inspect(LEASE).held,  # type: ignore[union-attr]
                 "the lease to expire", timeout=TTL.total_seconds() + 5)

        with pytest.raises(StoreTimeout, match="acquire lease"):
            taker.acquire(LEASE, "taker", TTL)

        assert alive(pg_empty_url, frozen_mid_statement)
    finally:
        taker.close()
