"""``check`` tries what would break beat later, on real PostgreSQL with real limited roles: each
privilege beat (or a worker) needs, replicas of another lease name, the broker; ``health``
says why a replica without a privilege cannot lead."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL

from goatbeat_celery.cli.access import BROKER_TIMEOUT
from goatbeat_celery.core.rules.runs import RUN_COLUMNS
from goatbeat_celery.store import open_store
from tests.conftest import _admin_engine, migrated_database

from .conftest import Cli

#: What the README once granted: the three tables of the first version.
THREE_TABLES = ("GRANT SELECT, INSERT, UPDATE, DELETE ON goatbeat_schedule, goatbeat_execution, "
                "goatbeat_lease TO {role}")


@dataclass
class Role:
    """A login role of its own on a migrated database of its own."""

    name: str
    url: str
    admin_url: str

    def grant(self, *statements: str) -> None:
        engine = sa.create_engine(self.admin_url, poolclass=sa.NullPool)
        try:
            with engine.begin() as connection:
                for statement in statements:
                    connection.execute(sa.text(statement.format(role=self.name)))
        finally:
            engine.dispose()


@pytest.fixture
def role(pg_server_url: URL) -> Iterator[Role]:
    name = f"gb_role_{uuid.uuid4().hex[:10]}"
    admin = _admin_engine(pg_server_url)
    with admin.connect() as connection:
        connection.execute(sa.text(f"CREATE ROLE {name} LOGIN PASSWORD 'limited'"))
    try:
        with migrated_database(pg_server_url, f"goatbeat_roles_{uuid.uuid4().hex[:10]}") as url:
            own = sa.make_url(url).set(username=name, password="limited")
            limited = Role(name=name, url=own.render_as_string(hide_password=False),
                           admin_url=url)
            limited.grant("GRANT USAGE ON SCHEMA public TO {role}")
            yield limited
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f"DROP ROLE IF EXISTS {name}"))
        admin.dispose()


def checks_of(cli: Cli, *args: str) -> dict[str, dict[str, Any]]:
    result = cli(*args, "check", "--json")
    return {c["name"]: c for c in json.loads(result.stdout)["checks"]}


def test_check_lists_every_privilege_beat_lacks_and_the_grants_it_prints_fix_them(
        cli_for: Any, role: Role) -> None:
    role.grant(THREE_TABLES, "GRANT SELECT ON goatbeat_alembic_version TO {role}")
    cli: Cli = cli_for(role.url, goatbeat_track_runs=True)

    result = cli.fails("check")
    found = checks_of(cli)["grants"]

    assert found["status"] == "fail"
    for table in ("goatbeat_alert", "goatbeat_audit", "goatbeat_backfill", "goatbeat_calendar",
                  "goatbeat_outbox"):
        assert f"{role.name} lacks SELECT, INSERT, UPDATE, DELETE on table {table}" \
            in found["detail"]
    assert "lacks USAGE on sequence goatbeat_alert_id_seq" in found["detail"]
    assert "goatbeat_schedule " not in found["detail"]  # granted
    grants = [line.strip() for line in found["detail"].splitlines()
              if line.strip().startswith("GRANT ")]
    assert len(grants) == 9 and all(line in result.stdout for line in grants)

    role.grant(*grants)
    assert checks_of(cli)["grants"]["status"] == "ok"
    cli.ok("check")


def test_a_worker_role_is_checked_for_what_a_worker_needs(cli_for: Any, role: Role) -> None:
    role.grant("GRANT SELECT ON goatbeat_alembic_version TO {role}")
    cli: Cli = cli_for(role.url, goatbeat_track_runs=True)

    found = json.loads(cli("check", "--role", "worker", "--json").stdout)
    (privileges,) = [c for c in found["checks"] if c["name"] == "grants"]
    assert privileges["status"] == "fail"
    # The run columns only (docs/deploying.md): the claim's own columns stay beat's.
    columns = ", ".join((*RUN_COLUMNS, "settled"))
    grant = f"GRANT SELECT, UPDATE ({columns}) ON goatbeat_execution TO {role.name};"
    assert grant in privileges["detail"]

    role.grant(f"GRANT UPDATE ({columns}) ON goatbeat_execution TO {{role}}")
    found = json.loads(cli("check", "--role", "worker", "--json").stdout)
    (privileges,) = [c for c in found["checks"] if c["name"] == "grants"]
    assert "GRANT SELECT ON goatbeat_execution" in privileges["detail"]  # columns granted

    role.grant("GRANT SELECT ON goatbeat_execution TO {role}")
    cli.ok("check", "--role", "worker")
    cli.fails("check")  # not enough for beat


def test_health_says_a_replica_whose_role_lacks_a_privilege_cannot_lead(
        cli_for: Any, role: Role) -> None:
    role.grant(THREE_TABLES)
    cli: Cli = cli_for(role.url)

    result = cli.fails("health", "--json", exit_code=6)
    verdict = json.loads(result.stdout)

    assert verdict["health"] == "cannot lead"
    assert f"{role.name} lacks SELECT, INSERT, UPDATE, DELETE on table goatbeat_backfill" \
        in verdict["reason"]
    assert "`celery goatbeat check` lists every GRANT" in verdict["reason"]


def test_a_beat_whose_role_lacks_a_privilege_logs_an_error_saying_how_to_fix_it(
        role: Role, caplog: pytest.LogCaptureFixture) -> None:
    from goatbeat_celery.core.loop.engine import Engine
    from goatbeat_celery.core.types.settings import Settings
    from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
    from goatbeat_celery.testing import RecordingSubmitter

    role.grant(THREE_TABLES, "GRANT SELECT ON goatbeat_alembic_version TO {role}",
               "GRANT SELECT ON goatbeat_schedule_tag TO {role}")
    store = open_store(role.url)
    spec = ScheduleSpec(name="tick", task="t.tick",
                        trigger=TriggerSpec(kind="interval", params={"every": 60}))
    engine = Engine(store=store, lease=store, submitter=RecordingSubmitter(),
                    settings=Settings(), holder="host:1:limited", config_schedules=(spec,))
    try:
        with caplog.at_level("WARNING", logger="goatbeat_celery"):
            engine.tick()
    finally:
        engine.close()
        store.close()

    # The grants of the first version: the lease is refused, as every second until granted.
    (record,) = [r for r in caplog.records if getattr(r, "action", None) == "lease_error"]
    assert record.levelname == "ERROR"
    assert "permission denied for table goatbeat_alert" in record.getMessage()
    assert "`celery goatbeat check` lists every GRANT beat needs" in record.getMessage()


def test_check_fails_while_another_lease_name_is_live_on_the_database(
        cli: Cli, pg_empty_url: str) -> None:
    store = open_store(pg_empty_url)
    try:
        grant = store.acquire("reports", "otherhost:7:abcd", timedelta(seconds=30))
        assert grant is not None
        found = checks_of(cli)["leases"]
        assert found["status"] == "fail"
        assert "'reports' (held by otherhost:7:abcd)" in found["detail"]
        assert "same goatbeat_lease_name" in found["detail"]
        store.release(grant)
    finally:
        store.close()
    assert checks_of(cli)["leases"]["status"] == "ok"


def test_check_fails_on_a_broker_that_does_not_answer_within_its_timeout(cli: Cli) -> None:
    cli.configure(broker_url="redis://127.0.0.1:9/0")
    began = time.monotonic()

    found = checks_of(cli)["broker"]

    # The timeout plus what the other checks take on a busy 2-core machine.
    assert time.monotonic() - began < BROKER_TIMEOUT + 10
    assert found["status"] == "fail"
    assert "redis://127.0.0.1:9/0" in found["detail"] and "broker_url" in found["detail"]


# -- MySQL / MariaDB: the grants read from SHOW GRANTS -------------------------------------------
class MySQLUser(Role):
    """A user of its own on MySQL: a grant names one table, and ``%`` is sent as written."""

    def grant(self, *statements: str) -> None:
        engine = sa.create_engine(self.admin_url, poolclass=sa.NullPool)
        try:
            with engine.begin() as connection, connection.connection.cursor() as cursor:
                for statement in statements:
                    cursor.execute(statement.format(role=self.name))  # no parameters
        finally:
            engine.dispose()


@pytest.fixture
def mysql_user(mysql_server_url: URL) -> Iterator[MySQLUser]:
    """A user of its own, with no privilege yet, on a migrated MySQL database of its own."""
    from goatbeat_celery.store import upgrade_schema

    suffix = uuid.uuid4().hex[:10]
    name, database = f"gb_user_{suffix}", f"goatbeat_grants_{suffix}"
    admin = _admin_engine(mysql_server_url)
    with admin.connect() as connection:
        connection.execute(sa.text(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4"))
        connection.execute(sa.text(f"CREATE USER '{name}'@'%' IDENTIFIED BY 'limited'"))
    try:
        url = mysql_server_url.set(database=database)
        upgrade_schema(url.render_as_string(hide_password=False))
        yield MySQLUser(name=f"'{name}'@'%'",
                   url=url.set(username=name, password="limited").render_as_string(
                       hide_password=False),
                   admin_url=url.render_as_string(hide_password=False))
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f"DROP USER IF EXISTS '{name}'@'%'"))
            connection.execute(sa.text(f"DROP ROLE IF EXISTS gb_role_{suffix}"))
            connection.execute(sa.text(f"DROP DATABASE IF EXISTS `{database}`"))
        admin.dispose()


@pytest.mark.mysql
def test_on_mysql_check_lists_every_privilege_beat_lacks_and_its_grants_fix_them(
        cli_for: Any, mysql_user: MySQLUser) -> None:
    mysql_user.grant(*(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {{role}}"
                       for table in ("goatbeat_schedule", "goatbeat_execution",
                                     "goatbeat_lease")),
                     "GRANT SELECT ON goatbeat_alembic_version TO {role}")
    cli: Cli = cli_for(mysql_user.url, goatbeat_track_runs=True)

    result = cli.fails("check")
    found = checks_of(cli)["grants"]

    assert found["status"] == "fail"
    for table in ("goatbeat_alert", "goatbeat_audit", "goatbeat_backfill", "goatbeat_calendar",
                  "goatbeat_outbox"):
        assert f"{mysql_user.name} lacks SELECT, INSERT, UPDATE, DELETE on table {table}" \
            in found["detail"]
    assert "sequence" not in found["detail"]  # AUTO_INCREMENT: no sequence to grant
    assert "goatbeat_schedule " not in found["detail"]  # granted
    grants = [line.strip() for line in found["detail"].splitlines()
              if line.strip().startswith("GRANT ")]
    assert len(grants) == 6 and all(line in result.stdout for line in grants)

    mysql_user.grant(*grants)
    assert checks_of(cli)["grants"]["status"] == "ok"


@pytest.mark.mysql
def test_on_mysql_a_worker_needs_its_run_columns_and_a_role_may_grant_them(
        cli_for: Any, mysql_user: MySQLUser) -> None:
    role = "gb_role_" + mysql_user.name.split("_")[-1].split("'")[0]
    columns = ", ".join((*RUN_COLUMNS, "settled"))
    mysql_user.grant("GRANT SELECT ON goatbeat_alembic_version TO {role}",
                     "GRANT SELECT ON goatbeat_execution TO {role}")
    cli: Cli = cli_for(mysql_user.url)

    found = json.loads(cli("check", "--role", "worker", "--json").stdout)
    (privileges,) = [c for c in found["checks"] if c["name"] == "grants"]
    assert privileges["status"] == "fail"
    assert f"GRANT UPDATE ({columns}) ON goatbeat_execution TO {mysql_user.name};" \
        in privileges["detail"]

    # Granted through a role of the user's, its default: SHOW GRANTS FOR the role is read.
    mysql_user.grant(f"CREATE ROLE {role}",
                     f"GRANT UPDATE ({columns}) ON goatbeat_execution TO {role}",
                     f"GRANT {role} TO {{role}}", f"SET DEFAULT ROLE {role} FOR {{role}}")
    cli.ok("check", "--role", "worker")
