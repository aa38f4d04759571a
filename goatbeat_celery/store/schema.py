"""The store's tables, as SQLAlchemy Core metadata.

The table names are public: operators query them. The migrations in
:mod:`goatbeat_celery.migrations` create exactly these tables (a test compares the two).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeEngine

from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.instants import UTC, ensure_aware
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.store.text_search import create_trigram_indexes

SCHEDULE_TABLE = "goatbeat_schedule"
EXECUTION_TABLE = "goatbeat_execution"
LEASE_TABLE = "goatbeat_lease"
BACKFILL_TABLE = "goatbeat_backfill"
#: The sequence PostgreSQL numbers backfills with (the beat role needs USAGE on it).
BACKFILL_ID_SEQUENCE = f"{BACKFILL_TABLE}_id_seq"
CALENDAR_TABLE = "goatbeat_calendar"
SCHEDULE_TAG_TABLE = "goatbeat_schedule_tag"
ALERT_TABLE = "goatbeat_alert"
#: The sequence PostgreSQL numbers alerts with (the beat role needs USAGE on it).
ALERT_ID_SEQUENCE = f"{ALERT_TABLE}_id_seq"
AUDIT_TABLE = "goatbeat_audit"
#: The sequence PostgreSQL numbers audit entries with (the roles that change schedules need
#: USAGE on it).
AUDIT_ID_SEQUENCE = f"{AUDIT_TABLE}_id_seq"
API_TOKEN_TABLE = "goatbeat_api_token"
OUTBOX_TABLE = "goatbeat_outbox"

#: The dialect names of MySQL and MariaDB (SQLAlchemy names MariaDB "mysql" through PyMySQL).
MYSQL_DIALECTS = ("mysql", "mariadb")
#: Width of a SQLite timestamp, ``YYYY-MM-DD HH:MM:SS.ffffff`` in UTC.
SQLITE_TIMESTAMP_WIDTH = 26
_MICROSECOND = timedelta(microseconds=1)


def _partial_index(name: str, *columns: sa.Column[Any], where: str,
                   unique: bool = False) -> sa.Index:
    """An index of the rows matching ``where`` only, on PostgreSQL and SQLite alike."""
    return sa.Index(name, *columns, unique=unique, postgresql_where=sa.text(where),
                    sqlite_where=sa.text(where))


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """An instant: aware datetimes in, aware UTC datetimes out, naive ones refused.

    PostgreSQL stores ``timestamptz``. SQLite has no date type, so the instant is stored as
    fixed-width UTC text, whose string order is the order of the instants. MySQL stores
    ``DATETIME(6)``, zoneless: the instant in UTC.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(sa.String(SQLITE_TIMESTAMP_WIDTH))
        if dialect.name in MYSQL_DIALECTS:
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(sa.DateTime(timezone=True))

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        utc = ensure_aware(value, "instant")
        if dialect.name == "sqlite":
            return utc.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
        if dialect.name in MYSQL_DIALECTS:
            return utc.astimezone(UTC).replace(tzinfo=None)
        return utc

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        return utc_from_db(value)

    def result_processor(self, dialect: Dialect,
                         coltype: Any) -> Callable[[Any], datetime | None] | None:
        # One plain function per value instead of TypeDecorator's two nested calls: a due
        # batch reads six instants per row. The dialect type adds no processing of its own
        # (timestamptz on psycopg, text on SQLite); should it, keep it in front of ours.
        inner = self.load_dialect_impl(dialect).result_processor(dialect, coltype)
        if inner is None:
            return utc_from_db
        return lambda value: utc_from_db(inner(value))


#: Stands for a stored instant that cannot be read (text edited by hand on SQLite, PostgreSQL's
#: ``infinity`` or a year Python cannot hold): reading a row never fails on one value.
UNREADABLE_INSTANT = datetime.min.replace(tzinfo=UTC)


