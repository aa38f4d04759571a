"""The schedule store and lease manager on SQLAlchemy Core, shared by PostgreSQL and SQLite.

:class:`SQLStore` implements :class:`~goatbeat_celery.core.protocols.ScheduleStore` and
:class:`~goatbeat_celery.core.protocols.LeaseManager` with the semantics of the memory store.
What differs between databases is asked of a few hooks, answered once by each subclass:

* :meth:`SQLStore._now_sql` — the store's clock as an SQL expression (``now()`` on PostgreSQL,
  a bound value from the injected clock on SQLite);
* :meth:`SQLStore._insert` — the dialect's ``INSERT`` (for ``ON CONFLICT DO NOTHING``);
* :meth:`SQLStore._in` / ``_IN_CHUNK`` — membership in a list of strings;
* :meth:`SQLStore._lock_for_claim` / :meth:`SQLStore._record_claims` — the reads and writes
  of a claim batch, one statement each on PostgreSQL;
* :meth:`SQLStore._announce_in` / :meth:`SQLStore._announced` — waking waiting replicas.

``SELECT ... FOR SHARE / FOR UPDATE [SKIP LOCKED]`` is written unconditionally: SQLite's
compiler leaves it out, and SQLite serialises writers with ``BEGIN IMMEDIATE`` instead.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, ClassVar, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import Insert as PGInsert
from sqlalchemy.dialects.sqlite import Insert as SQLiteInsert

from goatbeat_celery.core.backfill import (
    Backfill,
    BackfillMode,
    BackfillRequest,
    BackfillState,
    BackfillStep,
    progress_after,
    step_executions,
)
from goatbeat_celery.core.calendars import Calendar, calendar_from_row
from goatbeat_celery.core.claims import (
    ATTEMPTS_MAX,
    ClaimPlan,
    InFlight,
    in_flight,
    manual_execution,
    manual_run_exists,
    next_attempt,
    plan_claims,
)
from goatbeat_celery.core.errors import (
    BackfillNotFound,
    CalendarInUse,
    CalendarNotFound,
    ConfigurationError,
    ScheduleConflict,
    ScheduleNotFound,
    StoreError,
)
from goatbeat_celery.core.faults import CLAIM_CLEARS, EDIT_CLEARS, plan_set_aside
from goatbeat_celery.core.fence import fenced_clock, grant_lease
from goatbeat_celery.core.model import (
    ClaimResult,
    Dispatch,
    DueBatch,
    Execution,
    ExecutionState,
    FinishedRun,
    LeaseGrant,
    LeaseInfo,
    MisfirePolicy,
    PauseNote,
    PlannedClaim,
    RunOrderCursor,
    RunSettlement,
    Schedule,
    ScheduleCounts,
    ScheduleOrder,
    ScheduleSource,
    ScheduleSpec,
    SetAside,
    SettleReport,
    SyncEntry,
    SyncReport,
    TriggerSpec,
    Waiting,
    check_aware,
    ensure_aware,
    list_order,
)
from goatbeat_celery.core.policies import (
    PENDING_STATES,
    OverlapPolicy,
    ScheduleMode,
    execution_end,
)
from goatbeat_celery.core.runs import (
    CAS_COLUMNS,
    ENDED_STATE_VALUES,
    RUN_COLUMNS,
    RunEvent,
    RunRecord,
    RunState,
    apply_events,
    last_news,
    lost_verdict,
    settled_after_report,
)
from goatbeat_celery.core.settlement import RESUME_CLEARS, held_to_release
from goatbeat_celery.core.shards import Shard, shard_hash
from goatbeat_celery.core.sync import StoredSummary, plan_config_sync
from goatbeat_celery.core.validation import (
    payload_problems,
    reason_text,
    shown_value,
    stored_value,
)
from goatbeat_celery.store.errors import translated
from goatbeat_celery.store.schema import (
    IN_FLIGHT_PREDICATE,
    RUNNING_PREDICATE,
    UNREADABLE_INSTANT,
    UNSETTLED_PREDICATE,
    UNSTARTED_PREDICATE,
    UTCDateTime,
    backfill_table,
    calendar_table,
    execution_table,
    lease_table,
    schedule_table,
    schedule_tag_table,
)
from goatbeat_celery.store.url import mask_url

logger = logging.getLogger(__name__)

S = schedule_table
T = schedule_tag_table
C = calendar_table
E = execution_table
L = lease_table
B = backfill_table

# Written exactly as the partial indexes' predicates, so that both planners match them: SQLite
# compares the terms as written (SQLAlchemy would render ``enabled = 1`` there), and a literal
# rather than a bound parameter lets PostgreSQL match even a generic prepared plan.
_IS_ENABLED = sa.text("goatbeat_schedule.enabled")
_IS_CLAIMED = sa.text("goatbeat_execution.state = 'claimed'")
# A schedule in shard :shard_index of :shard_count (core.shards); no hash stored: shard 0.
_IN_SHARD = sa.or_(
    S.c.shard_hash % sa.bindparam("shard_count", type_=sa.BigInteger())
    == sa.bindparam("shard_index", type_=sa.BigInteger()),
    sa.and_(S.c.shard_hash.is_(None),
            sa.bindparam("shard_index", type_=sa.BigInteger()) == sa.literal_column("0")))


def _shard_rows(shard: Shard) -> sa.ColumnElement[bool]:
    """Rows joined to their schedule (outer join) that are ``shard``'s: its schedules', and
    for shard 0 those whose schedule no longer exists (no row joined)."""
    return sa.or_(_IN_SHARD, S.c.name.is_(None)) if shard.does_global_work else _IN_SHARD


def due_params(limit: int, shard: Shard | None) -> dict[str, int]:
    if shard is None:
        return {"due_limit": limit}
    return {"due_limit": limit, "shard_count": shard.count, "shard_index": shard.index}
_NOT_CLAIMED = sa.text("goatbeat_execution.state <> 'claimed'")
# The same test hidden from the planner: marking rows by key must look them up by key, not
# scan the partial index of claimed rows (full of dead entries right after a burst of claims).
_STILL_CLAIMED = sa.text("coalesce(goatbeat_execution.state = 'claimed', false)")

_IS_IN_FLIGHT = sa.text(IN_FLIGHT_PREDICATE)
_IS_UNSETTLED = sa.text(UNSETTLED_PREDICATE)
# A run whose end may wait to be applied: a worker's end or a lost verdict, or never sent.
_ENDED_RUN_STATES = ENDED_STATE_VALUES
_NEVER_SENT_STATES = tuple(state.value for state in ExecutionState
                           if state.value not in PENDING_STATES)
#: Never pruned: claims not yet sent, and claims held back for their turn.
_PRUNABLE = sa.and_(_NOT_CLAIMED, sa.text("goatbeat_execution.state <> 'held'"))
_IS_RUNNING = sa.text(RUNNING_PREDICATE)
_IS_UNSTARTED = sa.text(UNSTARTED_PREDICATE)

Insert = PGInsert | SQLiteInsert

#: What a claim reads of the rows it locks: the version to compare and what a dispatch carries.
#: ``total_runs`` too: a run limit is checked against the count locked with the row.
_CLAIM_COLUMNS = (S.c.name, S.c.version, S.c.task, S.c.args, S.c.kwargs, S.c.options,
                  S.c.total_runs)

# Advancing one claimed schedule as core.claims.Advance says: counters grow in SQL, the last
# occurrence is kept when the claim ran none (an unplannable schedule only moves its next_run_at).
_ADVANCE_ONE = (
    sa.update(S)
    .where(S.c.name == sa.bindparam("b_name"), S.c.version == sa.bindparam("b_version"))
    .values(
        next_occurrence_at=sa.bindparam("b_next_occurrence", type_=UTCDateTime()),
        next_run_at=sa.bindparam("b_next_run", type_=UTCDateTime()),
        last_occurrence_at=sa.func.coalesce(
            sa.bindparam("b_last_occurrence", type_=UTCDateTime()), S.c.last_occurrence_at),
        total_runs=S.c.total_runs + sa.bindparam("b_runs", type_=sa.BigInteger()),
        total_missed=S.c.total_missed + sa.bindparam("b_missed", type_=sa.BigInteger()),
        total_skipped=S.c.total_skipped + sa.bindparam("b_skipped", type_=sa.BigInteger()),
        version=S.c.version + 1,
        **CLAIM_CLEARS,
    )
)
_SET_ASIDE = (
    sa.update(S)
    .where(S.c.name == sa.bindparam("b_name"))
    .values(fault=sa.bindparam("b_fault", type_=sa.Text()),
            fault_at=sa.bindparam("b_fault_at", type_=UTCDateTime()),
            faults=sa.bindparam("b_faults", type_=sa.Integer()),
            next_run_at=sa.bindparam("b_retry_at", type_=UTCDateTime()),
            version=sa.bindparam("b_version", type_=sa.BigInteger()))
)

# Writing one run decision back (core.runs): the run columns, compare-and-set on those the
# decision was made on, so that a row another writer changed meanwhile is judged again.
_WRITE_RUN = (
    sa.update(E)
    .where(E.c.key == sa.bindparam("b_key"),
           *[E.c[name].is_not_distinct_from(sa.bindparam(f"old_{name}", type_=E.c[name].type))
             for name in CAS_COLUMNS])
    .values({
        **{E.c[name]: sa.bindparam(f"new_{name}", type_=E.c[name].type)
           for name in RUN_COLUMNS},
        # core.runs.settled_after_report: a run nothing waited on turns unsettled as it ends.
        E.c.settled: sa.case((sa.and_(E.c.settled.is_(None),
                                      sa.bindparam("new_run_state", type_=E.c.run_state.type)
                                      .in_(ENDED_STATE_VALUES)), sa.false()),
                             else_=E.c.settled),
    })
)
#: How many times a batch of reports is judged again when other writers keep changing its rows.
_RUN_ROUNDS = 5
#: The run columns, in RUN_COLUMNS order.
_RUN_READ = tuple(E.c[name] for name in RUN_COLUMNS)


class RunChange(NamedTuple):
    """A run decision to write back: the row's key, the run columns as read (``read``: raw
    values of :data:`~goatbeat_celery.core.runs.CAS_COLUMNS`) and as decided."""

    key: str
    read: Mapping[str, Any]
    decided: RunRecord

    def params(self) -> dict[str, Any]:
        """The bound values of :data:`_WRITE_RUN`."""
        values = self.decided
        params: dict[str, Any] = {"b_key": self.key}
        params.update((f"old_{name}", value) for name, value in self.read.items())
        params.update((f"new_{name}", getattr(values, name)) for name in RUN_COLUMNS)
        state = values.run_state
        params["new_run_state"] = None if state is None else state.value
        return params


class _Write:
    """One write transaction; ``announce`` asks for waiting replicas to be woken on commit."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self.announce = False


