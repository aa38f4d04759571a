"""System-test fixtures: a fresh migrated PostgreSQL database and a Redis check per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa
from sqlalchemy.engine import URL

from tests.system.harness import Cluster

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379"


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The Redis server (broker and record store); the test fails if it does not answer."""
    url = os.environ.get("GOATBEAT_TEST_REDIS_URL", DEFAULT_REDIS_URL)
    client = redis.Redis.from_url(url, socket_connect_timeout=3)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.fail(f"Redis is required but unreachable at {url} (set GOATBEAT_TEST_REDIS_URL):"
                    f" {exc}", pytrace=False)
    finally:
        client.close()
    return url


@pytest.fixture
def fresh_pg_url(pg_server_url: URL) -> Iterator[str]:
    """A new database, migrated, for one scenario; dropped afterwards."""
    from goatbeat_celery.migrations import upgrade

    name = f"goatbeat_sys_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(pg_server_url, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    with admin.connect() as connection:
        connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = pg_server_url.set(database=name).render_as_string(hide_password=False)
    try:
        upgrade(url)
        yield url
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
def cluster(request: pytest.FixtureRequest, tmp_path: Path, fresh_pg_url: str,
            redis_url: str) -> Iterator[Cluster]:
    """Processes of one scenario; all are stopped at the end, logs shown if the test failed."""
    world = Cluster(workdir=tmp_path, database_url=fresh_pg_url, redis_url=redis_url)
    try:
        yield world
    finally:
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            print(world.logs())
        world.stop_all()