def utc_from_db(value: Any) -> datetime | None:
    """An instant as a driver returns it (aware, or SQLite's text), as an aware UTC datetime;
    :data:`UNREADABLE_INSTANT` for anything else."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
            return (parsed.replace(tzinfo=UTC) if parsed.tzinfo is None
                    else parsed.astimezone(UTC))
        except (ValueError, OverflowError):
            return UNREADABLE_INSTANT
    if not isinstance(value, datetime):
        return UNREADABLE_INSTANT
    if value.tzinfo is UTC:
        return value
    if value.tzinfo is None:
        # Only reachable through a column created by hand without a zone: it holds UTC.
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


class Seconds(sa.types.TypeDecorator[timedelta]):
    """A duration stored as float seconds (readable by operators), read back to the microsecond."""

    impl = sa.Float(precision=53)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> float | None:
        if value is None:
            return None
        if not isinstance(value, timedelta):
            raise ConfigurationError([Problem("duration", f"expected a timedelta, got {value!r}")])
        return value.total_seconds()

    def process_result_value(self, value: Any, dialect: Dialect) -> timedelta | None:
        # Not always a timedelta: see seconds_to_timedelta.
        return None if value is None else seconds_to_timedelta(value)  # type: ignore[return-value]


def seconds_to_timedelta(value: Any) -> timedelta | float:
    """Float seconds as stored, back to the microsecond they were written with; a value that is
    no duration (NaN, infinite, out of range, not a number) comes back as it is stored, for
    the reader to name as damage."""
    try:
        return timedelta(microseconds=round(float(value) * 1_000_000))
    except (TypeError, ValueError, OverflowError):
        return value  # type: ignore[no-any-return]


#: The longest name MySQL and MariaDB keep (an indexed VARCHAR: 255 utf8mb4 characters take
#: 1020 of the 3072 bytes an InnoDB index key may hold, two of them in one index 2040).
MYSQL_IDENTIFIER_LENGTH = 255
#: The longest execution key there: a name of 200 characters whose every character is
#: percent-encoded in its key, an instant and a backfill's suffix fit (2800 bytes, with the
#: instant of ix_goatbeat_execution_recent 2808).
MYSQL_KEY_LENGTH = 700


def _identifier(length: int = MYSQL_IDENTIFIER_LENGTH) -> sa.types.TypeEngine[str]:
    # Names and keys sort by code point everywhere ("C" collation on PostgreSQL; SQLite's
    # default BINARY collation already does; utf8mb4_bin on MySQL), so every backend lists
    # them in the same order.
    return (sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
            .with_variant(sa.String(length, collation="utf8mb4_bin"), *MYSQL_DIALECTS))


class JSONText(sa.types.TypeDecorator[Any]):
    """JSON kept as text (MySQL's JSON type reorders object keys); text that is not JSON
    (written by hand) comes back as the text itself, for the reader to name as damage."""

    impl = mysql.LONGTEXT
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else json.dumps(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        try:
            return json.loads(value)
        except (RecursionError, ValueError):
            return value


def _json() -> sa.types.TypeEngine[Any]:
    # PostgreSQL's json (text), not jsonb: jsonb reorders object keys, and a task must receive
    # its kwargs in the order they were written, as under Celery's own beat.
    return (sa.JSON().with_variant(postgresql.JSON(), "postgresql")
            .with_variant(JSONText(), *MYSQL_DIALECTS))


metadata = sa.MetaData()

schedule_table = sa.Table(
    SCHEDULE_TABLE,
    metadata,
    sa.Column("name", _identifier(), primary_key=True),
    sa.Column("task", sa.Text(), nullable=False),
    sa.Column("args", _json(), nullable=False),
    sa.Column("kwargs", _json(), nullable=False),
    sa.Column("options", _json(), nullable=False),
    sa.Column("trigger", _json(), nullable=False),
    # The trigger's zone, if it has one; informational (the trigger JSON is authoritative).
    sa.Column("timezone", sa.Text(), nullable=True),
    sa.Column("misfire_policy", sa.String(16), nullable=True),
    sa.Column("misfire_grace_seconds", Seconds(), nullable=True),
    sa.Column("max_catchup", sa.Integer(), nullable=True),
    sa.Column("offset_seconds", Seconds(), nullable=True),
    sa.Column("jitter_seconds", Seconds(), nullable=True),
    sa.Column("enabled", sa.Boolean(), nullable=False),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("spec_hash", sa.String(64), nullable=False),
    sa.Column("next_occurrence_at", UTCDateTime(), nullable=True),
    sa.Column("next_run_at", UTCDateTime(), nullable=True),
    sa.Column("last_occurrence_at", UTCDateTime(), nullable=True),
    sa.Column("total_runs", sa.BigInteger(), nullable=False),
    sa.Column("total_missed", sa.BigInteger(), nullable=False),
    sa.Column("version", sa.BigInteger(), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    # Why the leader set the schedule aside (NULL while it runs), since when, how many times in
    # a row; it is looked at again at next_run_at.
    sa.Column("fault", sa.Text(), nullable=True),
    sa.Column("fault_at", UTCDateTime(), nullable=True),
    sa.Column("faults", sa.Integer(), nullable=False, server_default=sa.text("0")),
    # Drop a run not started this long after its due instant (NULL: the global setting).
    sa.Column("starting_deadline_seconds", Seconds(), nullable=True),
    # -- run policies (core.rules.policies) --------------------------------------------------------
    # What a due run does while the previous one is unfinished (NULL: the global setting),
    # fixed_rate or fixed_delay (NULL: fixed_rate), the failure backoff (NULL: off) and the
    # failures in a row after which the schedule pauses itself (NULL: never).
    sa.Column("overlap", sa.String(16), nullable=True),
    sa.Column("mode", sa.String(16), nullable=True),
    sa.Column("failure_backoff_seconds", Seconds(), nullable=True),
    sa.Column("failure_backoff_factor", sa.Float(precision=53), nullable=True),
    sa.Column("failure_backoff_max_seconds", Seconds(), nullable=True),
    sa.Column("pause_after_failures", sa.Integer(), nullable=True),
    # What they keep: failed runs in a row (reset by a success or a resume), why the schedule
    # paused itself (NULL unless it did), the occurrences the overlap policy skipped.
    sa.Column("consecutive_failures", sa.Integer(), nullable=False, server_default=sa.text("0")),
    sa.Column("paused_reason", sa.Text(), nullable=True),
    sa.Column("total_skipped", sa.BigInteger(), nullable=False, server_default=sa.text("0")),
    # -- controls (core.rules.controls) ------------------------------------------------------------
    # No run due before start_at or after end_at (NULL: unbounded), at most max_runs runs
    # counted in total_runs (NULL: no limit), the end of a pause with an end (its note in
    # paused_reason), and a free description and tags (a JSON array of strings; NULL: none).
    sa.Column("start_at", UTCDateTime(), nullable=True),
    sa.Column("end_at", UTCDateTime(), nullable=True),
    sa.Column("max_runs", sa.Integer(), nullable=True),
    sa.Column("paused_until", UTCDateTime(), nullable=True),
    sa.Column("description", sa.Text(), nullable=True),
    sa.Column("tags", _json(), nullable=True),
    # The exclusion calendars observed (core.rules.calendars): a JSON array of calendar names
    # (NULL: none).
    sa.Column("calendars", _json(), nullable=True),
    # crc32 of the UTF-8 name (core.rules.shards.shard_hash): a sharded leader's due read filters on
    # it modulo the shard count. NULL (a row written by an older replica) counts as shard 0.
    sa.Column("shard_hash", sa.BigInteger(), nullable=True),
    # The definition's own version (Schedule.version): one more at each write that changes
    # spec_hash, never at a claim, a report or a pause. `version` above counts every write
    # and is what a claim compares and sets. The default keeps older replicas' inserts valid.
    sa.Column("spec_version", sa.BigInteger(), nullable=False, server_default=sa.text("1")),
    # How many times a run no worker started is sent again (core.rules.runs.resend_due; NULL:
    # the setting goatbeat_run_resends).
    sa.Column("run_resends", sa.Integer(), nullable=True),
    # Alert thresholds (core.rules.alerts; NULL: the settings goatbeat_alert_late,
    # goatbeat_alert_failures, goatbeat_max_runtime, goatbeat_alert_silent,
    # goatbeat_alert_missed, goatbeat_alert_lost).
    sa.Column("alert_late_seconds", Seconds(), nullable=True),
    sa.Column("alert_failures", sa.Integer(), nullable=True),
    sa.Column("max_runtime_seconds", Seconds(), nullable=True),
    sa.Column("alert_silent_seconds", Seconds(), nullable=True),
    sa.Column("alert_missed", sa.Integer(), nullable=True),
    sa.Column("alert_lost", sa.Integer(), nullable=True),
    # Rotation across clusters (core.rules.rotation): a JSON array of the queues occurrence k
    # goes to by k mod N (NULL: none), and whether an unconsumed owner's points go to the next
    # queue (NULL: no).
    sa.Column("rotate", _json(), nullable=True),
    sa.Column("rotate_handover", sa.Boolean(), nullable=True),
)

# Due lookups and the earliest next_run_at read only enabled rows, in (next_run_at, name) order.
_partial_index(
    "ix_goatbeat_schedule_due",
    schedule_table.c.next_run_at,
    schedule_table.c.name,
    where="enabled",
)

# The dashboard's set-aside schedules, by name: a few rows, so only those are indexed.
SET_ASIDE_PREDICATE = "fault IS NOT NULL"
_partial_index("ix_goatbeat_schedule_set_aside", schedule_table.c.name, where=SET_ASIDE_PREDICATE)

# The tag index: one row per tag a schedule carries (its ``tags`` column stays what is shown).
# Triggers on goatbeat_schedule, created by migration 0008, keep it in step with that column in
# the writing transaction, whoever writes it: this release, a replica of the previous one during
# a rolling upgrade, or an operator's SQL. No foreign key: the trigger removes a schedule's
# entries with it, and its rows are never written otherwise.
schedule_tag_table = sa.Table(
    SCHEDULE_TAG_TABLE,
    metadata,
    sa.Column("schedule_name", _identifier(), primary_key=True),
    sa.Column("tag", _identifier(), primary_key=True),
)
# A tag filter reads the names carrying a tag; the admin's choices, the distinct tags in order.
sa.Index("ix_goatbeat_schedule_tag_tag", schedule_tag_table.c.tag,
         schedule_tag_table.c.schedule_name)

execution_table = sa.Table(
    EXECUTION_TABLE,
    metadata,
    sa.Column("key", _identifier(MYSQL_KEY_LENGTH), primary_key=True),
    # No foreign key: executions outlive their schedule as history.
    sa.Column("schedule_name", _identifier(), nullable=False),
    sa.Column("occurrence_at", UTCDateTime(), nullable=False),
    sa.Column("due_at", UTCDateTime(), nullable=False),
    sa.Column("token", sa.BigInteger(), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("claimed_at", UTCDateTime(), nullable=False),
    sa.Column("submitted_at", UTCDateTime(), nullable=True),
    sa.Column("attempts", sa.Integer(), nullable=False),
    sa.Column("last_error", sa.Text(), nullable=True),
    sa.Column("missed", sa.Integer(), nullable=False),
    sa.Column("manual", sa.Boolean(), nullable=False),
    # The starting deadline: never sent once past, and the message's absolute expires.
    sa.Column("expires_at", UTCDateTime(), nullable=True),
    # Run tracking (core.rules.runs): what workers did with the run, written by workers and by the
    # leader's lost-run verdicts, never by dispatch. run_state NULL: not started (yet).
    sa.Column("run_state", sa.String(16), nullable=True),
    sa.Column("run_id", sa.Text(), nullable=True),
    sa.Column("worker", sa.Text(), nullable=True),
    sa.Column("run_attempts", sa.Integer(), nullable=False, server_default=sa.text("0")),
    sa.Column("started_at", UTCDateTime(), nullable=True),
    sa.Column("finished_at", UTCDateTime(), nullable=True),
    sa.Column("heartbeat_at", UTCDateTime(), nullable=True),
    sa.Column("runtime", Seconds(), nullable=True),
    sa.Column("run_error", sa.Text(), nullable=True),
    # Run policies (core.rules.settlement): NULL when no policy of its schedule waited for this
    # run's end, false until its end is applied to the schedule, then true.
    sa.Column("settled", sa.Boolean(), nullable=True),
    # The traceback that goes with run_error (core.rules.tracebacks), at most about 16 KiB;
    # last, where migration 0017 adds it.
    sa.Column("run_traceback", sa.Text(), nullable=True),
    # The queue a rotated schedule's run was sent to (core.rules.rotation), written with
    # submitted; NULL: not rotated. Last, where migration 0018 adds it.
    sa.Column("cluster", sa.Text(), nullable=True),
)

# Resubmission reads the few rows still claimed, oldest first.
_partial_index(
    "ix_goatbeat_execution_pending",
    execution_table.c.claimed_at,
    execution_table.c.key,
    where="state = 'claimed'",
)
sa.Index(
    "ix_goatbeat_execution_history",
    execution_table.c.schedule_name,
    execution_table.c.occurrence_at,
)
# The newest runs of every schedule (the overview's chart, history without a name), read
# backwards in (occurrence_at, key) order instead of sorting the whole history.
sa.Index(
    "ix_goatbeat_execution_recent",
    execution_table.c.occurrence_at,
    execution_table.c.key,
)
# Pruning deletes the oldest rows no longer claimed; claimed rows stay out of this index, which
# spares every claim one index insertion.
_partial_index(
    "ix_goatbeat_execution_claimed_at",
    execution_table.c.claimed_at,
    where="state <> 'claimed'",
)

#: The predicates of the two indexes the leader's search for lost runs reads (the store's
#: queries repeat them as written, for SQLite's planner): runs in progress by last heartbeat,
#: and runs the broker took that no worker has started, by submission.
RUNNING_PREDICATE = "run_state IN ('running', 'retrying')"
UNSTARTED_PREDICATE = "state = 'submitted' AND run_state IS NULL"
_partial_index(
    "ix_goatbeat_execution_running",
    execution_table.c.heartbeat_at,
    where=RUNNING_PREDICATE,
)
_partial_index(
    "ix_goatbeat_execution_unstarted",
    execution_table.c.submitted_at,
    where=UNSTARTED_PREDICATE,
)

#: The predicates of the indexes the run policies read (repeated as written by the store's
#: queries, for SQLite's planner): a schedule's runs in flight, by claim; the runs whose end
#: waits to be applied to their schedule.
IN_FLIGHT_PREDICATE = ("state IN ('claimed', 'submitted', 'held') "
                       "AND (run_state IS NULL OR run_state IN ('running', 'retrying'))")
UNSETTLED_PREDICATE = "NOT settled"
_partial_index(
    "ix_goatbeat_execution_in_flight",
    execution_table.c.schedule_name,
    execution_table.c.claimed_at,
    where=IN_FLIGHT_PREDICATE,
)
_partial_index("ix_goatbeat_execution_unsettled", execution_table.c.key, where=UNSETTLED_PREDICATE)

#: The runs page reads newest first within one outcome (``display.run_status``: the worker's
#: report once there is one, beat's dispatch state before) or one worker. The predicate of the
#: runs not started is repeated as written by the store's query, for SQLite's planner.
NOT_STARTED_PREDICATE = "run_state IS NULL"
sa.Index("ix_goatbeat_execution_run_state", execution_table.c.run_state,
         execution_table.c.occurrence_at, execution_table.c.key)
_partial_index("ix_goatbeat_execution_dispatch_state", execution_table.c.state,
               execution_table.c.occurrence_at, execution_table.c.key,
               where=NOT_STARTED_PREDICATE)
sa.Index("ix_goatbeat_execution_worker", execution_table.c.worker,
         execution_table.c.occurrence_at, execution_table.c.key)


@sa.event.listens_for(execution_table, "after_create")
def _text_search_indexes(target: sa.Table, connection: sa.Connection, **_: Any) -> None:
    """The optional trigram indexes of migration 0020, where PostgreSQL has pg_trgm."""
    create_trigram_indexes(connection)

lease_table = sa.Table(
    LEASE_TABLE,
    metadata,
    sa.Column("name", _identifier(), primary_key=True),
    sa.Column("holder", sa.Text(), nullable=True),
    sa.Column("token", sa.BigInteger(), nullable=False),
    sa.Column("acquired_at", UTCDateTime(), nullable=True),
    sa.Column("expires_at", UTCDateTime(), nullable=True),
    # Who held the lease before, and until when (core.rules.fence.grant_lease, released_by).
    sa.Column("previous_holder", sa.Text(), nullable=True),
    sa.Column("changed_at", UTCDateTime(), nullable=True),
)

backfill_table = sa.Table(
    BACKFILL_TABLE,
    metadata,
    # SQLite numbers only an INTEGER PRIMARY KEY by itself.
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True,
              autoincrement=True),
    # No foreign key: a backfill outlives its schedule as history, like its executions.
    sa.Column("schedule_name", _identifier(), nullable=False),
    sa.Column("start_at", UTCDateTime(), nullable=False),
    sa.Column("end_at", UTCDateTime(), nullable=False),
    sa.Column("mode", sa.String(16), nullable=False),
    sa.Column("newest_first", sa.Boolean(), nullable=False),
    sa.Column("per_tick", sa.Integer(), nullable=True),
    sa.Column("total", sa.Integer(), nullable=False),
    sa.Column("examined", sa.Integer(), nullable=False),
    sa.Column("claimed", sa.Integer(), nullable=False),
    # The last occurrence examined: the next step starts after it (before it, newest first).
    sa.Column("cursor_at", UTCDateTime(), nullable=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("finished_at", UTCDateTime(), nullable=True),
    sa.Column("error", sa.Text(), nullable=True),
)

#: The leader reads the few active backfills, oldest first, every tick.
ACTIVE_BACKFILL_PREDICATE = "state = 'active'"
_partial_index("ix_goatbeat_backfill_active", backfill_table.c.id, where=ACTIVE_BACKFILL_PREDICATE)
sa.Index("ix_goatbeat_backfill_schedule", backfill_table.c.schedule_name, backfill_table.c.id)

# Exclusion calendars (core.rules.calendars): entries is a JSON array of "YYYY-MM-DD" dates and
# {"from": date, "to": date} ranges, both ends included.
calendar_table = sa.Table(
    CALENDAR_TABLE,
    metadata,
    sa.Column("name", _identifier(), primary_key=True),
    sa.Column("description", sa.Text(), nullable=True),
    sa.Column("entries", _json(), nullable=False),
    sa.Column("version", sa.BigInteger(), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
)

# The audit log: one row per change of a schedule, written in the transaction of the change.
# No foreign key: the entries of a deleted schedule stay, until the retention prunes them.
audit_table = sa.Table(
    AUDIT_TABLE,
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True,
              autoincrement=True),
    sa.Column("schedule_name", _identifier(), nullable=False),
    sa.Column("at", UTCDateTime(), nullable=False),
    sa.Column("action", sa.String(32), nullable=False),
    sa.Column("actor", sa.Text(), nullable=False),
    sa.Column("reason", sa.Text(), nullable=True),
    # {"field": [before, after], ...}
    sa.Column("changes", _json(), nullable=False),
)
# A schedule's entries, newest first; and the oldest entries, for pruning.
sa.Index("ix_goatbeat_audit_schedule", audit_table.c.schedule_name, audit_table.c.id)
sa.Index("ix_goatbeat_audit_at", audit_table.c.at)

# The HTTP API's tokens (core.types.tokens): a secret's SHA-256 digest, never the secret.
# scopes is a comma-separated list of read, write, run.
api_token_table = sa.Table(
    API_TOKEN_TABLE,
    metadata,
    sa.Column("name", _identifier(), primary_key=True),
    sa.Column("digest", sa.String(64), nullable=False, unique=True),
    sa.Column("scopes", sa.Text(), nullable=False),
    sa.Column("prefix", sa.Text(), nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("revoked_at", UTCDateTime(), nullable=True),
)

# Events delivered off the scheduling path (core.types.outbox): one row per event id.
outbox_table = sa.Table(
    OUTBOX_TABLE,
    metadata,
    sa.Column("event_id", _identifier(), primary_key=True),
    sa.Column("kind", sa.Text(), nullable=False),
    sa.Column("payload", _json(), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("attempts", sa.Integer(), nullable=False),
    sa.Column("next_attempt_at", UTCDateTime(), nullable=False),
    sa.Column("delivered_at", UTCDateTime(), nullable=True),
    # The keys of the destinations that took the event already (a JSON array), or NULL.
    sa.Column("delivered_to", _json(), nullable=True),
    sa.Column("last_error", sa.Text(), nullable=True),
    sa.Column("claimed_by", sa.Text(), nullable=True),
    sa.Column("claimed_until", UTCDateTime(), nullable=True),
)

#: Deliverers read the undelivered events by their next attempt; pruning reads the delivered
#: ones by when.
UNDELIVERED_PREDICATE = "delivered_at IS NULL"
DELIVERED_PREDICATE = "delivered_at IS NOT NULL"
_partial_index(
    "ix_goatbeat_outbox_due",
    outbox_table.c.next_attempt_at,
    outbox_table.c.event_id,
    where=UNDELIVERED_PREDICATE,
)
_partial_index("ix_goatbeat_outbox_delivered", outbox_table.c.delivered_at,
               where=DELIVERED_PREDICATE)

# Alerts (core.rules.alerts): one row per alert, open until resolved, written by the leader in
# its fenced transaction. No foreign key: an alert outlives its schedule as history.
alert_table = sa.Table(
    ALERT_TABLE,
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True,
              autoincrement=True),
    sa.Column("schedule_name", _identifier(), nullable=False),
    sa.Column("rule", sa.String(16), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("reason", sa.Text(), nullable=False),
    # The last run that showed it (NULL: no one run does, as for silent).
    sa.Column("key", sa.Text(), nullable=True),
    sa.Column("first_at", UTCDateTime(), nullable=False),
    sa.Column("last_at", UTCDateTime(), nullable=False),
    sa.Column("resolved_at", UTCDateTime(), nullable=True),
    sa.Column("count", sa.Integer(), nullable=False),
    # Who acknowledged it, when, why (NULL: not acknowledged); until when nothing is told of
    # it, set by whom (NULL: not silenced).
    sa.Column("acknowledged_at", UTCDateTime(), nullable=True),
    sa.Column("acknowledged_by", sa.Text(), nullable=True),
    sa.Column("ack_note", sa.Text(), nullable=True),
    sa.Column("silenced_until", UTCDateTime(), nullable=True),
    sa.Column("silenced_by", sa.Text(), nullable=True),
)

#: At most one open alert per schedule and rule, whoever writes: the database keeps a change
#: planned twice (two leaders' looks around a failover) from opening a second one.
OPEN_ALERT_PREDICATE = "state = 'open'"
_partial_index(
    "ix_goatbeat_alert_open",
    alert_table.c.schedule_name,
    alert_table.c.rule,
    unique=True,
    where=OPEN_ALERT_PREDICATE,
)
sa.Index("ix_goatbeat_alert_schedule", alert_table.c.schedule_name, alert_table.c.id)