class SQLStore:
    """ScheduleStore and LeaseManager in one object, on one SQLAlchemy engine.

    ``engine`` runs write transactions; ``read_engine`` runs reads and ``single_engine`` writes
    made of one statement each (both default to ``engine``; a subclass may hand the same pool
    with other options, say autocommit, to save the round trips of BEGIN and COMMIT).
    """

    #: How many strings one ``IN`` test may carry.
    _IN_CHUNK: ClassVar[int] = 500

    def __init__(self, engine: sa.Engine, *, read_engine: sa.Engine | None = None,
                 single_engine: sa.Engine | None = None) -> None:
        self._engine = engine
        self._reader = read_engine or engine
        self._single = single_engine or engine
        self._where = mask_url(engine.url)
        self._closed = False
        self._due_stmts: dict[bool, sa.Select[Any]] = {}

    # -- dialect hooks -------------------------------------------------------------------
    def _now_sql(self) -> sa.ColumnElement[datetime]:
        """The store's clock as an expression, read once for each statement it is used in."""
        raise NotImplementedError

    def _insert(self, table: sa.Table) -> Insert:
        raise NotImplementedError

    def _paused(self) -> sa.ColumnElement[bool]:
        """Rows paused at the store's clock (core.status: disabled, or within a pause with an
        end)."""
        return sa.or_(S.c.enabled.is_(False),
                      sa.and_(S.c.paused_until.is_not(None), S.c.paused_until > self._now_sql()))

    def _in(self, column: sa.ColumnElement[str], values: Sequence[str]) -> sa.ColumnElement[bool]:
        return column.in_(values)

    def _announce_in(self, conn: sa.Connection) -> None:
        """Inside a write transaction that other replicas should hear about."""

    def _announced(self) -> None:
        """After such a transaction committed."""

    # -- plumbing ------------------------------------------------------------------------
    @contextmanager
    def _write(self, what: str) -> Iterator[_Write]:
        with translated(what, self._where):
            with self._engine.begin() as conn:
                txn = _Write(conn)
                yield txn
                if txn.announce:
                    self._announce_in(conn)
            if txn.announce:
                self._announced()

    @contextmanager
    def _write_each(self, what: str) -> Iterator[sa.Connection]:
        """A connection for writes whose statements each stand alone (idempotent ones)."""
        with translated(what, self._where):
            with self._single.begin() as conn:
                yield conn

    @contextmanager
    def _read(self, what: str) -> Iterator[sa.Connection]:
        with translated(what, self._where):
            with self._reader.connect() as conn:
                yield conn

    def _chunks(self, values: Sequence[str]) -> Iterator[Sequence[str]]:
        for start in range(0, len(values), self._IN_CHUNK):
            yield values[start:start + self._IN_CHUNK]

    def _fence(self, conn: sa.Connection, lease: LeaseGrant) -> datetime:
        """Check ``lease`` is the current, unexpired grant, with the lease row share-locked so a
        takeover waits for this transaction; return the store's clock."""
        row = conn.execute(
            sa.select(L.c.holder, L.c.token, L.c.expires_at, self._now_sql().label("now"))
            .where(L.c.name == lease.name)
            .with_for_update(read=True)
        ).one_or_none()
        return fenced_clock(lease, row)

    # -- clock and waiting ---------------------------------------------------------------
    def now(self) -> datetime:
        with self._read("read the clock") as conn:
            now: datetime = conn.execute(sa.select(self._now_sql())).scalar_one()
            return now

    def wait(self, timeout: float) -> bool:
        raise NotImplementedError

    def notify(self) -> None:
        raise NotImplementedError

    # -- lease ---------------------------------------------------------------------------
    def acquire(self, name: str, holder: str, ttl: timedelta) -> LeaseGrant | None:
        with self._write("acquire lease") as txn:
            conn = txn.conn
            # A placeholder row (no holder, token 0) makes the first grant token 1 and gives
            # the row lock below something to lock.
            conn.execute(
                self._insert(L).values(name=name, holder=None, token=0)
                .on_conflict_do_nothing(index_elements=[L.c.name])
            )
            row = conn.execute(
                sa.select(L, self._now_sql().label("now")).where(L.c.name == name)
                .with_for_update()
            ).one()
            write = grant_lease(name, holder, ttl, row=row, now=row.now)
            if write is None:
                return None
            grant = write.grant
            conn.execute(
                sa.update(L).where(L.c.name == name).values(
                    holder=holder, token=grant.token, expires_at=grant.expires_at,
                    acquired_at=write.acquired_at,
                )
            )
        return grant

    def release(self, grant: LeaseGrant) -> bool:
        with self._write("release lease") as txn:
            result = txn.conn.execute(
                sa.update(L)
                .where(L.c.name == grant.name, L.c.holder == grant.holder,
                       L.c.token == grant.token)
                .values(holder=None, expires_at=None)
            )
            released = result.rowcount == 1
            txn.announce = released
        return released

    def list_leases(self, prefix: str) -> list[LeaseInfo]:
        with self._read("list leases") as conn:
            rows = conn.execute(
                sa.select(L, self._now_sql().label("now"))
                .where(L.c.name.startswith(prefix, autoescape=True)).order_by(L.c.name)
            ).all()
        return [LeaseInfo(name=row.name, holder=row.holder, token=row.token,
                          acquired_at=row.acquired_at, expires_at=row.expires_at,
                          store_now=row.now) for row in rows]

    def forget(self, name: str) -> bool:
        with self._write("forget lease") as txn:
            result = txn.conn.execute(
                # core.model.lease_live in the database's clock: a lease no one holds.
                sa.delete(L).where(L.c.name == name, sa.or_(
                    L.c.holder.is_(None), L.c.expires_at.is_(None),
                    L.c.expires_at <= self._now_sql())))
            return result.rowcount == 1

    def inspect(self, name: str) -> LeaseInfo | None:
        with self._read("inspect lease") as conn:
            row = conn.execute(
                sa.select(L, self._now_sql().label("now")).where(L.c.name == name)
            ).one_or_none()
        if row is None:
            return None
        return LeaseInfo(name=row.name, holder=row.holder, token=row.token,
                         acquired_at=row.acquired_at, expires_at=row.expires_at,
                         store_now=row.now)

    # -- schedules -----------------------------------------------------------------------
    def create_schedule(self, spec: ScheduleSpec, *, next_occurrence_at: datetime | None,
                        next_run_at: datetime | None) -> Schedule:
        check_aware(next_occurrence_at, next_run_at)
        values = _spec_values(spec)
        with self._write("create schedule") as txn:
            now = self._now_sql()
            row = txn.conn.execute(
                self._insert(S).values(
                    **values, next_occurrence_at=next_occurrence_at, next_run_at=next_run_at,
                    last_occurrence_at=None, total_runs=0, total_missed=0, version=1,
                    created_at=now, updated_at=now,
                )
                .on_conflict_do_nothing(index_elements=[S.c.name])
                .returning(*S.c)
            ).one_or_none()
            if row is None:
                raise ScheduleConflict(f"a schedule named {spec.name!r} already exists")
            txn.announce = True
        return _schedule(row)

    def replace_schedule(self, spec: ScheduleSpec, *, next_occurrence_at: datetime | None,
                         next_run_at: datetime | None, expected_version: int | None = None,
                         pause: PauseNote | None = None) -> Schedule:
        check_aware(next_occurrence_at, next_run_at)
        paused = {} if pause is None else {"paused_reason": pause.reason,
                                           "paused_until": pause.until}
        values = _spec_values(spec)
        del values["name"], values["source"]  # the row's source is kept
        with self._write("replace schedule") as txn:
            conn = txn.conn
            stmt = sa.update(S).where(S.c.name == spec.name)
            if expected_version is not None:
                stmt = stmt.where(S.c.version == expected_version)
            row = conn.execute(
                stmt.values(**values, next_occurrence_at=next_occurrence_at,
                            next_run_at=next_run_at, version=S.c.version + 1,
                            spec_version=_spec_version_after(values["spec_hash"]),
                            updated_at=self._now_sql(), **EDIT_CLEARS,
                            **{**(RESUME_CLEARS if spec.enabled else {}), **paused})
                .returning(*S.c)
            ).one_or_none()
            if row is None:
                version = conn.execute(
                    sa.select(S.c.version).where(S.c.name == spec.name)
                ).scalar_one_or_none()
                if version is None:
                    raise ScheduleNotFound(spec.name)
                raise ScheduleConflict(
                    f"schedule {spec.name!r} is at version {version}, "
                    f"not {expected_version}: reload it and retry"
                )
            txn.announce = True
        return _schedule(row)

    def delete_schedule(self, name: str) -> None:
        with self._write("delete schedule") as txn:
            result = txn.conn.execute(sa.delete(S).where(S.c.name == name))
            if result.rowcount == 0:
                raise ScheduleNotFound(name)
            txn.announce = True

    def get_schedule(self, name: str) -> Schedule:
        with self._read("read schedule") as conn:
            row = conn.execute(sa.select(S).where(S.c.name == name)).one_or_none()
        if row is None:
            raise ScheduleNotFound(name)
        return _schedule(row)

    def list_schedules(self, *, paused: bool | None = None,
                       source: ScheduleSource | None = None, prefix: str | None = None,
                       limit: int | None = None, set_aside: bool | None = None,
                       after: str | RunOrderCursor | None = None,
                       order: ScheduleOrder = ScheduleOrder.NAME,
                       tags: Sequence[str] = ()) -> list[Schedule]:
        if list_order(order, after) is ScheduleOrder.NEXT_RUN:
            # NULLS LAST is PostgreSQL's default for an ascending index, so the due index
            # (next_run_at, name) serves this order when only enabled rows are asked for.
            stmt = sa.select(S).order_by(S.c.next_run_at.asc().nulls_last(), S.c.name)
            if isinstance(after, RunOrderCursor):
                stmt = stmt.where(_after_in_run_order(after))
        else:
            stmt = sa.select(S).order_by(S.c.name)
            if isinstance(after, str):
                stmt = stmt.where(S.c.name > after)
        if paused is not None:
            pausing = self._paused()
            stmt = stmt.where(pausing if paused else sa.not_(pausing))
        if tags:
            stmt = stmt.where(_carrying(tags))
        if set_aside is not None:
            stmt = stmt.where(S.c.fault.is_not(None) if set_aside else S.c.fault.is_(None))
        if source is not None:
            stmt = stmt.where(S.c.source == ScheduleSource(source).value)
        if prefix:
            # substr, not LIKE: LIKE ignores case on SQLite and needs escaping. The range beside
            # it lets the primary key find the rows (names sort by code point on every backend).
            stmt = stmt.where(sa.func.substr(S.c.name, 1, len(prefix)) == prefix,
                              S.c.name >= prefix)
            if ord(prefix[-1]) < 0x10FFFF:
                stmt = stmt.where(S.c.name < prefix[:-1] + chr(ord(prefix[-1]) + 1))
        if limit is not None:
            stmt = stmt.limit(limit)
        with self._read("list schedules") as conn:
            return [_schedule(row) for row in conn.execute(stmt)]

    # -- exclusion calendars -------------------------------------------------------------
    def create_calendar(self, calendar: Calendar) -> Calendar:
        with self._write("create calendar") as txn:
            now = self._now_sql()
            row = txn.conn.execute(
                self._insert(C).values(name=calendar.name, description=calendar.description,
                                       entries=calendar.entries(), version=1,
                                       created_at=now, updated_at=now)
                .on_conflict_do_nothing(index_elements=[C.c.name])
                .returning(*C.c)
            ).one_or_none()
            if row is None:
                raise ScheduleConflict(f"a calendar named {calendar.name!r} already exists")
            txn.announce = True
        return _calendar(row)

    def replace_calendar(self, calendar: Calendar, *,
                         expected_version: int | None = None) -> Calendar:
        with self._write("replace calendar") as txn:
            conn = txn.conn
            stmt = sa.update(C).where(C.c.name == calendar.name)
            if expected_version is not None:
                stmt = stmt.where(C.c.version == expected_version)
            row = conn.execute(
                stmt.values(description=calendar.description, entries=calendar.entries(),
                            version=C.c.version + 1, updated_at=self._now_sql())
                .returning(*C.c)
            ).one_or_none()
            if row is None:
                version = conn.execute(
                    sa.select(C.c.version).where(C.c.name == calendar.name)
                ).scalar_one_or_none()
                if version is None:
                    raise CalendarNotFound(calendar.name)
                raise ScheduleConflict(f"calendar {calendar.name!r} is at version {version}, "
                                       f"not {expected_version}: reload it and retry")
            txn.announce = True
        return _calendar(row)

    def delete_calendar(self, name: str) -> None:
        with self._write("delete calendar") as txn:
            conn = txn.conn
            # Locked first, so that the schedules read next are those observing it when it
            # goes: an edit adding it after this read finds it gone (the API refuses it).
            found = conn.execute(
                sa.select(C.c.name).where(C.c.name == name).with_for_update()
            ).scalar_one_or_none()
            if found is None:
                raise CalendarNotFound(name)
            users = _observing(conn, name)
            if users:
                raise CalendarInUse(name, users)
            conn.execute(sa.delete(C).where(C.c.name == name))

    def schedules_observing(self, name: str) -> list[str]:
        with self._read("list the schedules observing a calendar") as conn:
            return _observing(conn, name)

    def get_calendar(self, name: str) -> Calendar:
        with self._read("read calendar") as conn:
            row = conn.execute(sa.select(C).where(C.c.name == name)).one_or_none()
        if row is None:
            raise CalendarNotFound(name)
        return _calendar(row)

    def list_calendars(self) -> list[Calendar]:
        with self._read("list calendars") as conn:
            return [_calendar(row) for row in conn.execute(sa.select(C).order_by(C.c.name))]

    def find_calendars(self, names: Collection[str]) -> dict[str, Calendar]:
        if not names:
            return {}
        with self._read("read calendars") as conn:
            rows = conn.execute(sa.select(C).where(C.c.name.in_(sorted(names))))
            return {row.name: _calendar(row) for row in rows}

    def count_schedules(self) -> ScheduleCounts:
        def count(condition: sa.ColumnElement[bool]) -> sa.ColumnElement[int]:
            return sa.func.coalesce(sa.func.sum(sa.case((condition, 1), else_=0)), 0)

        stmt = sa.select(
            sa.func.count(), count(self._paused()), count(S.c.fault.is_not(None)),
            count(S.c.source == ScheduleSource.CONFIG.value),
            count(S.c.source == ScheduleSource.API.value))
        with self._read("count schedules") as conn:
            total, paused, set_aside, config, api = conn.execute(stmt).one()
        return ScheduleCounts(total=total, paused=paused, set_aside=set_aside, config=config,
                              api=api)

    def sync_config(self, entries: Sequence[SyncEntry], *, lease: LeaseGrant) -> SyncReport:
        for entry in entries:
            check_aware(entry.next_occurrence_at, entry.next_run_at)
            _spec_values(entry.spec)  # refuse what cannot be stored before changing anything
        names = list(dict.fromkeys(e.spec.name for e in entries))
        with self._write("sync config") as txn:
            conn = txn.conn
            now = self._fence(conn, lease)
            rows = list(conn.execute(
                sa.select(S).where(S.c.source == ScheduleSource.CONFIG.value)
                .with_for_update()
            ))
            for chunk in self._chunks(names):
                rows.extend(conn.execute(
                    sa.select(S).where(self._in(S.c.name, chunk)).with_for_update()
                ))
            existing = {schedule.name: _summary(schedule)
                        for schedule in map(_schedule, rows)}
            plan = plan_config_sync(existing, entries)
            created = self._sync_insert(conn, plan.insert, now)
            for enabled in (True, False):
                rewrite = [e for e in plan.rewrite if e.spec.enabled is enabled]
                if not rewrite:
                    continue
                conn.execute(
                    sa.update(S).where(S.c.name == sa.bindparam("b_name")).values(
                        version=S.c.version + 1,
                        spec_version=_spec_version_after(sa.bindparam("b_spec_hash")),
                        updated_at=now, **EDIT_CLEARS, **(RESUME_CLEARS if enabled else {})),
                    [{**_spec_values(replace(e.spec, source=ScheduleSource.CONFIG),
                                     key="b_name"),
                      "b_spec_hash": e.spec.spec_hash(),
                      "next_occurrence_at": e.next_occurrence_at,
                      "next_run_at": e.next_run_at} for e in rewrite],
                )
            for chunk in self._chunks(plan.disable):
                conn.execute(
                    sa.update(S).where(self._in(S.c.name, chunk))
                    .values(enabled=False, version=S.c.version + 1, updated_at=now)
                )
        report = plan.report
        if len(created) != len(report.created):
            # Created through the API between our read and our insert: left alone.
            lost = tuple(n for n in report.created if n not in created)
            report = replace(report, created=tuple(n for n in report.created if n in created),
                             conflicts=report.conflicts + lost)
        return report

    def _sync_insert(self, conn: sa.Connection, entries: Sequence[SyncEntry],
                     now: datetime) -> set[str]:
        if not entries:
            return set()
        rows = [
            {**_spec_values(replace(e.spec, source=ScheduleSource.CONFIG)),
             "next_occurrence_at": e.next_occurrence_at, "next_run_at": e.next_run_at,
             "last_occurrence_at": None, "total_runs": 0, "total_missed": 0, "version": 1,
             "created_at": now, "updated_at": now}
            for e in entries
        ]
        stmt = (self._insert(S).on_conflict_do_nothing(index_elements=[S.c.name])
                .returning(S.c.name))
        return set(conn.execute(stmt, rows).scalars())

    # -- claiming ------------------------------------------------------------------------
    def _due_statement(self, sharded: bool = False) -> sa.Select[Any]:
        """Built once each way: the clock expression is constant; the limit, and a shard's
        index and count, are parameters."""
        stmt = self._due_stmts.get(sharded)
        if stmt is None:
            stmt = self._due_stmts[sharded] = self._build_due(sharded)
        return stmt

    def _build_due(self, sharded: bool) -> sa.Select[Any]:
        now = self._now_sql()
        enabled: sa.ColumnElement[bool] | sa.TextClause = _IS_ENABLED
        if sharded:
            enabled = sa.and_(enabled, _IN_SHARD)
        due = (
            sa.select(S)
            .where(enabled, S.c.next_run_at <= now)
            .order_by(S.c.next_run_at, S.c.name)
            .limit(sa.bindparam("due_limit", type_=sa.Integer()))
            .subquery("due")
        )
        earliest = (sa.select(sa.func.min(S.c.next_run_at)).where(enabled)
                    .scalar_subquery())
        head = sa.select(now.label("store_now"), earliest.label("next_due")).subquery("head")
        # One round trip: the head row always comes back, joined to the due rows if any.
        return (
            sa.select(head, due)
            .select_from(head.outerjoin(due, sa.true()))
            .order_by(due.c.next_run_at, due.c.name)
        )

    def due_schedules(self, limit: int, *, shard: Shard | None = None) -> DueBatch:
        with self._read("read due schedules") as conn:
            rows = self._fetch_due(conn, limit, shard)
        store_now, next_due = rows[0][0], rows[0][1]
        schedules = tuple(_schedule(row[2:]) for row in rows if row[2] is not None)
        return DueBatch(now=store_now, schedules=schedules, next_due_at=next_due)

    def _fetch_due(self, conn: sa.Connection, limit: int,
                   shard: Shard | None = None) -> Sequence[Sequence[Any]]:
        """Rows of the due statement, converted: the clock, the earliest due instant, then the
        schedule's columns in table order."""
        return conn.execute(self._due_statement(shard is not None),
                            due_params(limit, shard)).all()

    def waiting(self) -> Waiting:
        with self._read("look for waiting work") as conn:
            row = conn.execute(self._waiting_statement()).one()
        return waiting_from_row(row)

    def _waiting_statement(self) -> sa.Select[Any]:
        """The one statement of :meth:`waiting`; each part through its partial index."""
        def some(table: sa.Table, *where: sa.ColumnElement[bool] | sa.TextClause
                 ) -> sa.Exists:
            return sa.select(sa.literal_column("1")).select_from(table).where(*where).exists()

        return sa.select(
            self._now_sql(),
            sa.select(sa.func.min(S.c.next_run_at)).where(_IS_ENABLED).scalar_subquery(),
            some(E, _IS_UNSETTLED),
            some(E, _IS_CLAIMED),
            # core.runs.may_be_lost
            sa.or_(some(E, _IS_RUNNING), some(E, _IS_UNSTARTED)),
        )

    def claim(self, claims: Sequence[PlannedClaim], *, lease: LeaseGrant) -> ClaimResult:
        for claim in claims:
            check_aware(claim.next_occurrence_at, claim.next_run_at)
            for occurrence, due in claim.occurrences:
                check_aware(occurrence, due)
        with self._write("claim") as txn:
            conn = txn.conn
            names = list(dict.fromkeys(c.schedule_name for c in claims))
            now, rows = self._lock_for_claim(conn, lease, names)
            if not claims:
                return ClaimResult(dispatches=())
            locked = self._locked_elsewhere(conn, [n for n in names if n not in rows])
            return self._apply_claims(conn, claims, rows, locked, lease.token, now)

    def _lock_for_claim(self, conn: sa.Connection, lease: LeaseGrant,
                        names: Sequence[str]) -> tuple[datetime, dict[str, Any]]:
        """Check the fence, then lock the rows of ``names`` that no other transaction holds
        (``FOR UPDATE SKIP LOCKED``); returns the store's clock and the rows by name, each with
        the :data:`_CLAIM_COLUMNS`."""
        now = self._fence(conn, lease)
        rows: dict[str, Any] = {}
        for chunk in self._chunks(names):
            for row in conn.execute(
                sa.select(*_CLAIM_COLUMNS).where(self._in(S.c.name, chunk))
                .with_for_update(skip_locked=True)
            ):
                rows[row.name] = row
        return now, rows

    def _locked_elsewhere(self, conn: sa.Connection, missing: Sequence[str]) -> set[str]:
        """Of the schedules a locking read skipped, those that exist (locked by another
        transaction, left for a later batch) rather than deleted."""
        found: set[str] = set()
        for chunk in self._chunks(missing):
            found.update(conn.execute(
                sa.select(S.c.name).where(self._in(S.c.name, chunk))
            ).scalars())
        return found

    def _apply_claims(self, conn: sa.Connection, claims: Sequence[PlannedClaim],
                      rows: dict[str, Any], locked: set[str], token: int,
                      now: datetime) -> ClaimResult:
        flights = self._in_flight(conn, [c.schedule_name for c in claims
                                         if c.waits_for_runs and c.schedule_name in rows])
        plan = plan_claims(claims, {name: row.version for name, row in rows.items()},
                           token=token, now=now, skip=locked, in_flight=flights,
                           runs={name: row.total_runs for name, row in rows.items()})
        inserted = self._record_claims(conn, plan)
        return plan.result(inserted, lambda e: _dispatch(e, rows[e.schedule_name]))

    def _record_claims(self, conn: sa.Connection, plan: ClaimPlan) -> set[str]:
        """Insert the plan's executions where their key is new, and advance its schedules
        (compare-and-set on the version) by :meth:`ClaimPlan.counted`. Returns the keys
        inserted."""
        inserted = self._insert_executions(conn, plan.executions)
        advances = plan.counted(inserted)
        if advances:
            conn.execute(_ADVANCE_ONE, [
                {"b_name": a.name, "b_version": a.version,
                 "b_next_occurrence": a.next_occurrence_at, "b_next_run": a.next_run_at,
                 "b_last_occurrence": a.last_occurrence_at,
                 "b_runs": a.runs, "b_missed": a.missed, "b_skipped": a.skipped}
                for a in advances
            ])
        return inserted

    def _insert_executions(self, conn: sa.Connection,
                           executions: Sequence[Execution]) -> set[str]:
        """Insert what is new; returns the keys inserted (an existing key inserts nothing)."""
        if not executions:
            return set()
        stmt = (self._insert(E).on_conflict_do_nothing(index_elements=[E.c.key])
                .returning(E.c.key))
        return set(conn.execute(stmt, [execution_values(e) for e in executions]).scalars())

    def set_aside(self, entries: Sequence[SetAside], *,
                  lease: LeaseGrant) -> dict[str, datetime]:
        if not entries:
            return {}
        for entry in entries:
            check_aware(entry.retry_at)
        changed: dict[str, datetime] = {}
        with self._write("set schedules aside") as txn:
            conn = txn.conn
            now = self._fence(conn, lease)
            for entry in entries:
                row = conn.execute(
                    sa.select(S.c.faults, S.c.fault_at, S.c.next_run_at, S.c.version)
                    .where(S.c.name == entry.schedule_name).with_for_update()
                ).one_or_none()
                if row is None:
                    continue
                write = plan_set_aside(entry, version=row.version, faults=row.faults,
                                       fault_at=_instant(row.fault_at),
                                       next_run_at=_instant(row.next_run_at), now=now)
                if write is None:
                    continue
                conn.execute(_SET_ASIDE, {
                    "b_name": write.name, "b_fault": write.fault, "b_fault_at": write.fault_at,
                    "b_retry_at": write.next_run_at, "b_faults": write.faults,
                    "b_version": write.version})
                changed[write.name] = write.next_run_at
        return changed

    def take_pending(self, *, lease: LeaseGrant, limit: int,
                     shard: Shard | None = None) -> list[Dispatch]:
        taken: list[Dispatch] = []
        where: sa.ColumnElement[bool] | sa.TextClause = _IS_CLAIMED
        params: dict[str, int] = {}
        if shard is not None:
            where = sa.and_(where, _shard_rows(shard))
            params = {"shard_count": shard.count, "shard_index": shard.index}
        with self._write("take pending executions") as txn:
            conn = txn.conn
            self._fence(conn, lease)
            while len(taken) < limit:
                want = limit - len(taken)
                rows = conn.execute(
                    sa.select(E, S.c.name.label("s_name"), S.c.task, S.c.args, S.c.kwargs,
                              S.c.options)
                    .select_from(E.outerjoin(S, S.c.name == E.c.schedule_name))
                    .where(where)
                    .order_by(E.c.claimed_at, E.c.key)
                    .limit(want)
                    .with_for_update(skip_locked=True, of=E),
                    params,
                ).all()
                orphans = [row.key for row in rows if row.s_name is None]
                live = [row for row in rows if row.s_name is not None]
                for chunk in self._chunks(orphans):
                    conn.execute(sa.update(E).where(self._in(E.c.key, chunk))
                                 .values(state=ExecutionState.ABANDONED.value))
                for chunk in self._chunks([row.key for row in live]):
                    conn.execute(sa.update(E).where(self._in(E.c.key, chunk))
                                 # next_attempt, in SQL
                                 .values(attempts=sa.case((E.c.attempts < ATTEMPTS_MAX,
                                                           E.c.attempts + 1),
                                                          else_=E.c.attempts),
                                         token=lease.token))
                for row in live:
                    execution = replace(_execution(row), attempts=next_attempt(row.attempts),
                                        token=lease.token)
                    taken.append(_dispatch(execution, row))
                if not orphans or len(rows) < want:
                    break
        return taken

    def mark_submitted(self, keys: Sequence[str]) -> int:
        keys = list(dict.fromkeys(keys))
        if not keys:
            return 0
        changed = 0
        with self._write_each("mark submitted") as conn:
            now = self._now_sql()
            for chunk in self._chunks(keys):
                result = conn.execute(
                    sa.update(E).where(self._in(E.c.key, chunk), _STILL_CLAIMED)
                    .values(state=ExecutionState.SUBMITTED.value, submitted_at=now)
                )
                changed += result.rowcount
        return changed

    def mark_expired(self, keys: Sequence[str]) -> int:
        keys = list(dict.fromkeys(keys))
        changed = 0
        with self._write_each("mark expired") as conn:
            for chunk in self._chunks(keys):
                changed += conn.execute(
                    sa.update(E).where(self._in(E.c.key, chunk), _STILL_CLAIMED)
                    .values(state=ExecutionState.EXPIRED.value)
                ).rowcount
        return changed

    def record_failures(self, failures: Mapping[str, str], *,
                        abandon: Collection[str] = ()) -> None:
        if not failures:
            return
        given_up = set(abandon)
        by_error: dict[tuple[str, bool], list[str]] = {}
        for key, error in failures.items():
            by_error.setdefault((reason_text(error), key in given_up), []).append(key)
        with self._write_each("record failures") as conn:
            for (error, gone), keys in by_error.items():
                values: dict[str, Any] = {"last_error": error}
                if gone:
                    values["state"] = ExecutionState.ABANDONED.value
                for chunk in self._chunks(keys):
                    conn.execute(sa.update(E).where(self._in(E.c.key, chunk), _STILL_CLAIMED)
                                 .values(**values))

    def request_run(self, name: str) -> Execution:
        with self._write("request run") as txn:
            conn = txn.conn
            exists = sa.select(S.c.name).where(S.c.name == name).scalar_subquery()
            row = conn.execute(sa.select(self._now_sql().label("now"),
                                         exists.label("found"))).one()
            if row.found is None:
                raise ScheduleNotFound(name)
            execution = manual_execution(name, row.now)
            if not self._insert_executions(conn, [execution]):
                raise manual_run_exists(execution)
            txn.announce = True
        return execution

    def oldest_pending(self) -> Execution | None:
        stmt = sa.select(E).where(_IS_CLAIMED).order_by(E.c.due_at, E.c.key).limit(1)
        with self._read("read the oldest pending execution") as conn:
            row = conn.execute(stmt).one_or_none()
        return None if row is None else _execution(row)

    # -- backfills -----------------------------------------------------------------------
    def create_backfill(self, request: BackfillRequest) -> Backfill:
        check_aware(request.start, request.end)
        with self._write("create backfill") as txn:
            conn = txn.conn
            found = conn.execute(sa.select(S.c.name).where(
                S.c.name == request.schedule_name)).one_or_none()
            if found is None:
                raise ScheduleNotFound(request.schedule_name)
            row = conn.execute(
                sa.insert(B).values(
                    schedule_name=request.schedule_name, start_at=request.start,
                    end_at=request.end, mode=request.mode.value,
                    newest_first=request.newest_first, per_tick=request.per_tick,
                    total=request.total, examined=0, claimed=0, cursor_at=None,
                    state=BackfillState.ACTIVE.value, created_at=self._now_sql())
                .returning(*B.c)
            ).one()
            txn.announce = True
        return _backfill(row)

    def get_backfill(self, backfill_id: int) -> Backfill:
        with self._read("read backfill") as conn:
            row = conn.execute(sa.select(B).where(B.c.id == backfill_id)).one_or_none()
        if row is None:
            raise BackfillNotFound(backfill_id)
        return _backfill(row)

    def list_backfills(self, *, schedule_name: str | None = None,
                       active: bool | None = None, limit: int = 100) -> list[Backfill]:
        stmt = sa.select(B).order_by(B.c.id.desc()).limit(limit)
        if schedule_name is not None:
            stmt = stmt.where(B.c.schedule_name == schedule_name)
        if active is not None:
            stmt = stmt.where(_ACTIVE_BACKFILL if active else sa.not_(_ACTIVE_BACKFILL))
        with self._read("list backfills") as conn:
            return [_backfill(row) for row in conn.execute(stmt)]

    def active_backfills(self, limit: int, *, shard: Shard | None = None) -> list[Backfill]:
        stmt = sa.select(B).where(_ACTIVE_BACKFILL).order_by(B.c.id).limit(limit)
        params: dict[str, int] = {}
        if shard is not None:
            stmt = stmt.select_from(B.outerjoin(S, S.c.name == B.c.schedule_name)).where(
                _shard_rows(shard))
            params = {"shard_count": shard.count, "shard_index": shard.index}
        with self._read("read the active backfills") as conn:
            return [_backfill(row) for row in conn.execute(stmt, params)]

    def cancel_backfill(self, backfill_id: int) -> Backfill:
        with self._write("cancel backfill") as txn:
            row = txn.conn.execute(
                sa.update(B).where(B.c.id == backfill_id, _ACTIVE_BACKFILL)
                .values(state=BackfillState.CANCELLED.value, finished_at=self._now_sql())
                .returning(*B.c)
            ).one_or_none()
        return self.get_backfill(backfill_id) if row is None else _backfill(row)

    def executions_by_key(self, keys: Sequence[str]) -> dict[str, Execution]:
        found: dict[str, Execution] = {}
        with self._read("read executions") as conn:
            for chunk in self._chunks(list(dict.fromkeys(keys))):
                for row in conn.execute(sa.select(E).where(self._in(E.c.key, chunk))):
                    found[row.key] = _execution(row)
        return found

    def occurrence_executions(self, schedule_name: str, start: datetime,
                              end: datetime) -> list[Execution]:
        check_aware(start, end)
        stmt = (sa.select(E).where(E.c.schedule_name == schedule_name,
                                   E.c.occurrence_at >= start, E.c.occurrence_at <= end)
                .order_by(E.c.occurrence_at, E.c.key))
        with self._read("read the executions of occurrences") as conn:
            return [_execution(row) for row in conn.execute(stmt)]

    def claim_backfill(self, step: BackfillStep, *, lease: LeaseGrant) -> ClaimResult:
        with self._write("claim backfill") as txn:
            conn = txn.conn
            now = self._fence(conn, lease)
            row = conn.execute(
                sa.select(B).where(B.c.id == step.backfill_id, _ACTIVE_BACKFILL,
                                   B.c.examined == step.examined_before)
                .with_for_update()
            ).one_or_none()
            schedule = conn.execute(
                sa.select(S.c.name, S.c.task, S.c.args, S.c.kwargs, S.c.options)
                .where(S.c.name == step.schedule_name)
            ).one_or_none()
            if row is None or schedule is None:
                return ClaimResult(dispatches=())
            backfill = _backfill(row)
            if backfill.damage:
                return ClaimResult(dispatches=())
            planned = step_executions(step, token=lease.token, now=now)
            inserted = self._insert_executions(conn, planned)
            progress = progress_after(backfill, step, len(inserted), now)
            conn.execute(sa.update(B).where(B.c.id == backfill.id).values(
                examined=progress.examined, claimed=progress.claimed,
                cursor_at=progress.cursor, state=progress.state.value,
                finished_at=progress.finished_at))
        return ClaimResult(
            dispatches=tuple(_dispatch(e, schedule) for e in planned if e.key in inserted),
            duplicates=len(planned) - len(inserted))

    def fail_backfill(self, backfill_id: int, reason: str, *, lease: LeaseGrant) -> bool:
        with self._write("set a backfill aside") as txn:
            conn = txn.conn
            self._fence(conn, lease)
            changed = conn.execute(
                sa.update(B).where(B.c.id == backfill_id, _ACTIVE_BACKFILL)
                .values(state=BackfillState.FAILED.value, error=reason_text(reason),
                        finished_at=self._now_sql())
            ).rowcount
        return bool(changed)

    # -- history -------------------------------------------------------------------------
    def executions(self, *, schedule_name: str | None = None,
                   limit: int = 50) -> list[Execution]:
        stmt = sa.select(E).order_by(E.c.occurrence_at.desc(), E.c.key.desc()).limit(limit)
        if schedule_name is not None:
            stmt = stmt.where(E.c.schedule_name == schedule_name)
        with self._read("read executions") as conn:
            return [_execution(row) for row in conn.execute(stmt)]

    def prune(self, *, before: datetime, limit: int) -> int:
        before = ensure_aware(before, "before")
        oldest = (sa.select(E.c.key).where(_PRUNABLE, E.c.claimed_at < before)
                  .order_by(E.c.claimed_at).limit(limit))
        finished = (sa.select(B.c.id).where(sa.not_(_ACTIVE_BACKFILL), B.c.finished_at < before)
                    .order_by(B.c.finished_at).limit(limit))
        with self._write("prune executions") as txn:
            result = txn.conn.execute(sa.delete(E).where(E.c.key.in_(oldest.scalar_subquery())))
            backfills = txn.conn.execute(
                sa.delete(B).where(B.c.id.in_(finished.scalar_subquery())))
            return result.rowcount + backfills.rowcount

    # -- run policies ----------------------------------------------------------------------
    def _in_flight(self, conn: sa.Connection, names: Sequence[str]) -> dict[str, InFlight]:
        """The runs in flight of the schedules ``names`` (core.claims.in_flight decides which),
        read through their partial index."""
        rows: dict[str, list[tuple[str, str, str | None]]] = {name: [] for name in names}
        for chunk in self._chunks(sorted(rows)):
            for row in conn.execute(
                sa.select(E.c.schedule_name, E.c.key, E.c.state, E.c.run_state)
                .where(self._in(E.c.schedule_name, chunk), _IS_IN_FLIGHT)
                .order_by(E.c.claimed_at, E.c.key)
            ):
                rows[row.schedule_name].append((row.key, row.state, row.run_state))
        return {name: in_flight(found) for name, found in rows.items()}

    def finished_runs(self, limit: int) -> list[FinishedRun]:
        with self._read("read finished runs") as conn:
            ended = [_execution(row) for row in conn.execute(
                sa.select(E).where(_IS_UNSETTLED, sa.or_(E.c.run_state.in_(_ENDED_RUN_STATES),
                                                         E.c.state.in_(_NEVER_SENT_STATES)))
                .order_by(sa.func.coalesce(E.c.finished_at, E.c.claimed_at), E.c.key)
                .limit(limit))]
            ended = [e for e in ended if execution_end(e) is not None]
            schedules: dict[str, Schedule] = {}
            for chunk in self._chunks(sorted({e.schedule_name for e in ended})):
                for row in conn.execute(sa.select(S).where(self._in(S.c.name, chunk))):
                    schedule = _schedule(row)
                    schedules[schedule.name] = schedule
        return [FinishedRun(execution=e, schedule=schedules.get(e.schedule_name)) for e in ended]

    def settle_runs(self, settlements: Sequence[RunSettlement], *,
                    lease: LeaseGrant) -> SettleReport:
        for settlement in settlements:
            check_aware(settlement.next_occurrence_at, settlement.next_run_at)
        settled: list[str] = []
        paused: list[tuple[str, str]] = []
        with self._write("settle runs") as txn:
            conn = txn.conn
            self._fence(conn, lease)
            unsettled: set[str] = set()
            for chunk in self._chunks(sorted({s.key for s in settlements})):
                unsettled.update(conn.execute(
                    sa.select(E.c.key).where(self._in(E.c.key, chunk), _IS_UNSETTLED)
                    .order_by(E.c.key).with_for_update()).scalars())
            versions: dict[str, Any] = {}
            named = sorted({s.schedule_name for s in settlements
                            if s.version is not None and s.key in unsettled})
            for chunk in self._chunks(named):
                for row in conn.execute(sa.select(S.c.name, S.c.version)
                                        .where(self._in(S.c.name, chunk))
                                        .order_by(S.c.name).with_for_update()):
                    versions[row.name] = row.version
            for settlement in settlements:
                if settlement.key not in unsettled:
                    continue
                if settlement.version is not None:
                    name = settlement.schedule_name
                    if versions.get(name) != settlement.version:
                        continue  # edited meanwhile: judged again on the new version
                    reason = settlement.paused_reason
                    values: dict[str, Any] = {
                        "consecutive_failures": settlement.consecutive_failures,
                        "next_occurrence_at": settlement.next_occurrence_at,
                        "next_run_at": settlement.next_run_at, "version": S.c.version + 1}
                    if reason is not None:
                        values.update(enabled=False, paused_reason=reason)
                        paused.append((name, reason))
                    conn.execute(sa.update(S).where(S.c.name == name).values(**values))
                    versions[name] = settlement.version + 1
                unsettled.discard(settlement.key)
                settled.append(settlement.key)
            for chunk in self._chunks(sorted(settled)):
                conn.execute(sa.update(E).where(self._in(E.c.key, chunk)).values(settled=True))
            flights = self._in_flight(conn, sorted({s.schedule_name for s in settlements}))
            released = sorted(key for flight in flights.values()
                              if (key := held_to_release(flight)) is not None)
            for chunk in self._chunks(released):
                conn.execute(sa.update(E).where(self._in(E.c.key, chunk),
                                                E.c.state == ExecutionState.HELD.value)
                             .values(state=ExecutionState.CLAIMED.value))
        return SettleReport(settled=tuple(settled), paused=tuple(paused),
                            released=tuple(released))

    # -- run tracking ----------------------------------------------------------------------
    def record_runs(self, events: Sequence[RunEvent]) -> int:
        by_key: dict[str, list[RunEvent]] = {}
        for event in events:
            by_key.setdefault(event.key, []).append(event)
        unknown = 0
        pending = sorted(by_key)  # rows are written in key order, as every writer does
        for _ in range(_RUN_ROUNDS):
            if not pending:
                return unknown
            with self._write_each("record runs") as conn:
                now, found = self._read_runs(conn, pending)
                changes: list[RunChange] = []
                for key in pending:
                    row = found.get(key)
                    if row is None or now is None:
                        unknown += len(by_key[key])
                        continue
                    read, record = row
                    decided = apply_events(record, by_key[key], now)
                    if decided != record:
                        changes.append(RunChange(key, read, decided))
                applied = self._write_runs(conn, changes) if changes else set()
            pending = [change.key for change in changes if change.key not in applied]
        if pending:
            raise StoreError(f"record runs: {len(pending)} rows kept changing while their "
                             f"reports were written, on {self._where}")
        return unknown

    def _read_runs(self, conn: sa.Connection, keys: Sequence[str]
                   ) -> tuple[datetime | None, dict[str, tuple[dict[str, Any], RunRecord]]]:
        """The run columns of the executions of ``keys`` that exist (raw, for the
        compare-and-set, and as a RunRecord) and the store's clock as they were read (None
        when none exists)."""
        now: datetime | None = None
        found: dict[str, tuple[dict[str, Any], RunRecord]] = {}
        for chunk in self._chunks(keys):
            rows = conn.execute(
                sa.select(self._now_sql().label("now"), E.c.key, *_RUN_READ)
                .where(self._in(E.c.key, chunk))
            )
            for row in rows:
                now = now or row[0]
                found[row[1]] = run_values(row[2:])
        return now, found

    def _write_runs(self, conn: sa.Connection, changes: Sequence[RunChange]) -> set[str]:
        """Write run decisions, each only where the row still holds what it was decided on;
        returns the keys written."""
        written: set[str] = set()
        for change in changes:
            if conn.execute(_WRITE_RUN, change.params()).rowcount == 1:
                written.add(change.key)
        return written

    def heartbeat(self, keys: Collection[str]) -> int:
        wanted = sorted(set(keys))
        beaten = 0
        if not wanted:
            return 0
        with self._write_each("record heartbeats") as conn:
            now = self._now_sql()
            for chunk in self._chunks(wanted):
                beaten += conn.execute(
                    sa.update(E).where(self._in(E.c.key, chunk),
                                       E.c.run_state == RunState.RUNNING.value)
                    .values(heartbeat_at=now)
                ).rowcount
        return beaten

    def mark_lost(self, *, silent_for: timedelta, unstarted_for: timedelta,
                  tracked_since: datetime | None = None,
                  limit: int = 1000) -> list[Execution]:
        with self._write_each("mark lost runs") as conn:
            now: datetime = conn.execute(sa.select(self._now_sql())).scalar_one()
            # Candidates through the two partial indexes; core.runs.lost_verdict decides.
            quiet_since = now - min(silent_for, unstarted_for)
            rows = [
                *conn.execute(
                    sa.select(E).where(_IS_RUNNING, sa.or_(E.c.heartbeat_at.is_(None),
                                                           E.c.heartbeat_at < quiet_since))
                    .order_by(E.c.heartbeat_at, E.c.key).limit(limit)),
                *conn.execute(
                    sa.select(E).where(_IS_UNSTARTED, E.c.submitted_at < now - unstarted_for)
                    .order_by(E.c.submitted_at, E.c.key).limit(limit)),
            ]
            judged: list[tuple[datetime, Execution, RunChange]] = []
            for row in rows:
                execution = _execution(row)
                record = _run_record(row)
                dispatched = _dispatched_at(execution)
                lost = lost_verdict(record, dispatched_at=dispatched, now=now,
                                    silent_for=silent_for, unstarted_for=unstarted_for,
                                    tracked_since=tracked_since)
                if lost is not None:
                    news = last_news(record, dispatched_at=dispatched) or execution.claimed_at
                    judged.append((news, replace(execution, **lost.values(),
                                                 settled=settled_after_report(
                                                     execution.settled, lost.run_state)),
                                   RunChange(execution.key, _cas_values(row), lost)))
            judged.sort(key=lambda item: (item[0], item[1].key))
            judged = judged[:limit]
            written = self._write_runs(conn, sorted((c for _, _, c in judged),
                                                    key=lambda c: c.key))
        return [execution for _, execution, _ in judged if execution.key in written]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._engine.dispose()


