"""The shipped migrations build exactly the schema the stores are written against.

Each test gets a clean database: a fresh PostgreSQL database created (and dropped) for it, or a
fresh SQLite file. PostgreSQL must be reachable; these tests fail, never skip, without it.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import URL

from goatbeat_celery.core.rules.backfill import BackfillRequest
from goatbeat_celery.core.rules.shards import Shard
from goatbeat_celery.core.types.errors import ConfigurationError, SchemaOutOfDate, StoreUnavailable
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from goatbeat_celery.migrations import (
    MIGRATE_COMMAND,
    VERSION_TABLE,
    check_schema,
    current_revision,
    downgrade,
    head_revision,
    include_object,
    upgrade,
)
from goatbeat_celery.store import downgrade_schema, open_store, upgrade_schema
from goatbeat_celery.store import migrate as store_migrate
from goatbeat_celery.store.schema import metadata, schedule_table, schedule_tag_table
from goatbeat_celery.store.sql import _spec_values
from tests.conftest import empty_database

GOATBEAT_TABLES = {"goatbeat_schedule", "goatbeat_execution", "goatbeat_lease",
                   "goatbeat_backfill", "goatbeat_calendar", "goatbeat_schedule_tag",
                   "goatbeat_alert", "goatbeat_outbox", "goatbeat_audit", "goatbeat_api_token"}


@contextmanager
def fresh_pg_database(server: URL) -> Iterator[str]:
    """A database created empty, dropped on exit."""
    with empty_database(server, f"goatbeat_mig_{os.getpid()}_{uuid.uuid4().hex[:8]}") as url:
        yield url


@pytest.fixture
def fresh_pg_url(pg_server_url: URL) -> Iterator[str]:
    """A database created empty for this test and dropped after it."""
    with fresh_pg_database(pg_server_url) as url:
        yield url


@pytest.fixture
def fresh_sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fresh.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def fresh_url(request: pytest.FixtureRequest) -> str:
    fixture = "fresh_sqlite_url" if request.param == "sqlite" else "fresh_pg_url"
    url: str = request.getfixturevalue(fixture)
    return url


@pytest.fixture
def reference_url(fresh_url: str, tmp_path: Path, pg_server_url: URL) -> Iterator[str]:
    """Another clean database of the same kind, given its tables by ``metadata.create_all``."""
    if fresh_url.startswith("sqlite"):
        url = f"sqlite:///{tmp_path / 'reference.db'}"
        build(url)
        yield url
        return
    with fresh_pg_database(pg_server_url) as url:
        build(url)
        yield url


def build(url: str) -> None:
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        metadata.create_all(engine)
    finally:
        engine.dispose()


def described(url: str) -> dict[str, object]:
    """Tables as the database itself reports them: columns (type, nullability, collation),
    primary keys, and indexes with their predicates (which Alembic's comparison ignores)."""
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        inspector = sa.inspect(engine)
        found: dict[str, object] = {}
        for table in sorted(GOATBEAT_TABLES):
            columns = [(c["name"], str(c["type"]), c["nullable"], c.get("collation"))
                       for c in inspector.get_columns(table)]
            indexes = sorted(
                (i["name"], tuple(i["column_names"]), bool(i["unique"]),
                 {key: str(value) for key, value in i.get("dialect_options", {}).items()})
                .__repr__()
                for i in inspector.get_indexes(table)
            )
            found[table] = (columns, inspector.get_pk_constraint(table)["constrained_columns"],
                            indexes)
        return found
    finally:
        engine.dispose()


@pytest.fixture
def engine(fresh_url: str) -> Iterator[sa.Engine]:
    engine = sa.create_engine(fresh_url, poolclass=sa.NullPool)
    yield engine
    engine.dispose()


def differences(engine: sa.Engine) -> list[object]:
    """What Alembic's autogenerate would change to make the database match the metadata."""
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={
            "version_table": VERSION_TABLE,
            "include_object": include_object,
            "compare_type": True,
            "compare_server_default": True,
        })
        found: list[object] = compare_metadata(context, metadata)
        return found


