"""``has_table``: whether the store's database holds another application's table (what the
django-celery-beat watch asks a leader's store every ten minutes), on every backend."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from goatbeat_celery.store import Store, migration_engine, open_store
from goatbeat_celery.store.schema import SCHEDULE_TABLE
from tests.support.sqlite_files import migrated_sqlite


@pytest.fixture(params=["sqlite", "postgres", "mysql"])
def url(request: pytest.FixtureRequest) -> str:
    if request.param == "sqlite":
        return migrated_sqlite(request.getfixturevalue("tmp_path") / "goatbeat.db")
    empty = {"postgres": "pg_empty_url", "mysql": "mysql_empty_url"}[request.param]
    return str(request.getfixturevalue(empty))


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    opened = open_store(url)
    yield opened
    opened.close()


def test_a_table_is_found_once_made_and_no_other_name_is(store: Store, url: str) -> None:
    name = f"other_app_{uuid.uuid4().hex[:12]}"
    assert not store.has_table(name)
    engine = migration_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY)"))
        # Asked again on the same open connections: the answer is not remembered.
        assert store.has_table(name)
        assert not store.has_table(name + "_x")
        assert store.has_table(SCHEDULE_TABLE)
    finally:
        with engine.begin() as connection:
            connection.execute(sa.text(f"DROP TABLE IF EXISTS {name}"))
        engine.dispose()
    assert not store.has_table(name)


def test_the_memory_store_holds_no_other_table() -> None:
    store = open_store("memory://")
    try:
        assert not store.has_table("django_celery_beat_periodictask")
        assert not store.has_table(SCHEDULE_TABLE)
    finally:
        store.close()


def test_on_sqlite_the_question_waits_for_no_writer(tmp_path: Path) -> None:
    """A beat claiming holds SQLite's write lock; the watch's question is a read beside it."""
    path = tmp_path / "goatbeat.db"
    store = open_store(migrated_sqlite(path))
    writer = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        writer.execute("CREATE TABLE django_celery_beat_periodictask (id INTEGER PRIMARY KEY)")
        writer.execute("BEGIN IMMEDIATE")
        assert store.has_table("django_celery_beat_periodictask")
        writer.execute("COMMIT")
        # Nor does it keep one once answered.
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("COMMIT")
    finally:
        writer.close()
        store.close()


def test_on_postgres_a_table_off_the_search_path_is_not_found(pg_empty_url: str) -> None:
    """Found as a query naming it would find it: a table of another schema is not."""
    schema = f"elsewhere_{uuid.uuid4().hex[:8]}"
    engine = migration_engine(pg_empty_url)
    store = open_store(pg_empty_url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text(f"CREATE SCHEMA {schema}"))
            connection.execute(sa.text(
                f"CREATE TABLE {schema}.django_celery_beat_periodictask (id INTEGER)"))
        assert not store.has_table("django_celery_beat_periodictask")
    finally:
        store.close()
        with engine.begin() as connection:
            connection.execute(sa.text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        engine.dispose()