# -- rows ⇄ model -------------------------------------------------------------------------
def waiting_from_row(row: Sequence[Any]) -> Waiting:
    """A row of the waiting statement (SQLStore._waiting_statement) as a Waiting."""
    now, next_due, unsettled, claimed, open_runs = row
    return Waiting(now=now, next_due_at=next_due, unsettled=bool(unsettled),
                   claimed=bool(claimed), open_runs=bool(open_runs))


def _zone_of(trigger: TriggerSpec) -> str | None:
    for key in ("timezone", "tz", "zone"):
        value = trigger.params.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _spec_values(spec: ScheduleSpec, *, key: str = "name") -> dict[str, Any]:
    """Column values of ``spec``; its name under ``key`` (a bound parameter for updates).

    Raises ConfigurationError, before anything is written, for JSON values that would not
    read back unchanged, by the rule the schedules API applies at the door."""
    where = f"schedule {spec.name!r}"
    payloads: dict[str, Any] = {
        "args": list(spec.args), "kwargs": dict(spec.kwargs), "options": dict(spec.options),
        "trigger": spec.trigger.to_json(),
    }
    problems = [problem for label, value in payloads.items()
                for problem in payload_problems(f"{where}: {label}", value)]
    if problems:
        raise ConfigurationError(problems)
    return {
        key: spec.name,
        "task": spec.task,
        **payloads,
        "timezone": _zone_of(spec.trigger),
        "misfire_policy": spec.misfire_policy.value if spec.misfire_policy else None,
        "misfire_grace_seconds": spec.misfire_grace,
        "max_catchup": spec.max_catchup,
        "offset_seconds": spec.offset,
        "jitter_seconds": spec.jitter,
        "starting_deadline_seconds": spec.starting_deadline,
        "overlap": None if spec.overlap is None else spec.overlap.value,
        "mode": None if spec.mode is ScheduleMode.FIXED_RATE else spec.mode.value,
        "failure_backoff_seconds": spec.failure_backoff,
        "failure_backoff_factor": spec.failure_backoff_factor,
        "failure_backoff_max_seconds": spec.failure_backoff_max,
        "pause_after_failures": spec.pause_after_failures,
        "start_at": spec.start_at,
        "end_at": spec.end_at,
        "max_runs": spec.max_runs,
        "description": spec.description,
        # NULL rather than [] for none: rows written before the column existed look the same.
        "tags": list(spec.tags) if spec.tags else None,
        "calendars": list(spec.calendars) if spec.calendars else None,
        "enabled": spec.enabled,
        "source": ScheduleSource(spec.source).value,
        "spec_hash": spec.spec_hash(),
        "shard_hash": shard_hash(spec.name),
    }