def table_names(engine: sa.Engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


def test_migrated_clean_database_equals_the_metadata(fresh_url: str, engine: sa.Engine) -> None:
    upgrade_schema(fresh_url)
    assert table_names(engine) >= GOATBEAT_TABLES
    assert differences(engine) == []


def test_migrated_tables_and_partial_indexes_equal_those_the_metadata_creates(
    fresh_url: str, reference_url: str
) -> None:
    upgrade_schema(fresh_url)
    assert described(fresh_url) == described(reference_url)


def test_the_description_notices_a_lost_index_predicate(fresh_url: str,
                                                        reference_url: str) -> None:
    upgrade_schema(fresh_url)
    engine = sa.create_engine(fresh_url, poolclass=sa.NullPool)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text("DROP INDEX ix_goatbeat_execution_pending"))
            connection.execute(sa.text("CREATE INDEX ix_goatbeat_execution_pending "
                                       "ON goatbeat_execution (claimed_at, key)"))
    finally:
        engine.dispose()
    assert described(fresh_url) != described(reference_url)


def test_migration_creates_exactly_the_store_tables(fresh_url: str, engine: sa.Engine) -> None:
    upgrade_schema(fresh_url)
    assert table_names(engine) == GOATBEAT_TABLES | {VERSION_TABLE}


def test_comparison_notices_a_schema_that_drifted(fresh_url: str, engine: sa.Engine) -> None:
    upgrade_schema(fresh_url)
    with engine.begin() as connection:
        connection.execute(sa.text("DROP INDEX ix_goatbeat_schedule_due"))
    found = differences(engine)
    assert [diff[0] for diff in found if isinstance(diff, tuple)] == ["add_index"]


def test_unmigrated_database_has_no_revision_and_is_refused(engine: sa.Engine) -> None:
    assert current_revision(engine) is None
    with pytest.raises(SchemaOutOfDate) as caught:
        check_schema(engine)
    message = str(caught.value)
    assert f"this version needs {head_revision()}" in message
    assert MIGRATE_COMMAND in message


def test_migrated_database_is_at_the_head_revision(fresh_url: str, engine: sa.Engine) -> None:
    upgrade_schema(fresh_url)
    assert current_revision(engine) == head_revision()
    check_schema(engine)  # raises if not


def test_upgrading_twice_changes_nothing(fresh_url: str, engine: sa.Engine) -> None:
    upgrade_schema(fresh_url)
    upgrade_schema(fresh_url)
    assert current_revision(engine) == head_revision()
    assert differences(engine) == []


def test_downgrade_to_base_removes_the_tables_and_upgrade_restores_them(
    fresh_url: str, engine: sa.Engine
) -> None:
    upgrade_schema(fresh_url)
    downgrade_schema(fresh_url, "base")
    assert table_names(engine) & GOATBEAT_TABLES == set()
    assert current_revision(engine) is None
    upgrade_schema(fresh_url)
    assert differences(engine) == []


#: The schedule columns migration 0004 adds; a row written at 0003 names none of them.
CONTROL_COLUMNS = ("start_at", "end_at", "max_runs", "paused_until", "description", "tags")


def spec_values_at(engine: sa.Engine, spec: ScheduleSpec) -> dict[str, object]:
    """The columns written for ``spec`` that the database has at its revision, as a replica
    of that revision writes the row (a later revision's columns are left to the upgrade)."""
    present = {column["name"] for column in sa.inspect(engine).get_columns("goatbeat_schedule")}
    return {key: value for key, value in _spec_values(spec).items() if key in present}


def test_upgrading_0003_rows_to_the_controls_keeps_them_running_unbounded(
        fresh_url: str, engine: sa.Engine) -> None:
    upgrade(engine, "0003")
    spec = ScheduleSpec(name="nightly", task="proj.tasks.report",
                        trigger=TriggerSpec(kind="interval", params={"every": 60}),
                        args=(1, "a"), kwargs={"b": 2})
    # Nor the columns of later revisions (0006's calendars, 0007's shard_hash).
    values = spec_values_at(engine, spec)
    due = datetime(2030, 1, 1, 8, 0, tzinfo=timezone.utc)
    with engine.begin() as connection:
        connection.execute(sa.insert(schedule_table).values(
            **values, next_occurrence_at=due, next_run_at=due, last_occurrence_at=None,
            total_runs=12, total_missed=1, version=5, created_at=due, updated_at=due,
            paused_reason="paused after 3 failed runs in a row"))
    upgrade(engine)
    assert differences(engine) == []
    store = open_store(fresh_url)
    try:
        read = store.get_schedule("nightly")
    finally:
        store.close()
    assert read.damage == ()
    assert read.spec == spec
    assert (read.spec.start_at, read.spec.end_at, read.spec.max_runs, read.spec.description,
            read.spec.tags, read.paused_until) == (None, None, None, None, (), None)
    assert (read.total_runs, read.row_version, read.next_run_at, read.paused_reason) == (
        12, 5, due, "paused after 3 failed runs in a row")
    # Its spec hash is the one written before the upgrade: config sync leaves it alone.
    assert read.spec.spec_hash() == values["spec_hash"]


