"""The schedule rows: create, edit, list and count them; sync them from configuration."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from goatbeat_celery.core.protocols import ScheduleReads, ScheduleWrites
from goatbeat_celery.core.rules.audit import sync_notes
from goatbeat_celery.core.rules.faults import EDIT_CLEARS
from goatbeat_celery.core.rules.settlement import RESUME_CLEARS
from goatbeat_celery.core.rules.status import State
from goatbeat_celery.core.rules.sync import plan_config_sync, stored_summary
from goatbeat_celery.core.types.audit import AuditNote
from goatbeat_celery.core.types.errors import ScheduleConflict, ScheduleNotFound
from goatbeat_celery.core.types.instants import check_aware, ensure_aware
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.listing import (
    RunOrderCursor,
    ScheduleCounts,
    ScheduleOrder,
    list_order,
)
from goatbeat_celery.core.types.schedule import PauseNote, Schedule
from goatbeat_celery.core.types.spec import ScheduleSource, ScheduleSpec, SyncEntry, SyncReport
from goatbeat_celery.store.schema import schedule_table, schedule_tag_table
from goatbeat_celery.store.sql.base import SQLStoreBase, refused_edit
from goatbeat_celery.store.sql.rows import _schedule, _spec_values

S = schedule_table
T = schedule_tag_table


def _spec_version_after(spec_hash: Any) -> sa.ColumnElement[int]:
    """The definition's version once a spec hashing to ``spec_hash`` is written: the rule of
    :func:`~goatbeat_celery.core.types.schedule.version_after`, on the row being updated (SET
    expressions read the row as it was)."""
    return sa.case((S.c.spec_hash == spec_hash, S.c.spec_version),
                   else_=S.c.spec_version + 1)


def _after_in_run_order(cursor: RunOrderCursor) -> sa.ColumnElement[bool]:
    """Rows after ``cursor`` in (next_run_at, name) order, those with no next run last."""
    if cursor.next_run_at is None:
        return sa.and_(S.c.next_run_at.is_(None), S.c.name > cursor.name)
    at = ensure_aware(cursor.next_run_at, "after.next_run_at")
    return sa.or_(S.c.next_run_at > at, sa.and_(S.c.next_run_at == at, S.c.name > cursor.name),
                  S.c.next_run_at.is_(None))


class SQLSchedules(SQLStoreBase, ScheduleReads, ScheduleWrites):
    """Schedules as the API and configuration write and list them."""

    def create_schedule(self, spec: ScheduleSpec, *, next_occurrence_at: datetime | None,
                        next_run_at: datetime | None,
                        audit: AuditNote | None = None) -> Schedule:
        check_aware(next_occurrence_at, next_run_at)
        values = _spec_values(spec)
        with self._write("create schedule") as txn:
            now = self._now_sql()
            rows = self._insert_new(
                txn.conn, S, dict(
                    **values, next_occurrence_at=next_occurrence_at, next_run_at=next_run_at,
                    last_occurrence_at=None, total_runs=0, total_missed=0, version=1,
                    created_at=now, updated_at=now,
                ), conflict=[S.c.name], returning=list(S.c))
            row = rows[0] if rows else None
            if row is None:
                raise ScheduleConflict.taken("schedule", spec.name)
            self._record(txn.conn, [(spec.name, audit)], now)
            txn.announce = True
        return _schedule(row)

    def replace_schedule(self, spec: ScheduleSpec, *, next_occurrence_at: datetime | None,
                         next_run_at: datetime | None, expected_version: int | None = None,
                         pause: PauseNote | None = None,
                         audit: AuditNote | None = None) -> Schedule:
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
            row = self._update_row(
                conn, stmt.values(**values, next_occurrence_at=next_occurrence_at,
                                  next_run_at=next_run_at, version=S.c.version + 1,
                                  spec_version=_spec_version_after(values["spec_hash"]),
                                  updated_at=self._now_sql(), **EDIT_CLEARS,
                                  **{**(RESUME_CLEARS if spec.enabled else {}), **paused}),
                S)
            if row is None:
                raise refused_edit(conn, S, spec.name, expected_version, "schedule",
                                   ScheduleNotFound)
            self._record(conn, [(spec.name, audit)])
            txn.announce = True
        return _schedule(row)

    def delete_schedule(self, name: str, *, audit: AuditNote | None = None) -> None:
        with self._write("delete schedule") as txn:
            result = txn.conn.execute(sa.delete(S).where(S.c.name == name))
            if result.rowcount == 0:
                raise ScheduleNotFound(name)
            self._record(txn.conn, [(name, audit)])
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
            stmt = sa.select(S).order_by(*self._nulls_last(S.c.next_run_at), S.c.name)
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
            stmt = stmt.where(self._carrying(tags))
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

    def count_schedules(self) -> ScheduleCounts:
        # One group per state, set-aside flag and source (a dozen at most), added up here: the
        # state's CASE is evaluated once a row, not once for each state counted.
        state = self._state().label("state")
        aside = S.c.fault.is_not(None).label("aside")
        stmt = (sa.select(state, aside, S.c.source, sa.func.count().label("n"))
                .group_by(state, aside, S.c.source))
        with self._read("count schedules") as conn:
            groups = conn.execute(stmt).all()
        by_state = dict.fromkeys(State, 0)
        for row in groups:
            by_state[State(row.state)] += row.n
        paused = by_state[State.PAUSED] + by_state[State.PAUSED_UNTIL]
        return ScheduleCounts(
            total=sum(row.n for row in groups), paused=paused,
            set_aside=sum(row.n for row in groups if row.aside),
            config=sum(row.n for row in groups if row.source == ScheduleSource.CONFIG.value),
            api=sum(row.n for row in groups if row.source == ScheduleSource.API.value),
            by_state=by_state)

    def _carrying(self, tags: Sequence[str]) -> sa.ColumnElement[bool]:
        """The rows carrying every one of ``tags`` (core.rules.controls.has_tags), found through
        the tag index in one grouped look: the index holds one entry per (name, tag), so a name
        carrying every distinct wanted tag has that many entries among them. One statement
        whatever the count (PostgreSQL: one array), where a sub-select per tag made planning
        grow with each."""
        wanted = list(dict.fromkeys(tags))
        if len(wanted) == 1:
            # Plainly, without the grouping: PostgreSQL cannot estimate the HAVING (it guessed
            # 50 of 10,000 tagged schedules), fetched every match and sorted them for a page;
            # this way it merges the tag index with the primary key in name order.
            return S.c.name.in_(sa.select(T.c.schedule_name).where(T.c.tag == wanted[0]))
        return S.c.name.in_(sa.select(T.c.schedule_name).where(self._in(T.c.tag, wanted))
                            .group_by(T.c.schedule_name)
                            .having(sa.func.count() == len(wanted)))

    def _state(self) -> sa.ColumnElement[str]:
        """core.rules.status.status of a row at the store's clock, from its columns (in that
        function's order: a pause, a fault, the end of its runs)."""
        now = self._now_sql()
        return sa.case(
            (S.c.enabled.is_(False), State.PAUSED.value),
            (sa.and_(S.c.paused_until.is_not(None), S.c.paused_until > now),
             State.PAUSED_UNTIL.value),
            (S.c.fault.is_not(None), State.SET_ASIDE.value),
            (sa.and_(S.c.next_run_at.is_(None), sa.or_(
                sa.and_(S.c.max_runs.is_not(None), S.c.total_runs >= S.c.max_runs),
                sa.and_(S.c.end_at.is_not(None), S.c.end_at <= now))), State.ENDED.value),
            else_=State.ENABLED.value)

    def sync_config(self, entries: Sequence[SyncEntry], *, lease: LeaseGrant,
                    prune_after: timedelta | None = None) -> SyncReport:
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
            read = {schedule.name: schedule for schedule in map(_schedule, rows)}
            plan = plan_config_sync(
                {name: stored_summary(s) for name, s in read.items()}, entries,
                prune_before=None if prune_after is None else now - prune_after)
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
            for chunk in self._chunks(plan.delete):
                conn.execute(sa.delete(S).where(self._in(S.c.name, chunk)))
            spec_of = {name: schedule.spec for name, schedule in read.items()}
            self._record(conn, [(name, note) for name, note in sync_notes(plan, spec_of)
                                if name not in plan.report.created or name in created], now)
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
        return {row.name for row in self._insert_new(conn, S, rows, conflict=[S.c.name],
                                                     returning=[S.c.name])}