_SOURCES = {source.value: source for source in ScheduleSource}
_STATES = {state.value: state for state in ExecutionState}
_SCHEDULE_ORDER = (
    "name", "task", "args", "kwargs", "options", "trigger", "timezone", "misfire_policy",
    "misfire_grace_seconds", "max_catchup", "offset_seconds", "jitter_seconds", "enabled",
    "source", "spec_hash", "next_occurrence_at", "next_run_at", "last_occurrence_at",
    "total_runs", "total_missed", "version", "created_at", "updated_at", "fault", "fault_at",
    "faults", "starting_deadline_seconds", "overlap", "mode", "failure_backoff_seconds",
    "failure_backoff_factor", "failure_backoff_max_seconds", "pause_after_failures",
    "consecutive_failures", "paused_reason", "total_skipped", "start_at", "end_at",
    "max_runs", "paused_until", "description", "tags", "calendars", "shard_hash",
    "spec_version",
)
if tuple(S.c.keys()) != _SCHEDULE_ORDER:  # pragma: no cover - a guard for schema edits
    raise ImportError("goatbeat_schedule columns changed: update _schedule() to match")



def _spec_version_after(spec_hash: Any) -> sa.ColumnElement[int]:
    """The definition's version once a spec hashing to ``spec_hash`` is written: the rule of
    :func:`~goatbeat_celery.core.model.spec_version_after`, on the row being updated (SET
    expressions read the row as it was)."""
    return sa.case((S.c.spec_hash == spec_hash, S.c.spec_version),
                   else_=S.c.spec_version + 1)


