"""Listing by tag on every store follows every write of a schedule's tags: creation, an edit,
a deletion (and a new schedule of the same name), config sync; the SQL stores' tag index also
follows rows written by SQL alone (a replica of the previous release during a rolling upgrade,
an operator), and its entries are exactly the distinct strings of each row's tags."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from goatbeat_celery.core.rules.controls import MAX_FILTER_TAGS
from goatbeat_celery.core.types.errors import ScheduleConflict
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.listing import RunOrderCursor, ScheduleOrder
from goatbeat_celery.core.types.spec import ScheduleSource, SyncEntry
from goatbeat_celery.store import open_store
from goatbeat_celery.store.schema import schedule_table, schedule_tag_table
from goatbeat_celery.store.sql import _spec_values

from .conftest import Store
from .support import LONG_TTL, interval_spec

START = datetime(2030, 5, 1, 8, 0, tzinfo=UTC)
M = timedelta(minutes=1)


def tagged(store: Store, *tags: str, **filters: object) -> list[str]:
    return [s.name for s in store.list_schedules(tags=tags, **filters)]  # type: ignore[arg-type]


def create(store: Store, name: str, *tags: str, at: datetime | None = None,
           **fields: object) -> None:
    store.create_schedule(interval_spec(name, tags=tags, **fields), next_occurrence_at=at,
                          next_run_at=at)


def test_an_edit_moves_a_schedule_from_its_old_tags_to_its_new_ones(store: Store) -> None:
    create(store, "job", "billing", "nightly")
    create(store, "other", "billing")
    current = store.get_schedule("job")
    store.replace_schedule(replace(current.spec, tags=("nightly", "eu")),
                           next_occurrence_at=None, next_run_at=None)
    assert tagged(store, "billing") == ["other"]
    assert tagged(store, "nightly") == ["job"]
    assert tagged(store, "eu", "nightly") == ["job"]
    assert tagged(store, "eu", "billing") == []


def test_an_edit_that_removes_every_tag_leaves_the_schedule_in_no_tag(store: Store) -> None:
    create(store, "job", "billing")
    store.replace_schedule(replace(store.get_schedule("job").spec, tags=()),
                           next_occurrence_at=None, next_run_at=None)
    assert tagged(store, "billing") == []
    assert [s.name for s in store.list_schedules()] == ["job"]


def test_a_refused_edit_leaves_the_tags_found_as_they_were(store: Store) -> None:
    create(store, "job", "billing")
    current = store.get_schedule("job")
    with pytest.raises(ScheduleConflict):
        store.replace_schedule(replace(current.spec, tags=("eu",)), next_occurrence_at=None,
                               next_run_at=None, expected_version=current.row_version + 1)
    assert (tagged(store, "billing"), tagged(store, "eu")) == (["job"], [])


def test_a_deleted_schedule_is_in_no_tag_and_its_successor_only_in_its_own(
        store: Store) -> None:
    create(store, "job", "billing", "nightly")
    store.delete_schedule("job")
    assert tagged(store, "billing") == []
    create(store, "job", "eu")
    assert (tagged(store, "billing"), tagged(store, "nightly"), tagged(store, "eu")) == (
        [], [], ["job"])


def test_config_sync_indexes_created_entries_and_follows_their_changed_tags(
        store: Store) -> None:
    grant = store.acquire("beat", "replica", LONG_TTL)
    assert grant is not None

    def entry(name: str, *tags: str, enabled: bool = True) -> SyncEntry:
        spec = interval_spec(name, source=ScheduleSource.CONFIG, tags=tags, enabled=enabled)
        return SyncEntry(spec=spec, next_occurrence_at=START, next_run_at=START)

    store.sync_config([entry("report", "billing"), entry("digest", "mail", "billing")],
                      lease=grant)
    assert tagged(store, "billing") == ["digest", "report"]
    store.sync_config([entry("report", "eu"), entry("digest", "mail", enabled=False)],
                      lease=grant)
    assert (tagged(store, "billing"), tagged(store, "eu"), tagged(store, "mail")) == (
        [], ["report"], ["digest"])
    # An entry gone from the config is disabled: it keeps its tags.
    store.sync_config([entry("report", "eu")], lease=grant)
    assert tagged(store, "mail") == ["digest"]
    assert tagged(store, "mail", paused=True) == ["digest"]


def test_a_paused_schedule_keeps_its_tags(store: Store) -> None:
    create(store, "job", "billing", at=START)
    current = store.get_schedule("job")
    store.replace_schedule(replace(current.spec, enabled=False), next_occurrence_at=START,
                           next_run_at=START)
    assert tagged(store, "billing", paused=True) == ["job"]
    assert tagged(store, "billing", paused=False) == []


def test_listing_by_tag_in_run_order_pages_with_the_cursor(store: Store) -> None:
    for index, name in enumerate(("e", "d", "c", "b", "a")):
        create(store, name, *(("billing",) if name != "c" else ("mail",)),
               at=START + index * M)
    create(store, "z", "billing")  # no next run: last
    first = store.list_schedules(tags=["billing"], order=ScheduleOrder.NEXT_RUN, limit=2)
    assert [s.name for s in first] == ["e", "d"]
    after = RunOrderCursor(next_run_at=first[-1].next_run_at, name=first[-1].name)
    assert tagged(store, "billing", after=after, order=ScheduleOrder.NEXT_RUN) == [
        "b", "a", "z"]


def test_a_tag_is_matched_whole_and_exactly(store: Store) -> None:
    create(store, "job", "Billing", "équipe-nuit", "it's", "a%b")
    create(store, "other", "billing")
    assert tagged(store, "Billing") == ["job"]
    assert tagged(store, "billing") == ["other"]
    assert tagged(store, "bill") == []
    assert tagged(store, "équipe-nuit", "it's", "a%b") == ["job"]
    assert tagged(store, "a%") == []
    assert tagged(store, "billing", "billing") == ["other"]


def test_tags_combine_with_the_other_filters(store: Store) -> None:
    create(store, "api-1", "billing")
    create(store, "api-2", "billing", enabled=False)
    create(store, "other", "billing")
    assert tagged(store, "billing", prefix="api-") == ["api-1", "api-2"]
    assert tagged(store, "billing", prefix="api-", paused=False) == ["api-1"]
    assert tagged(store, "billing", source=ScheduleSource.CONFIG) == []


def test_a_listing_by_the_most_tags_finds_only_the_schedules_carrying_every_one(
        store: Store) -> None:
    wanted = [f"t{index}" for index in range(MAX_FILTER_TAGS)]
    create(store, "all", *reversed(wanted), "extra")
    create(store, "all-but-one", *wanted[1:])
    create(store, "one", wanted[0])
    assert tagged(store, *wanted) == ["all"]
    assert tagged(store, *wanted[1:]) == ["all", "all-but-one"]
    assert tagged(store, *wanted, *wanted) == ["all"]  # a repeat asks for nothing more
    assert tagged(store, wanted[0], "missing") == []


# -- the SQL stores' index, written by the database --------------------------------------
@pytest.fixture(params=["sqlite", "postgres"])
def sql_url(request: pytest.FixtureRequest) -> str:
    if request.param == "sqlite":
        tmp_path: Path = request.getfixturevalue("tmp_path")
        return f"sqlite:///{tmp_path / 'store.db'}"
    url: str = request.getfixturevalue("pg_empty_url")
    return url


@pytest.fixture
def sql_store(sql_url: str) -> Iterator[Store]:
    store: Store = open_store(sql_url)
    yield store
    store.close()


@pytest.fixture
def engine(sql_url: str, sql_store: Store) -> Iterator[sa.Engine]:
    engine = sa.create_engine(sql_url, poolclass=sa.NullPool)
    yield engine
    engine.dispose()


def entries(engine: sa.Engine) -> set[tuple[str, str]]:
    with engine.connect() as connection:
        return {(name, tag) for name, tag in connection.execute(sa.select(schedule_tag_table))}


def test_rows_written_by_sql_alone_are_indexed(sql_store: Store, engine: sa.Engine) -> None:
    # As a replica of the previous release writes them: it knows nothing of the index.
    values = _spec_values(interval_spec("job"))
    with engine.begin() as connection:
        connection.execute(sa.insert(schedule_table).values(
            **{**values, "tags": ["billing", "nightly"]}, total_runs=0, total_missed=0,
            version=1, created_at=START, updated_at=START))
    assert tagged(sql_store, "billing", "nightly") == ["job"]
    with engine.begin() as connection:
        connection.execute(sa.update(schedule_table).values(tags=["eu"]))
    assert (tagged(sql_store, "billing"), tagged(sql_store, "eu")) == ([], ["job"])
    with engine.begin() as connection:
        connection.execute(sa.update(schedule_table).values(name="renamed"))
    assert tagged(sql_store, "eu") == ["renamed"]
    with engine.begin() as connection:
        connection.execute(sa.delete(schedule_table))
    assert entries(engine) == set()


def test_the_entries_are_the_distinct_strings_of_a_json_array(sql_store: Store,
                                                               engine: sa.Engine) -> None:
    create(sql_store, "job", "billing")
    json_value = "CAST(:tags AS json)" if engine.dialect.name == "postgresql" else ":tags"
    with engine.begin() as connection:
        for name, tags in (("repeated", '["a", "a", "b"]'), ("mixed", '["a", 1, null, ["b"]]'),
                           ("object", '{"a": "b"}'), ("text", '"a"'), ("none", "null")):
            connection.execute(
                sa.text("INSERT INTO goatbeat_schedule (name, task, args, kwargs, options, "
                        "trigger, enabled, source, spec_hash, total_runs, total_missed, "
                        "version, created_at, updated_at, tags) SELECT :name, task, args, "
                        "kwargs, options, trigger, enabled, source, spec_hash, 0, 0, 1, "
                        f"created_at, updated_at, {json_value} "
                        "FROM goatbeat_schedule WHERE name = 'job'"),
                {"name": name, "tags": tags})
    assert entries(engine) == {("job", "billing"), ("repeated", "a"), ("repeated", "b"),
                               ("mixed", "a")}


def test_emptying_the_schedules_empties_the_index(sql_store: Store, engine: sa.Engine) -> None:
    create(sql_store, "job", "billing")
    statement = ("TRUNCATE goatbeat_schedule" if engine.dialect.name == "postgresql"
                 else "DELETE FROM goatbeat_schedule")
    with engine.begin() as connection:
        connection.execute(sa.text(statement))
    assert entries(engine) == set()
    create(sql_store, "job", "eu")
    assert entries(engine) == {("job", "eu")}


# -- one grouped look, whatever the number of tags ----------------------------------------
def _listing_statement(store: Any, tags: list[str]) -> tuple[str, Any]:
    """The statement (and its parameters) the store sends to list by ``tags``."""
    sent: list[tuple[str, Any]] = []

    def seen(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        sent.append((statement, parameters))

    engine: sa.Engine = store._reader
    sa.event.listen(engine, "before_cursor_execute", seen)
    try:
        store.list_schedules(tags=tags)
    finally:
        sa.event.remove(engine, "before_cursor_execute", seen)
    (listing,) = [(text, params) for text, params in sent if "goatbeat_schedule_tag" in text]
    return listing


def _plan_nodes(plan: dict[str, Any]) -> int:
    return 1 + sum(_plan_nodes(child) for child in plan.get("Plans", ()))


def test_a_listing_by_many_tags_is_one_look_in_the_index_whatever_their_number(
        sql_store: Store) -> None:
    many = [f"t{index}" for index in range(MAX_FILTER_TAGS)]
    create(sql_store, "job", *many)
    few_text, few_params = _listing_statement(sql_store, many[:2])
    many_text, many_params = _listing_statement(sql_store, many)
    # One reference to the index (no sub-select per tag), the same shape for 2 tags and 10.
    assert many_text.count("FROM goatbeat_schedule_tag") == 1, many_text
    assert many_text.count("SELECT") == few_text.count("SELECT") == 2, many_text
    engine: sa.Engine = sql_store._reader  # type: ignore[attr-defined]
    if engine.dialect.name != "postgresql":
        return
    # Planned alike: as many nodes for 10 tags as for 2 (each tag's sub-select added its own).
    with engine.connect() as connection:
        plans = [connection.exec_driver_sql("EXPLAIN (FORMAT JSON) " + text, params).scalar_one()
                 for text, params in ((few_text, few_params), (many_text, many_params))]
    few_plan, many_plan = (json.loads(p) if isinstance(p, str) else p for p in plans)
    assert _plan_nodes(many_plan[0]["Plan"]) == _plan_nodes(few_plan[0]["Plan"])