def test_downgrading_from_the_controls_drops_only_their_columns(
        fresh_url: str, engine: sa.Engine) -> None:
    upgrade(engine)
    downgrade(engine, "0003")
    columns = {c["name"] for c in sa.inspect(engine).get_columns("goatbeat_schedule")}
    assert not columns & set(CONTROL_COLUMNS)
    assert "paused_reason" in columns
    upgrade(engine)
    assert differences(engine) == []


def test_upgrading_0004_rows_to_the_backfills_keeps_them_and_adds_an_empty_table(
        fresh_url: str, engine: sa.Engine) -> None:
    upgrade(engine, "0004")
    spec = ScheduleSpec(name="nightly", task="proj.tasks.report",
                        trigger=TriggerSpec(kind="interval", params={"every": 60}),
                        max_runs=9, tags=("billing",))
    due = datetime(2030, 1, 1, 8, 0, tzinfo=timezone.utc)
    values = spec_values_at(engine, spec)
    with engine.begin() as connection:
        connection.execute(sa.insert(schedule_table).values(
            **values, next_occurrence_at=due, next_run_at=due,
            last_occurrence_at=None, total_runs=3, total_missed=0, version=4, created_at=due,
            updated_at=due))
    upgrade(engine)
    assert differences(engine) == []
    store = open_store(fresh_url)
    try:
        read = store.get_schedule("nightly")
        assert (read.spec, read.total_runs, read.row_version, read.damage) == (spec, 3, 4, ())
        assert store.list_backfills() == []
        created = store.create_backfill(BackfillRequest(
            schedule_name="nightly", start=due - timedelta(hours=1), end=due, total=61))
        assert store.get_backfill(created.id) == created
    finally:
        store.close()


def test_downgrading_from_the_backfills_drops_only_their_table(
        fresh_url: str, engine: sa.Engine) -> None:
    upgrade(engine)
    downgrade(engine, "0004")
    assert "goatbeat_backfill" not in table_names(engine)
    assert {"goatbeat_schedule", "goatbeat_execution"} <= table_names(engine)


def test_upgrading_0005_rows_to_calendars_keeps_them_observing_none(
        fresh_url: str, engine: sa.Engine) -> None:
    upgrade(engine, "0005")
    spec = ScheduleSpec(name="nightly", task="proj.tasks.report",
                        trigger=TriggerSpec(kind="cron", params={
                            "expression": "0 3 * * *", "timezone": "Europe/Paris",
                            "day_or": True}),
                        max_runs=9, tags=("billing",))
    values = spec_values_at(engine, spec)
    due = datetime(2030, 1, 1, 2, 0, tzinfo=timezone.utc)
    with engine.begin() as connection:
        connection.execute(sa.insert(schedule_table).values(
            **values, next_occurrence_at=due, next_run_at=due, last_occurrence_at=None,
            total_runs=3, total_missed=0, version=4, created_at=due, updated_at=due))
    upgrade(engine)
    assert differences(engine) == []
    assert "goatbeat_calendar" in table_names(engine)
    store = open_store(fresh_url)
    try:
        read = store.get_schedule("nightly")
        assert store.list_calendars() == []
    finally:
        store.close()
    assert read.damage == ()
    assert read.spec == spec and read.spec.calendars == ()
    assert (read.total_runs, read.row_version, read.next_run_at) == (3, 4, due)
    # Its spec hash is the one written before the upgrade: config sync leaves it alone.
    assert read.spec.spec_hash() == values["spec_hash"]


def test_downgrading_from_calendars_drops_their_table_and_column_only(
        fresh_url: str, engine: sa.Engine) -> None:
    upgrade(engine)
    downgrade(engine, "0005")
    assert "goatbeat_calendar" not in table_names(engine)
    columns = {c["name"] for c in sa.inspect(engine).get_columns("goatbeat_schedule")}
    assert "calendars" not in columns
    assert set(CONTROL_COLUMNS) <= columns
    upgrade(engine)
    assert differences(engine) == []