def _carrying(tags: Sequence[str]) -> sa.ColumnElement[bool]:
    """The rows carrying every one of ``tags`` (core.controls.has_tags), found through the tag
    index: one lookup of (tag, name) per tag."""
    return sa.and_(*(S.c.name.in_(sa.select(T.c.schedule_name).where(T.c.tag == tag))
                     for tag in dict.fromkeys(tags)))


def _after_in_run_order(cursor: RunOrderCursor) -> sa.ColumnElement[bool]:
    """Rows after ``cursor`` in (next_run_at, name) order, those with no next run last."""
    if cursor.next_run_at is None:
        return sa.and_(S.c.next_run_at.is_(None), S.c.name > cursor.name)
    at = ensure_aware(cursor.next_run_at, "after.next_run_at")
    return sa.or_(S.c.next_run_at > at, sa.and_(S.c.next_run_at == at, S.c.name > cursor.name),
                  S.c.next_run_at.is_(None))


def _schedule(row: Sequence[Any]) -> Schedule:
    """A schedule from a row of :data:`schedule_table`'s columns, in table order.

    Never raises on what the row holds: a column that cannot be read as stored is named in
    ``damage`` and replaced by a harmless stand-in (the engine then sets the row aside)."""
    # Unpacked by position: attribute access by name costs more than building the objects.
    (name, task, args, kwargs, options, trigger, _timezone, misfire_policy, misfire_grace,
     max_catchup, offset, jitter, enabled, source, _spec_hash, next_occurrence_at, next_run_at,
     last_occurrence_at, total_runs, total_missed, version, created_at, updated_at, fault,
     fault_at, faults, deadline, overlap, mode, backoff, backoff_factor, backoff_max,
     pause_after, consecutive_failures, paused_reason, total_skipped, start_at, end_at,
     max_runs, paused_until, description, tags, calendars, _shard_hash, spec_version) = row
    damage: list[str] = []
    # The common case first, by exact type: this runs for every due row.
    if type(args) is list:
        args = tuple(args)
    else:
        damage.append(f"args: expected a JSON array, found {_found(args)}")
        args = ()
    if type(kwargs) is not dict:
        damage.append(f"kwargs: expected a JSON object, found {_found(kwargs)}")
        kwargs = {}
    if type(options) is not dict:
        damage.append(f"options: expected a JSON object, found {_found(options)}")
        options = {}
    if type(trigger) is dict and type(trigger.get("kind")) is str:
        params = dict(trigger)
        kind = params.pop("kind")
    else:
        damage.append(f"trigger: expected a JSON object with a 'kind', found {_found(trigger)}")
        kind, params = "invalid", {}
    policy = (None if misfire_policy is None
              else MisfirePolicy.read(misfire_policy, "misfire_policy", damage))
    durations = []
    for label, value in (("misfire_grace_seconds", misfire_grace), ("offset_seconds", offset),
                         ("jitter_seconds", jitter), ("starting_deadline_seconds", deadline),
                         ("failure_backoff_seconds", backoff),
                         ("failure_backoff_max_seconds", backoff_max)):
        if value is not None and type(value) is not timedelta:
            damage.append(f"{label}: {_found(value)} is not a duration in seconds")
            value = None
        durations.append(value)
    max_catchup = stored_value(max_catchup, int, None, "max_catchup", damage)
    policies = _policies(overlap, mode, backoff_factor, pause_after, damage)
    controls = _controls(start_at, end_at, max_runs, description, tags, damage)
    controls["calendars"] = _calendar_names(calendars, damage)
    kept_source = _SOURCES.get(source)
    if kept_source is None:
        # Fail closed: a row of unknown origin is judged as an API row (the allow-list).
        damage.append(f"source: unknown source {_found(source)}")
        kept_source = ScheduleSource.API
    task = stored_value(task, str, "", "task", damage, required=True, what="a task name")
    version = stored_value(version, int, -1, "version", damage, required=True)
    spec = ScheduleSpec(
        name=name,
        task=task,
        trigger=TriggerSpec(kind=str(kind), params=params),
        args=args,
        kwargs=kwargs,
        options=options,
        misfire_policy=policy,
        misfire_grace=durations[0],
        max_catchup=max_catchup,
        offset=durations[1],
        jitter=durations[2],
        starting_deadline=durations[3],
        failure_backoff=durations[4],
        failure_backoff_max=durations[5],
        **policies,
        **controls,
        enabled=bool(enabled),
        source=kept_source,
    )
    return Schedule(
        spec=spec,
        # An unreadable next occurrence reads as none: the engine starts the schedule again
        # from the store's clock.
        next_occurrence_at=_instant(next_occurrence_at),
        next_run_at=_instant(next_run_at),
        last_occurrence_at=_instant(last_occurrence_at),
        total_runs=total_runs if type(total_runs) is int else 0,
        total_missed=total_missed if type(total_missed) is int else 0,
        version=version,
        spec_version=spec_version if type(spec_version) is int else 1,
        created_at=_instant(created_at),
        updated_at=_instant(updated_at),
        fault=fault if fault is None or type(fault) is str else str(fault),
        fault_at=_instant(fault_at),
        faults=faults if type(faults) is int else 0,
        consecutive_failures=consecutive_failures if type(consecutive_failures) is int else 0,
        paused_reason=(paused_reason if paused_reason is None or type(paused_reason) is str
                       else str(paused_reason)),
        total_skipped=total_skipped if type(total_skipped) is int else 0,
        paused_until=_instant(paused_until),
        damage=tuple(damage),
    )


