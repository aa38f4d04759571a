"""System-test fixtures: a fresh migrated PostgreSQL (or MariaDB) database and a Redis check per
test; private PostgreSQL, MariaDB, Redis and RabbitMQ servers for the scenarios that stop them;
a figures report."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa
from sqlalchemy.engine import URL

from tests.conftest import _admin_engine, migrated_database
from tests.system.fidelity import FidWorld
from tests.system.harness import Cluster, MySQLCluster, SQLiteCluster, running
from tests.system.services import PrivateMariaDB, PrivatePostgres, PrivateRabbitMQ, PrivateRedis

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
    with migrated_database(pg_server_url, f"goatbeat_sys_{uuid.uuid4().hex[:12]}") as url:
        yield url


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
def cluster(request: pytest.FixtureRequest, tmp_path: Path, fresh_pg_url: str,
            redis_url: str) -> Iterator[Cluster]:
    """Processes of one scenario; all are stopped at the end, logs shown if the test failed."""
    with running(request, Cluster(workdir=tmp_path, database_url=fresh_pg_url,
                                   redis_url=redis_url)) as world:
        yield world


@pytest.fixture
def sqlite_cluster(request: pytest.FixtureRequest, tmp_path: Path,
                   redis_url: str) -> Iterator[SQLiteCluster]:
    """Processes of one scenario sharing a SQLite file (one host), as ``cluster`` shares a
    PostgreSQL database."""
    url = f"sqlite:///{tmp_path / 'goatbeat.sqlite3'}"
    with running(request, SQLiteCluster(workdir=tmp_path, database_url=url,
                                         redis_url=redis_url)) as world:
        yield world


@pytest.fixture
def fresh_mysql_url(mysql_server_url: URL) -> Iterator[str]:
    """A new database on the shared MySQL / MariaDB server, migrated, for one scenario;
    dropped afterwards."""
    from goatbeat_celery.store import upgrade_schema

    name = f"goatbeat_sys_{uuid.uuid4().hex[:12]}"
    admin = _admin_engine(mysql_server_url)
    try:
        with admin.connect() as connection:
            connection.execute(sa.text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
        url = mysql_server_url.set(database=name).render_as_string(hide_password=False)
        upgrade_schema(url)
        yield url
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f"DROP DATABASE IF EXISTS `{name}`"))
        admin.dispose()


@pytest.fixture
def mysql_cluster(request: pytest.FixtureRequest, tmp_path: Path, fresh_mysql_url: str,
                  redis_url: str) -> Iterator[MySQLCluster]:
    """Processes of one scenario sharing a MySQL / MariaDB database, as ``cluster`` shares a
    PostgreSQL one."""
    with running(request, MySQLCluster(workdir=tmp_path, database_url=fresh_mysql_url,
                                        redis_url=redis_url)) as world:
        yield world


@pytest.fixture
def private_mariadb() -> Iterator[PrivateMariaDB]:
    """A MariaDB server of this test's own, migrated, that the test may stop and restart;
    stopped (by pid) and removed at the end whatever happened. Fails, never skips, when
    MariaDB is not installed."""
    from goatbeat_celery.store import upgrade_schema

    try:
        server = PrivateMariaDB()
    except AssertionError as exc:
        pytest.fail(f"MariaDB is required: {exc}", pytrace=False)
    try:
        server.start()
        upgrade_schema(server.url)
        yield server
    finally:
        server.close()


@pytest.fixture
def mariadb_cluster(request: pytest.FixtureRequest, tmp_path: Path,
                    private_mariadb: PrivateMariaDB, redis_url: str) -> Iterator[MySQLCluster]:
    """A scenario's processes on the private MariaDB server (stopped before the server)."""
    with running(request, MySQLCluster(workdir=tmp_path, database_url=private_mariadb.url,
                                        redis_url=redis_url)) as world:
        yield world


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    """A PostgreSQL server of this test's own, migrated, that the test may stop and restart;
    stopped (by pid) and removed at the end whatever happened."""
    from goatbeat_celery.store import upgrade_schema

    server = PrivatePostgres()
    try:
        server.start()
        upgrade_schema(server.url)
        yield server
    finally:
        server.close()


@contextmanager
def started(server: PrivateRedis) -> Iterator[PrivateRedis]:
    """``server`` started, and closed at the end whatever happened."""
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    """A Redis server of this test's own (the broker a scenario stops)."""
    with started(PrivateRedis()) as server:
        yield server