def test_an_application_alembic_history_is_left_alone(fresh_url: str, engine: sa.Engine) -> None:
    with engine.begin() as connection:
        connection.execute(sa.text("CREATE TABLE alembic_version (version_num VARCHAR(32))"))
        connection.execute(sa.text("INSERT INTO alembic_version VALUES ('app_rev_42')"))
        connection.execute(sa.text("CREATE TABLE app_orders (id INTEGER PRIMARY KEY)"))
    upgrade_schema(fresh_url)
    with engine.connect() as connection:
        assert connection.execute(sa.text("SELECT version_num FROM alembic_version")).all() == [
            ("app_rev_42",)
        ]
    assert {"alembic_version", "app_orders"} <= table_names(engine)
    assert differences(engine) == []


def test_the_migrations_run_on_an_engine_they_are_handed(engine: sa.Engine) -> None:
    assert upgrade(engine) == (None, head_revision())
    assert current_revision(engine) == head_revision()
    assert upgrade(engine) == (head_revision(), head_revision())


def test_the_migrations_run_on_a_connection_inside_the_callers_transaction(
        engine: sa.Engine) -> None:
    with engine.connect() as connection:
        connection.execute(sa.text("SELECT 1"))  # a transaction is now open
        upgrade(connection)
        assert current_revision(connection) == head_revision()
        connection.rollback()
    # The caller's transaction was rolled back, and the migration with it (DDL is
    # transactional on both databases).
    assert current_revision(engine) is None


def test_through_a_store_an_unreachable_database_is_store_unavailable(
        tmp_path: Path) -> None:
    missing = sa.create_engine(f"sqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}",
                               poolclass=sa.NullPool)
    try:
        with pytest.raises(StoreUnavailable, match="read the schema revision"):
            store_migrate.current_revision(missing)
        with pytest.raises(StoreUnavailable, match="migrate"):
            store_migrate.upgrade(missing)
    finally:
        missing.dispose()


def test_postgres_store_refuses_an_unmigrated_database(fresh_pg_url: str) -> None:
    with pytest.raises(SchemaOutOfDate, match="goatbeat migrate"):
        open_store(fresh_pg_url)
    probe = sa.create_engine(fresh_pg_url, poolclass=sa.NullPool)
    try:
        assert table_names(probe) == set(), "opening must not create the schema implicitly"
    finally:
        probe.dispose()


def test_postgres_store_creates_the_schema_when_asked(fresh_pg_url: str) -> None:
    store = open_store(fresh_pg_url, create_schema=True)
    store.close()
    probe = sa.create_engine(fresh_pg_url, poolclass=sa.NullPool)
    try:
        check_schema(probe)
        assert differences(probe) == []
    finally:
        probe.dispose()


def test_sqlite_store_creates_its_schema_on_open(fresh_sqlite_url: str) -> None:
    store = open_store(fresh_sqlite_url)
    store.close()
    probe = sa.create_engine(fresh_sqlite_url, poolclass=sa.NullPool)
    try:
        assert current_revision(probe) == head_revision()
        assert differences(probe) == []
    finally:
        probe.dispose()


def test_sqlite_store_can_be_told_not_to_create_its_schema(fresh_sqlite_url: str) -> None:
    with pytest.raises(SchemaOutOfDate):
        open_store(fresh_sqlite_url, create_schema=False)


def test_concurrent_upgrades_of_a_clean_postgres_database_both_succeed(
    fresh_pg_url: str,
) -> None:
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    def migrate() -> None:
        barrier.wait()
        try:
            upgrade_schema(fresh_pg_url)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=migrate) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    probe = sa.create_engine(fresh_pg_url, poolclass=sa.NullPool)
    try:
        assert current_revision(probe) == head_revision()
    finally:
        probe.dispose()


def test_memory_store_has_no_schema_to_migrate() -> None:
    with pytest.raises(ConfigurationError, match="database_url"):
        upgrade_schema("memory://")