def _policies(overlap: Any, mode: Any, factor: Any, pause_after: Any,
              damage: list[str]) -> dict[str, Any]:
    """The run-policy fields of a row that are not durations, each unreadable one named in
    ``damage`` and read as the default."""
    found: dict[str, Any] = {"overlap": None, "mode": ScheduleMode.FIXED_RATE}
    if overlap is not None:
        found["overlap"] = OverlapPolicy.read(overlap, "overlap", damage)
    if mode is not None:
        found["mode"] = ScheduleMode.read(mode, "mode", damage) or ScheduleMode.FIXED_RATE
    found["failure_backoff_factor"] = stored_value(factor, float, None,
                                                   "failure_backoff_factor", damage)
    found["pause_after_failures"] = stored_value(pause_after, int, None,
                                                 "pause_after_failures", damage)
    return found


def _controls(start_at: Any, end_at: Any, max_runs: Any, description: Any, tags: Any,
              damage: list[str]) -> dict[str, Any]:
    """The control fields of a row, each unreadable one named in ``damage`` and read as unset
    (the values' own rules, end before start or a negative limit, are the spec's to judge)."""
    found: dict[str, Any] = {"start_at": None, "end_at": None, "tags": ()}
    for label, value in (("start_at", start_at), ("end_at", end_at)):
        if value is UNREADABLE_INSTANT:
            damage.append(f"{label}: the stored instant cannot be read")
        else:
            found[label] = value
    found["max_runs"] = stored_value(max_runs, int, None, "max_runs", damage)
    found["description"] = stored_value(description, str, None, "description", damage)
    if tags is not None:
        if type(tags) is list and all(type(tag) is str for tag in tags):
            found["tags"] = tuple(tags)
        else:
            damage.append(f"tags: expected a JSON array of strings, found {_found(tags)}")
    return found


