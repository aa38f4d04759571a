"""The runs page's trigram indexes (migration 0020): created on PostgreSQL where pg_trgm can be
had, and left out, the migration still applying, where the role cannot create the extension;
``goatbeat check`` says which, and text search works either way."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL

from goatbeat_celery.cli.checks import _database
from goatbeat_celery.core.types.run_query import RunQuery
from goatbeat_celery.migrations import head_revision
from goatbeat_celery.store import open_store, upgrade_schema
from goatbeat_celery.store.migrate import current_revision
from goatbeat_celery.store.text_search import TRIGRAM_INDEX_NAMES, text_search_indexed
from tests.conftest import _admin_engine, empty_database


def indexes(url: str) -> set[str]:
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        return {i["name"] for i in sa.inspect(engine).get_indexes("goatbeat_execution")}
    finally:
        engine.dispose()


def indexed(url: str) -> bool:
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        with engine.connect() as conn:
            return text_search_indexed(conn)
    finally:
        engine.dispose()


def schema_detail(url: str) -> str:
    (_, schema) = _database(url, None)
    assert schema.name == "schema"
    return schema.detail


@pytest.fixture
def limited_url(pg_server_url: URL) -> Iterator[str]:
    """An empty database whose ``public`` schema a role owns that may not create extensions
    (no CREATE on the database): what a managed server's application role often is."""
    name = f"gb_trgm_{uuid.uuid4().hex[:10]}"
    admin = _admin_engine(pg_server_url)
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE ROLE {name} LOGIN PASSWORD 'limited'"))
    try:
        with empty_database(pg_server_url, name) as url:
            owner = sa.create_engine(url, poolclass=sa.NullPool)
            with owner.begin() as conn:
                conn.execute(sa.text(f"ALTER SCHEMA public OWNER TO {name}"))
            owner.dispose()
            yield (sa.make_url(url).set(username=name, password="limited")
                   .render_as_string(hide_password=False))
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP ROLE IF EXISTS {name}"))
        admin.dispose()


def test_where_pg_trgm_can_be_had_the_migration_adds_the_trigram_indexes(
        pg_server_url: URL) -> None:
    with empty_database(pg_server_url, f"gb_trgm_{uuid.uuid4().hex[:10]}") as url:
        upgrade_schema(url)
        assert indexes(url) >= TRIGRAM_INDEX_NAMES
        assert indexed(url)
        assert "text search has its trigram indexes" in schema_detail(url)


def test_a_role_that_cannot_create_pg_trgm_still_migrates_and_searches_by_reading(
        limited_url: str) -> None:
    upgrade_schema(limited_url)
    engine = sa.create_engine(limited_url, poolclass=sa.NullPool)
    try:
        assert current_revision(engine) == head_revision()
    finally:
        engine.dispose()
    assert not indexes(limited_url) & TRIGRAM_INDEX_NAMES
    assert not indexed(limited_url)
    assert "text search has no trigram index" in schema_detail(limited_url)
    store = open_store(limited_url)
    try:
        assert store.find_runs(RunQuery(text="bad input")) == []
    finally:
        store.close()