@pytest.fixture
def durable_redis() -> Iterator[PrivateRedis]:
    """A Redis server of this test's own with an append-only file synced on every write (the
    broker a scenario kills and restarts on its files)."""
    with started(PrivateRedis(durable=True)) as server:
        yield server


@pytest.fixture
def durable_broker_cluster(request: pytest.FixtureRequest, tmp_path: Path, fresh_pg_url: str,
                           redis_url: str, durable_redis: PrivateRedis) -> Iterator[Cluster]:
    """A scenario's processes with the durable private Redis as their broker (the worker's
    records on the shared Redis, so that they outlive the broker)."""
    with running(request, Cluster(workdir=tmp_path, database_url=fresh_pg_url,
                                   redis_url=redis_url,
                                   broker_url=durable_redis.url)) as world:
        yield world


@pytest.fixture
def pg_cluster(request: pytest.FixtureRequest, tmp_path: Path, private_postgres: PrivatePostgres,
               redis_url: str) -> Iterator[Cluster]:
    """A scenario's processes on the private PostgreSQL server (stopped before the server)."""
    with running(request, Cluster(workdir=tmp_path, database_url=private_postgres.url,
                                   redis_url=redis_url)) as world:
        yield world


@pytest.fixture
def broker_cluster(request: pytest.FixtureRequest, tmp_path: Path, fresh_pg_url: str,
                   redis_url: str, private_redis: PrivateRedis) -> Iterator[Cluster]:
    """A scenario's processes with the private Redis as their broker; the worker's records
    stay on the shared Redis so that they outlive a broker restart."""
    with running(request, Cluster(workdir=tmp_path, database_url=fresh_pg_url,
                                   redis_url=redis_url,
                                   broker_url=private_redis.url)) as world:
        yield world



@pytest.fixture(scope="session")
def rabbitmq_node() -> Iterator[PrivateRabbitMQ]:
    """One private RabbitMQ node for every scenario that uses one: booting a node takes 6-8 s
    on an idle machine and up to 45 s on a busy one, so the scenarios share it and each gets
    an empty virtual host instead (:func:`private_rabbitmq`). Fails, never skips, when
    RabbitMQ is not installed."""
    try:
        server = PrivateRabbitMQ()
    except AssertionError as exc:
        pytest.fail(f"RabbitMQ is required: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def private_rabbitmq(rabbitmq_node: PrivateRabbitMQ) -> PrivateRabbitMQ:
    """The shared node, answering (started, or thawed and restarted if an earlier scenario
    left it stopped, killed or frozen), with the scenario's virtual host made anew: no queue,
    message or binding of an earlier scenario is left in it. The scenario may stop, kill or
    restart the node as it likes."""
    rabbitmq_node.revive()
    rabbitmq_node.fresh_vhost()
    return rabbitmq_node


@pytest.fixture
def rabbitmq_cluster(request: pytest.FixtureRequest, tmp_path: Path, fresh_pg_url: str,
                     redis_url: str, private_rabbitmq: PrivateRabbitMQ) -> Iterator[Cluster]:
    """A scenario's processes with the private RabbitMQ as their broker (stopped before it);
    the worker's records stay on the shared Redis, so they outlive a broker restart."""
    with running(request, Cluster(workdir=tmp_path, database_url=fresh_pg_url,
                                   redis_url=redis_url,
                                   broker_url=private_rabbitmq.url)) as world:
        yield world

@pytest.fixture
def report(request: pytest.FixtureRequest) -> Iterator[Callable[..., None]]:
    """``report(name=value, ...)``: the scenario's figures, shown in the terminal summary (as a
    ``figures`` user property, which reaches the summary from a parallel worker too) and
    appended to the file named by GOATBEAT_FAULT_FIGURES, one JSON object a line, when set."""
    figures: dict[str, Any] = {}
    yield figures.update
    if figures:
        request.node.user_properties.append(
            ("figures", f"{request.node.name}: "
             + ", ".join(f"{key}={value}" for key, value in figures.items())))
        target = os.environ.get("GOATBEAT_FAULT_FIGURES")
        if target:
            with open(target, "a") as handle:
                handle.write(json.dumps({"test": request.node.nodeid, **figures},
                                        default=str) + "\n")


@pytest.fixture
def world(request: pytest.FixtureRequest, tmp_path: Path, fresh_pg_url: str,
          redis_url: str) -> Iterator[FidWorld]:
    """The fidelity app's beat and worker on a fresh database and this session's Redis."""
    with running(request, FidWorld(workdir=tmp_path, redis_url=redis_url,
                                   database_url=fresh_pg_url)) as fid:
        yield fid
