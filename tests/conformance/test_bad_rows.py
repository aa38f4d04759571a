"""Rows broken by hand in a real database: each is read, set aside with its reason, and the
other schedules keep running; listing, showing and deleting such a row still work.

Each case writes one column of an otherwise good, due row with SQL, as an operator's typo or a
careless migration would, then lets a leader tick once.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from goatbeat_celery.core.rules.calendars import Calendar
from goatbeat_celery.core.types.audit import AuditAction, AuditNote
from goatbeat_celery.core.types.claims import PlannedClaim
from goatbeat_celery.core.types.errors import StoreError, StoreUnavailable
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.set_aside import SET_ASIDE_RETRY
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.store import open_store
from goatbeat_celery.store.url import normalise_url
from goatbeat_celery.testing import build_engine

from .conftest import Store
from .support import RecordingSubmitter, create_due, interval_spec


@dataclass
class Database:
    """A store and a raw connection to the same tables."""

    dialect: str
    store: Store
    raw: sa.Engine

    def write(self, name: str, column: str, value: Any, *, json: bool = False) -> None:
        """Overwrite one column of schedule ``name`` with ``value``, as SQL typed by hand."""
        target = ":value"
        if json and self.dialect == "postgres":
            target = "CAST(:value AS jsonb)"
        with self.raw.begin() as conn:
            conn.execute(sa.text(f"UPDATE goatbeat_schedule SET {column} = {target} "
                                 "WHERE name = :name"), {"value": value, "name": name})

    def fault(self, name: str) -> str | None:
        with self.raw.connect() as conn:
            found: str | None = conn.execute(
                sa.text("SELECT fault FROM goatbeat_schedule WHERE name = :name"),
                {"name": name}).scalar_one()
        return found


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest) -> Iterator[Database]:
    if request.param == "sqlite":
        path: Path = request.getfixturevalue("tmp_path") / "store.db"
        url = f"sqlite:///{path}"
    else:
        url = request.getfixturevalue("pg_empty_url")
    store = open_store(url)
    raw = sa.create_engine(normalise_url(url))
    yield Database(dialect=request.param, store=store, raw=raw)
    raw.dispose()
    store.close()


def lead_once(database: Database) -> RecordingSubmitter:
    submitter = RecordingSubmitter()
    engine = build_engine(database.store, submitter=submitter,
                          settings=Settings(lease_ttl=60, lease_renew_interval=20), holder="a")
    try:
        engine.tick()
    finally:
        engine.close()
    return submitter


def only_the_canary_sent(database: Database, broken: str) -> None:
    """One tick of a leader sends the canary and nothing of ``broken``."""
    sent = lead_once(database)

    assert [key for key in sent.keys if key.startswith("canary:")]
    assert not [key for key in sent.keys if key.startswith(f"{broken}:")]


def write_unreadable_instant(database: Database, name: str, column: str) -> None:
    """An instant Python cannot read in ``column`` of schedule ``name``: PostgreSQL's infinity,
    text that is no time on SQLite."""
    value = "infinity" if database.dialect == "postgres" else "not a time"
    with database.raw.begin() as conn:
        conn.execute(sa.text(
            f"UPDATE goatbeat_schedule SET {column} = "
            f"{'CAST(:v AS timestamptz)' if database.dialect == 'postgres' else ':v'} "
            "WHERE name = :name"), {"v": value, "name": name})


#: (column, value, JSON?, a word the recorded reason must contain)
BROKEN: dict[str, tuple[str, Any, bool, str]] = {
    "empty-trigger": ("trigger", "{}", True, "trigger"),
    "array-trigger": ("trigger", "[]", True, "trigger"),
    "unknown-kind": ("trigger", '{"kind": "lunar"}', True, "lunar"),
    "tiny-interval": ("trigger", '{"kind": "interval", "every": 1e-06}', True, "every"),
    "text-interval": ("trigger", '{"kind": "interval", "every": "soon"}', True, "every"),
    "huge-interval": ("trigger", '{"kind": "interval", "every": 1e300}', True, "every"),
    "bad-cron": ("trigger", '{"kind": "cron", "expression": "nope", "timezone": "UTC"}', True,
                 "cron"),
    "unknown-policy": ("misfire_policy", "sometimes", False, "misfire_policy"),
    "huge-grace": ("misfire_grace_seconds", 1e12, False, "misfire_grace"),
    "huge-offset": ("offset_seconds", 1e300, False, "offset"),
    "negative-catchup": ("max_catchup", -5, False, "max_catchup"),
    "number-args": ("args", "5", True, "args"),
    "text-args": ("args", '"abc"', True, "args"),
    "list-kwargs": ("kwargs", "[1]", True, "kwargs"),
    "text-options": ("options", '"x"', True, "options"),
    "retry-option": ("options", '{"retry": false}', True, "options.retry"),
    "queue-number": ("options", '{"queue": 5}', True, "options.queue"),
    "headers-list": ("options", '{"headers": [1]}', True, "options.headers"),
    "unknown-source": ("source", "bogus", False, "source"),
    "empty-task": ("task", "", False, "task"),
    "unknown-overlap": ("overlap", "sometimes", False, "overlap"),
    "unknown-mode": ("mode", "lunar", False, "mode"),
    "negative-failure-backoff": ("failure_backoff_seconds", -5, False, "failure_backoff"),
    "shrinking-backoff-factor": ("failure_backoff_factor", 0.5, False, "failure_backoff_factor"),
    "negative-pause-after": ("pause_after_failures", -1, False, "pause_after_failures"),
    "negative-max-runs": ("max_runs", -1, False, "max_runs"),
    "zero-max-runs": ("max_runs", 0, False, "max_runs"),
    "text-tags": ("tags", '"billing"', True, "tags"),
    "object-tags": ("tags", '{"a": 1}', True, "tags"),
    "number-tag": ("tags", "[1]", True, "tags"),
    "spaced-tag": ("tags", '["two words"]', True, "tags"),
    "text-calendars": ("calendars", '"holidays"', True, "calendars"),
    "number-calendar": ("calendars", "[1]", True, "calendars"),
    "spaced-calendar": ("calendars", '["two words"]', True, "calendars"),
    "missing-calendar": ("calendars", '["nowhere"]', True, "nowhere"),
    "text-rotate": ("rotate", '"eu,us"', True, "rotate"),
    "number-rotate": ("rotate", "[1, 2]", True, "rotate"),
    "one-queue-rotate": ("rotate", '["eu"]', True, "rotate"),
    "repeated-queue-rotate": ("rotate", '["eu", "eu"]', True, "rotate"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_row_broken_by_hand_is_set_aside_and_the_others_run(database: Database,
                                                               case: str) -> None:
    column, value, json, word = BROKEN[case]
    create_due(database.store, "canary", every=1)
    create_due(database.store, "broken", every=1)
    database.write("broken", column, value, json=json)

    only_the_canary_sent(database, "broken")
    fault = database.fault("broken")
    assert fault is not None and word in fault, fault
    # An operator can still see and remove it.
    listed = {s.name: s for s in database.store.list_schedules()}
    assert listed["broken"].set_aside
    assert database.store.get_schedule("broken").fault == fault
    database.store.delete_schedule("broken")


@pytest.mark.parametrize("entries", ['{"a": 1}', '["2026-13-01"]', '[{"from": "2026-01-01"}]'],
                         ids=["object", "bad-date", "half-range"])
def test_a_calendar_broken_by_hand_sets_aside_only_the_schedules_observing_it(
        database: Database, entries: str) -> None:
    store = database.store
    store.create_calendar(Calendar(name="broken"))
    store.create_calendar(Calendar(name="fine"))
    create_due(store, "canary", every=1, calendars=("fine",))
    create_due(store, "observer", every=1, calendars=("fine", "broken"))
    with database.raw.begin() as conn:
        conn.execute(sa.text("UPDATE goatbeat_calendar SET entries = :v WHERE name = 'broken'"),
                     {"v": entries})

    only_the_canary_sent(database, "observer")
    fault = database.fault("observer") or ""
    assert "calendar 'broken' cannot be read" in fault and "entries" in fault, fault


def test_an_end_written_before_the_start_is_set_aside(database: Database) -> None:
    create_due(database.store, "canary", every=1)
    start = database.store.now() - timedelta(days=1)
    create_due(database.store, "broken", every=1, start_at=start)
    end = start - timedelta(hours=1)
    value: Any = end
    if database.dialect == "sqlite":  # stored as fixed-width UTC text there
        value = end.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
    database.write("broken", "end_at", value)

    only_the_canary_sent(database, "broken")
    assert "end_at" in (database.fault("broken") or "")


def test_an_unreadable_start_is_set_aside_naming_it(database: Database) -> None:
    create_due(database.store, "canary", every=1)
    create_due(database.store, "broken", every=1)
    write_unreadable_instant(database, "broken", "start_at")

    only_the_canary_sent(database, "broken")
    assert "start_at: the stored instant cannot be read" in (database.fault("broken") or "")


def test_nan_durations_are_set_aside(database: Database) -> None:
    create_due(database.store, "canary", every=1)
    create_due(database.store, "broken", every=1)
    database.write("broken", "misfire_grace_seconds", float("nan"))

    sent = lead_once(database)

    assert [key for key in sent.keys if key.startswith("canary:")]
    if database.dialect == "postgres":
        assert "misfire_grace_seconds" in (database.fault("broken") or "")
    else:  # SQLite stores NaN as NULL: the default grace applies, and the row runs
        assert [key for key in sent.keys if key.startswith("broken:")]


def test_an_unreadable_next_occurrence_starts_the_schedule_again(database: Database) -> None:
    broken = create_due(database.store, "broken", every=1)
    write_unreadable_instant(database, "broken", "next_occurrence_at")

    lead_once(database)

    restarted = database.store.get_schedule("broken")
    assert restarted.next_occurrence_at is not None
    assert broken.next_occurrence_at is not None
    assert restarted.next_occurrence_at > broken.next_occurrence_at
    assert restarted.fault is None


def _random_name(length: int) -> str:
    # Random letters do not compress: such a name fits the schedule's index (2704 bytes) while
    # an execution key (the name and an instant) does not.
    rng = random.Random(7)
    return "".join(rng.choice(string.ascii_letters) for _ in range(length))


def test_a_name_too_long_for_an_execution_key_is_set_aside_not_an_outage(
        pg_empty_url: str) -> None:
    store = open_store(pg_empty_url)
    raw = sa.create_engine(normalise_url(pg_empty_url))
    database = Database(dialect="postgres", store=store, raw=raw)
    try:
        create_due(store, "canary", every=1)
        long_name = _random_name(2680)
        create_due(store, "placeholder", every=1)
        database.write("placeholder", "name", long_name)

        sent = lead_once(database)

        assert {key.split(":")[0] for key in sent.keys} == {"canary"}
        assert "name: 2680 characters" in (database.fault(long_name) or "")
    finally:
        raw.dispose()
        store.close()


def test_a_key_the_database_refuses_is_a_refusal_not_an_outage(pg_empty_url: str) -> None:
    """What the engine narrows a refused claim down by: the claim fails as StoreError, never
    StoreUnavailable (which would make every replica wait for a database that is up)."""
    store = open_store(pg_empty_url)
    try:
        schedule = create_due(store, "placeholder", every=1)
        grant = store.acquire("default", "a", timedelta(seconds=60))
        assert grant is not None and schedule.next_occurrence_at is not None
        raw = sa.create_engine(normalise_url(pg_empty_url))
        with raw.begin() as conn:
            conn.execute(sa.text("UPDATE goatbeat_schedule SET name = :n"),
                         {"n": _random_name(2680)})
        raw.dispose()
        long_schedule = store.list_schedules()[0]
        claim = PlannedClaim(
            schedule_name=long_schedule.name, version=long_schedule.row_version,
            occurrences=((schedule.next_occurrence_at, schedule.next_occurrence_at),),
            missed=0, next_occurrence_at=None, next_run_at=None)

        with pytest.raises(StoreError) as raised:
            store.claim([claim], lease=grant)

        assert not isinstance(raised.value, StoreUnavailable)
        assert "index row size" in str(raised.value)
    finally:
        store.close()


def test_a_set_aside_row_waits_for_its_retry_time(database: Database) -> None:
    create_due(database.store, "broken", every=1)
    database.write("broken", "trigger", "{}", json=True)

    lead_once(database)
    lead_once(database)

    schedule = database.store.get_schedule("broken")
    assert schedule.faults == 1, "not looked at again before its retry time"
    # The retry is SET_ASIDE_RETRY (30 s) after the first look; this test takes about a second.
    assert schedule.next_run_at is not None and schedule.fault_at is not None
    assert schedule.next_run_at > database.store.now()
    assert schedule.next_run_at <= schedule.fault_at + SET_ASIDE_RETRY


@pytest.mark.parametrize("changes", ['"text"', '{"task": "not a pair"}', '[1, 2]'],
                         ids=["string", "not-pairs", "array"])
def test_an_audit_entry_broken_by_hand_is_read_naming_its_damage(database: Database,
                                                                 changes: str) -> None:
    database.store.create_schedule(interval_spec("job"), next_occurrence_at=None,
                                   next_run_at=None,
                                   audit=AuditNote(action=AuditAction.CREATE, actor="os:ops"))
    with database.raw.begin() as conn:
        conn.execute(sa.text("UPDATE goatbeat_audit SET changes = :v, action = 'renamed'"),
                     {"v": changes})

    [entry] = database.store.audit_log(schedule_name="job")
    assert (entry.changes, entry.action, entry.actor) == ({}, "renamed", "os:ops")
    assert entry.damage == (Problem("changes", "expected a JSON object of [before, after] pairs"),)