def test_a_migration_logs_one_line_of_its_own_and_none_of_alembics(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    url = f"sqlite:///{tmp_path / 'quiet.db'}"
    with caplog.at_level(logging.DEBUG):
        upgrade_schema(url)
        upgrade_schema(url)  # already at head: nothing to say

    assert [r.name for r in caplog.records if r.name.startswith("alembic")] == []
    [line] = [r for r in caplog.records if getattr(r, "action", None) == "migrated"]
    assert line.getMessage().endswith(f"base -> {head_revision()}")


def test_opening_a_store_says_nothing_of_alembics_at_info(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    url = f"sqlite:///{tmp_path / 'quiet.db'}"
    upgrade_schema(url)
    with caplog.at_level(logging.INFO):
        open_store(url).close()  # checks the schema's revision, as beat's start does

    assert [r.getMessage() for r in caplog.records if r.name.startswith("alembic")] == []


def test_upgrading_0006_rows_to_shards_fills_each_rows_shard_hash(
        fresh_url: str, engine: sa.Engine) -> None:
    upgrade(engine, "0006")
    due = datetime(2020, 1, 1, 2, 0, tzinfo=timezone.utc)  # due now
    names = [f"job-{n}" for n in range(7)] + ["nightly-é"]
    with engine.begin() as connection:
        for name in names:
            spec = ScheduleSpec(name=name, task="proj.tasks.report",
                                trigger=TriggerSpec(kind="interval", params={"every": 60}))
            values = spec_values_at(engine, spec)
            connection.execute(sa.insert(schedule_table).values(
                **values, next_occurrence_at=due, next_run_at=due, last_occurrence_at=None,
                total_runs=3, total_missed=0, version=4, created_at=due, updated_at=due))
    upgrade(engine)
    assert differences(engine) == []
    with engine.connect() as connection:
        stored = dict(connection.execute(
            sa.select(schedule_table.c.name, schedule_table.c.shard_hash)).all())
    assert stored == {name: zlib.crc32(name.encode("utf-8")) for name in names}
    store = open_store(fresh_url)
    try:
        for k in range(3):
            batch = store.due_schedules(100, shard=Shard(k, 3))
            assert sorted(s.name for s in batch.schedules) == sorted(
                name for name in names if zlib.crc32(name.encode()) % 3 == k)
    finally:
        store.close()


def test_a_row_written_without_a_shard_hash_counts_as_shard_zero(
        fresh_url: str, engine: sa.Engine) -> None:
    upgrade(engine)
    past = datetime(2020, 1, 1, tzinfo=timezone.utc)
    name = next(f"job-{n}" for n in range(100) if zlib.crc32(f"job-{n}".encode()) % 2 == 1)
    spec = ScheduleSpec(name=name, task="proj.tasks.report",
                        trigger=TriggerSpec(kind="interval", params={"every": 60}))
    with engine.begin() as connection:  # as a replica older than the column writes it
        connection.execute(sa.insert(schedule_table).values(
            **{**_spec_values(spec), "shard_hash": None}, next_occurrence_at=past,
            next_run_at=past, last_occurrence_at=None, total_runs=0, total_missed=0, version=1,
            created_at=past, updated_at=past))
    store = open_store(fresh_url)
    try:
        assert [s.name for s in store.due_schedules(10, shard=Shard(0, 2)).schedules] == [name]
        assert store.due_schedules(10, shard=Shard(1, 2)).schedules == ()
    finally:
        store.close()


def test_downgrading_from_shards_drops_only_their_column(fresh_url: str,
                                                         engine: sa.Engine) -> None:
    upgrade(engine)
    downgrade(engine, "0006")
    columns = {c["name"] for c in sa.inspect(engine).get_columns("goatbeat_schedule")}
    assert "shard_hash" not in columns and "calendars" in columns
    upgrade(engine)
    assert differences(engine) == []


def test_upgrading_0007_rows_to_the_tag_index_indexes_their_tags(
        fresh_url: str, engine: sa.Engine) -> None:
    upgrade(engine, "0007")
    due = datetime(2030, 1, 1, 2, 0, tzinfo=timezone.utc)
    tagged = {"a": ("billing", "nightly"), "b": ("billing",), "c": (), "d": ("nightly", "eu")}
    with engine.begin() as connection:
        for name, tags in tagged.items():
            spec = ScheduleSpec(name=name, task="proj.tasks.report",
                                trigger=TriggerSpec(kind="interval", params={"every": 60}),
                                tags=tags)
            connection.execute(sa.insert(schedule_table).values(
                **spec_values_at(engine, spec), next_occurrence_at=due, next_run_at=due,
                last_occurrence_at=None, total_runs=3, total_missed=0, version=4,
                created_at=due, updated_at=due))
    upgrade(engine)
    assert differences(engine) == []
    with engine.connect() as connection:
        entries = {(name, tag) for name, tag in connection.execute(sa.select(schedule_tag_table))}
    assert entries == {(name, tag) for name, tags in tagged.items() for tag in tags}
    store = open_store(fresh_url)
    try:
        assert [s.name for s in store.list_schedules(tags=["billing"])] == ["a", "b"]
        assert [s.name for s in store.list_schedules(tags=["nightly", "eu"])] == ["d"]
        # The triggers keep the index from now on.
        store.delete_schedule("a")
        assert [s.name for s in store.list_schedules(tags=["nightly"])] == ["d"]
    finally:
        store.close()


def test_downgrading_from_the_tag_index_drops_it_and_schedules_are_written_as_before(
        fresh_url: str, engine: sa.Engine) -> None:
    upgrade(engine)
    downgrade(engine, "0007")
    assert "goatbeat_schedule_tag" not in table_names(engine)
    spec = ScheduleSpec(name="job", task="proj.tasks.report",
                        trigger=TriggerSpec(kind="interval", params={"every": 60}),
                        tags=("billing",))
    due = datetime(2030, 1, 1, 2, 0, tzinfo=timezone.utc)
    with engine.begin() as connection:  # no trigger left to refer to the dropped table
        connection.execute(sa.insert(schedule_table).values(
            **spec_values_at(engine, spec), next_occurrence_at=due, next_run_at=due,
            last_occurrence_at=None, total_runs=0, total_missed=0, version=1,
            created_at=due, updated_at=due))
        connection.execute(sa.update(schedule_table).values(tags=["eu"]))
        connection.execute(sa.delete(schedule_table))
    upgrade(engine)
    assert differences(engine) == []


# -- MySQL / MariaDB -------------------------------------------------------------------------
@pytest.fixture
def fresh_mysql_url(mysql_server_url: URL) -> Iterator[str]:
    """A database created empty on the MySQL / MariaDB server for this test, dropped after."""
    from tests.conftest import _admin_engine

    name = f"goatbeat_mig_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = _admin_engine(mysql_server_url)
    try:
        with admin.connect() as connection:
            connection.execute(sa.text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
        yield mysql_server_url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f"DROP DATABASE IF EXISTS `{name}`"))
        admin.dispose()


@pytest.mark.mysql
@pytest.mark.slow
def test_on_mysql_upgrade_downgrade_to_base_and_upgrade_again_leave_the_metadata_schema(
        fresh_mysql_url: str) -> None:
    engine = sa.create_engine(fresh_mysql_url, poolclass=sa.NullPool)
    try:
        upgrade_schema(fresh_mysql_url)
        assert table_names(engine) >= GOATBEAT_TABLES
        assert current_revision(engine) == head_revision()
        # MySQL has no partial index: the migrations index generated columns instead, which
        # the metadata does not list, so the schema is compared with itself across the round
        # trip (columns, keys, indexes as the server reports them).
        first = described(fresh_mysql_url)
        # Every tag trigger the migrations made is theirs to drop.
        downgrade_schema(fresh_mysql_url, "base")
        assert table_names(engine) & GOATBEAT_TABLES == set()
        assert current_revision(engine) is None
        with engine.connect() as connection:
            assert connection.execute(sa.text(
                "SELECT trigger_name FROM information_schema.triggers "
                "WHERE trigger_schema = DATABASE()")).all() == []
        upgrade_schema(fresh_mysql_url)
        assert current_revision(engine) == head_revision()
        assert described(fresh_mysql_url) == first
        # The tables work again: a schedule written with a tag, found by it (the tag index
        # is kept by the triggers the upgrade made anew).
        from goatbeat_celery.api import Schedules

        store = open_store(fresh_mysql_url)
        try:
            Schedules(store).create("after", "t", every=timedelta(minutes=1), tags=["nightly"])
            assert [s.spec.name for s in store.list_schedules(tags=["nightly"])] == ["after"]
        finally:
            store.close()
    finally:
        engine.dispose()