def _calendar_names(value: Any, damage: list[str]) -> tuple[str, ...]:
    """The calendar names a row observes; an unreadable list is named in ``damage`` (the
    schedule is set aside rather than run on days it should not)."""
    if value is None:
        return ()
    if type(value) is list and all(type(name) is str for name in value):
        return tuple(value)
    damage.append(f"calendars: expected a JSON array of calendar names, found {_found(value)}")
    return ()


def _observing(conn: sa.Connection, name: str) -> list[str]:
    """The schedules observing calendar ``name``: JSON arrays are matched in Python, the same
    way on every backend (rows without calendars are left out by the database)."""
    rows = conn.execute(sa.select(S.c.name, S.c.calendars)
                        .where(S.c.calendars.is_not(None)).order_by(S.c.name))
    return [row.name for row in rows
            if isinstance(row.calendars, list) and name in row.calendars]


def _calendar(row: Any) -> Calendar:
    return calendar_from_row(row._mapping)


def _instant(value: datetime | None) -> datetime | None:
    return None if value is UNREADABLE_INSTANT else value


def _found(value: object) -> str:
    return reason_text(shown_value(value))


def _summary(schedule: Schedule) -> StoredSummary:
    """What config sync compares, judged from the row's content: a row whose spec_hash column
    was kept while its task was changed by hand is a changed row, rewritten from config."""
    spec_hash = "" if schedule.damage else schedule.spec.spec_hash()
    return StoredSummary(spec_hash=spec_hash, enabled=schedule.spec.enabled,
                         source=schedule.spec.source,
                         paused=schedule.paused_reason is not None)


def _dispatch(execution: Execution, row: Any) -> Dispatch:
    """The dispatch of ``execution`` from a row carrying its schedule's task, args, kwargs and
    options. Values of the wrong shape are passed as they are: the submitter refuses such a
    message alone, and the schedule is set aside."""
    args = row.args
    return Dispatch(execution=execution, task=row.task,
                    args=tuple(args) if type(args) is list else args,
                    kwargs=row.kwargs, options=row.options)


_RUN_STATES = {state.value: state for state in RunState}


def run_values(values: Sequence[Any]) -> tuple[dict[str, Any], RunRecord]:
    """The run columns of a row, converted by their column types and in RUN_COLUMNS order:
    the compare-and-set columns as stored, and the RunRecord they read as (a value that cannot
    be read as stored, edited by hand, reads as none)."""
    (state, run_id, worker, attempts, started_at, finished_at, heartbeat_at, runtime,
     error) = values
    # Unpacked by position, as _schedule does: reports are read by the hundred.
    read = {"run_state": state, "run_id": run_id, "run_attempts": attempts,
            "heartbeat_at": heartbeat_at}
    return read, RunRecord(
        run_state=None if state is None else _RUN_STATES.get(state),
        run_id=run_id,
        worker=worker,
        run_attempts=attempts if type(attempts) is int else 0,
        started_at=None if started_at is UNREADABLE_INSTANT else started_at,
        finished_at=None if finished_at is UNREADABLE_INSTANT else finished_at,
        heartbeat_at=None if heartbeat_at is UNREADABLE_INSTANT else heartbeat_at,
        runtime=runtime if type(runtime) is timedelta else None,
        run_error=error,
    )


if tuple(name for name in CAS_COLUMNS) != ("run_state", "run_id", "run_attempts",
                                            "heartbeat_at"):  # pragma: no cover - a guard
    raise ImportError("core.runs.CAS_COLUMNS changed: update run_values() to match")


def _run_record(row: Any) -> RunRecord:
    """The run columns of a whole execution row."""
    return run_values([getattr(row, name) for name in RUN_COLUMNS])[1]


def _cas_values(row: Any) -> dict[str, Any]:
    """The compare-and-set columns of a whole execution row, as stored."""
    return run_values([getattr(row, name) for name in RUN_COLUMNS])[0]


def _dispatched_at(execution: Execution) -> datetime | None:
    """When the broker took the run, for the start timeout (None until it did)."""
    return execution.submitted_at if execution.state is ExecutionState.SUBMITTED else None


def _execution(row: Any) -> Execution:
    state = _STATES.get(row.state)
    last_error = row.last_error
    if state is None:
        last_error = f"unknown state {_found(row.state)} in the database"
        state = ExecutionState.ABANDONED
    return Execution(
        **_run_record(row).values(),
        key=row.key,
        schedule_name=row.schedule_name,
        occurrence_at=row.occurrence_at,
        due_at=row.due_at,
        token=row.token,
        state=state,
        claimed_at=row.claimed_at,
        submitted_at=_instant(row.submitted_at),
        attempts=row.attempts,
        last_error=last_error,
        missed=row.missed,
        manual=bool(row.manual),
        expires_at=_instant(row.expires_at),
        settled=None if row.settled is None else bool(row.settled),
    )


_ACTIVE_BACKFILL = B.c.state == BackfillState.ACTIVE.value
_BACKFILL_STATES = {state.value: state for state in BackfillState}


def _backfill(row: Any) -> Backfill:
    """A backfill row as stored; a column that cannot be read (edited by hand) is named in
    ``damage``, with a harmless stand-in in its place."""
    damage: list[str] = []

    def instant(name: str, value: Any, *, required: bool) -> datetime | None:
        if value is None and not required:
            return None
        if not isinstance(value, datetime) or value is UNREADABLE_INSTANT:
            damage.append(f"{name}: {_found(value)}")
            return UNREADABLE_INSTANT
        return value

    def count(name: str, value: Any, *, required: bool = True) -> int | None:
        if value is None and not required:
            return None
        if type(value) is not int:
            damage.append(f"{name}: {_found(value)}")
            return 0
        return value

    mode = BackfillMode.read(row.mode, "mode", damage)
    state = _BACKFILL_STATES.get(row.state)
    if state is None:
        damage.append(f"state: {_found(row.state)}")
    newest_first = row.newest_first
    if newest_first not in (True, False, 0, 1):
        damage.append(f"newest_first: {_found(newest_first)}")
        newest_first = False
    start = instant("start_at", row.start_at, required=True)
    end = instant("end_at", row.end_at, required=True)
    assert start is not None and end is not None
    return Backfill(
        id=row.id, schedule_name=str(row.schedule_name), start=start, end=end,
        mode=mode or BackfillMode.MISSING, newest_first=bool(newest_first),
        per_tick=count("per_tick", row.per_tick, required=False),
        total=count("total", row.total) or 0, examined=count("examined", row.examined) or 0,
        claimed=count("claimed", row.claimed) or 0,
        cursor=instant("cursor_at", row.cursor_at, required=False),
        state=state or BackfillState.FAILED,
        created_at=instant("created_at", row.created_at, required=False),
        finished_at=instant("finished_at", row.finished_at, required=False),
        error=None if row.error is None else str(row.error), damage=tuple(damage))


#: The execution columns a claim or a manual run writes, each holding the
#: :class:`~goatbeat_celery.core.model.Execution` field of its name (the run columns are the
#: workers').
EXECUTION_COLUMNS = ("key", "schedule_name", "occurrence_at", "due_at", "token", "state",
                     "claimed_at", "submitted_at", "attempts", "last_error", "missed", "manual",
                     "expires_at", "settled")


def execution_values(execution: Execution) -> dict[str, Any]:
    """The row :data:`EXECUTION_COLUMNS` of ``execution``, as written."""
    values = {name: getattr(execution, name) for name in EXECUTION_COLUMNS}
    values["state"] = execution.state.value
    return values


def execution_columns(executions: Sequence[Execution]) -> dict[str, list[Any]]:
    """The values of ``executions`` column by column (:data:`EXECUTION_COLUMNS`), as
    :func:`execution_values` writes them row by row."""
    columns = {name: [getattr(e, name) for e in executions] for name in EXECUTION_COLUMNS}
    columns["state"] = [state.value for state in columns["state"]]
    return columns


__all__ = ["EXECUTION_COLUMNS", "RunChange", "SQLStore", "execution_columns", "execution_values",
           "run_values", "waiting_from_row"]
