"""Executions as history: read by key, by occurrence or newest first, and pruned."""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from goatbeat_celery.core.protocols import History
from goatbeat_celery.core.rules.runs import RunState
from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.instants import check_aware, ensure_aware
from goatbeat_celery.core.types.run_query import RunCursor, RunQuery, RunScan
from goatbeat_celery.store.schema import (
    NOT_STARTED_PREDICATE,
    alert_table,
    audit_table,
    backfill_table,
    execution_table,
    schedule_tag_table,
)
from goatbeat_celery.store.sql.base import SQLStoreBase
from goatbeat_celery.store.sql.execution_rows import _execution
from goatbeat_celery.store.sql.outbox import SQLOutbox
from goatbeat_celery.store.sql.predicates import _ACTIVE_BACKFILL, _PRUNABLE
from goatbeat_celery.store.text_search import text_search_indexed

E = execution_table
B = backfill_table
A = audit_table
AL = alert_table
T = schedule_tag_table

#: The columns of a run as listed: all but its traceback, which only a run's own page shows
#: (up to 16 KiB a row), read as none.
_LISTED = (*(column for column in E.c if column.name != "run_traceback"),
           sa.null().label("run_traceback"))
_NEWEST_FIRST = (E.c.occurrence_at.desc(), E.c.key.desc())
#: Schedules whose latest runs one statement reads (a UNION ALL of one read each).
_LATEST_CHUNK = 50


class SQLHistory(SQLOutbox, SQLStoreBase, History):
    """Reads of past executions, and pruning."""

    def executions_by_key(self, keys: Sequence[str]) -> dict[str, Execution]:
        found: dict[str, Execution] = {}
        with self._read("read executions") as conn:
            for chunk in self._chunks(list(dict.fromkeys(keys))):
                for row in conn.execute(sa.select(E).where(self._in(E.c.key, chunk))):
                    found[row.key] = _execution(row)
        return found

    def occurrence_executions(self, schedule_name: str, start: datetime,
                              end: datetime, *,
                              claimed_since: datetime | None = None) -> list[Execution]:
        check_aware(start, end, claimed_since)
        stmt = (sa.select(E).where(E.c.schedule_name == schedule_name,
                                   E.c.occurrence_at >= start, E.c.occurrence_at <= end)
                .order_by(E.c.occurrence_at, E.c.key))
        if claimed_since is not None:
            stmt = stmt.where(E.c.claimed_at >= claimed_since)
        with self._read("read the executions of occurrences") as conn:
            return [_execution(row) for row in conn.execute(stmt)]

    def executions(self, *, schedule_name: str | None = None,
                   states: Collection[ExecutionState] | None = None,
                   limit: int = 50) -> list[Execution]:
        stmt = sa.select(E).order_by(E.c.occurrence_at.desc(), E.c.key.desc()).limit(limit)
        if schedule_name is not None:
            stmt = stmt.where(E.c.schedule_name == schedule_name)
        if states is not None:
            stmt = stmt.where(E.c.state.in_(sorted(state.value for state in states)))
        with self._read("read executions") as conn:
            return [_execution(row) for row in conn.execute(stmt)]

    def find_runs(self, query: RunQuery, *, before: RunCursor | None = None,
                  limit: int = 50, within: float | None = None) -> list[Execution]:
        stmt = (_after(sa.select(*_LISTED).where(*_run_criteria(query)), before)
                .order_by(*_NEWEST_FIRST).limit(max(limit, 0)))
        with (self._read("find runs") if within is None
              else self._read_within("find runs", within)) as conn:
            return [_execution(row) for row in conn.execute(stmt)]

    def scan_runs(self, query: RunQuery, *, before: RunCursor | None = None,
                  limit: int = 50, scan: int = 50_000) -> RunScan:
        rest = _run_criteria(replace(query, text=None))
        read = _after(sa.select(*_LISTED).where(*rest), before).order_by(*_NEWEST_FIRST)
        # The text is tested outside the subquery, whose LIMIT no condition crosses: no
        # trigram index can serve it there, so the runs are read newest first, ``scan`` at
        # most, and the read stops once ``limit`` of them hold the text.
        window = read.limit(max(scan, 0)).subquery("scanned")
        found = (sa.select(window).where(*_text_criteria(window.c, query.text))
                 .order_by(window.c.occurrence_at.desc(), window.c.key.desc())
                 .limit(max(limit, 0)))
        with self._read("scan runs") as conn:
            runs = [_execution(row) for row in conn.execute(found)]
            if len(runs) >= limit or scan <= 0:
                return RunScan(runs, None)
            # The last run read, if another follows it.
            edge = conn.execute(
                _after(sa.select(E.c.occurrence_at, E.c.key).where(*rest), before)
                .order_by(*_NEWEST_FIRST).offset(scan - 1).limit(2)).all()
        return RunScan(runs, RunCursor(*edge[0]) if len(edge) == 2 else None)

    def text_search_indexed(self) -> bool:
        with self._read("look for the text search's indexes") as conn:
            return text_search_indexed(conn)

    def latest_runs(self, schedule_names: Sequence[str],
                    per_schedule: int) -> dict[str, list[Execution]]:
        found: dict[str, list[Execution]] = {}
        names = list(dict.fromkeys(schedule_names))
        if not names or per_schedule <= 0:
            return found
        with self._read("read the latest runs") as conn:
            if self._LATERAL:
                # One statement planned once: a UNION ALL of 50 reads took PostgreSQL 170 ms
                # to plan (each read weighs every index of the table) and 4 ms to run.
                named = sa.func.unnest(sa.bindparam(
                    "latest_names", names, type_=postgresql.ARRAY(sa.Text()))
                ).table_valued("name").alias("named")
                newest = (sa.select(*_LISTED).where(E.c.schedule_name == named.c.name)
                          .order_by(*_NEWEST_FIRST).limit(per_schedule).lateral("newest"))
                for row in conn.execute(sa.select(newest).select_from(named)
                                        .join(newest, sa.true())):
                    found.setdefault(row.schedule_name, []).append(_execution(row))
                names = []
            for start in range(0, len(names), _LATEST_CHUNK):
                # One read per schedule, each the newest end of its history index: a window
                # over every run of the schedules named would read their whole history.
                reads = [sa.select(*_LISTED).where(E.c.schedule_name == name)
                         .order_by(*_NEWEST_FIRST).limit(per_schedule).subquery()
                         for name in names[start:start + _LATEST_CHUNK]]
                union = sa.union_all(*(sa.select(read) for read in reads))
                for row in conn.execute(union):
                    found.setdefault(row.schedule_name, []).append(_execution(row))
        for runs in found.values():
            runs.sort(key=lambda e: (e.occurrence_at, e.key), reverse=True)
        return found

    def prune(self, *, before: datetime, limit: int) -> int:
        params = self._prune_params(before, limit)
        with self._write("prune history") as txn:
            return sum(txn.conn.execute(delete, params).rowcount
                       for delete in self._prune_deletes)

    @staticmethod
    def _prune_params(before: datetime, limit: int) -> dict[str, Any]:
        """The parameters of :attr:`_prune_deletes`."""
        return {"before": ensure_aware(before, "before"), "prune_limit": limit}

    @functools.cached_property
    def _prune_deletes(self) -> list[sa.Delete]:
        """The deletes of one prune: up to ``prune_limit`` rows of each kind of history older
        than ``before`` (bound parameters), oldest first. Built once: a prune finding nothing
        is then mostly its round trip."""
        before: sa.BindParameter[Any] = sa.bindparam("before")
        limit = sa.bindparam("prune_limit", type_=sa.Integer())
        oldest = (sa.select(E.c.key).where(_PRUNABLE, E.c.claimed_at < before)
                  .order_by(E.c.claimed_at).limit(limit))
        finished = (sa.select(B.c.id).where(sa.not_(_ACTIVE_BACKFILL), B.c.finished_at < before)
                    .order_by(B.c.finished_at).limit(limit))
        resolved = (sa.select(AL.c.id).where(AL.c.state == "resolved",
                                             AL.c.resolved_at < before)
                    .order_by(AL.c.resolved_at).limit(limit))
        # Ids grow with time: the oldest entries are the lowest ids, found by the time index.
        logged = sa.select(A.c.id).where(A.c.at < before).order_by(A.c.at).limit(limit)
        return [sa.delete(E).where(E.c.key.in_(self._subset(oldest))),
                sa.delete(B).where(B.c.id.in_(self._subset(finished))),
                sa.delete(AL).where(AL.c.id.in_(self._subset(resolved))),
                *self._prune_event_deletes(before, limit),
                sa.delete(A).where(A.c.id.in_(self._subset(logged)))]


def _run_criteria(query: RunQuery) -> list[sa.ColumnElement[bool]]:
    """The conditions of :meth:`SQLHistory.find_runs` for ``query``."""
    found: list[sa.ColumnElement[bool]] = []
    if query.outcomes is not None:
        found.append(_outcome_criterion(query.outcomes))
    if query.schedule_name is not None:
        found.append(E.c.schedule_name == query.schedule_name)
    if query.tag is not None:
        found.append(E.c.schedule_name.in_(
            sa.select(T.c.schedule_name).where(T.c.tag == query.tag)))
    if query.worker is not None:
        found.append(E.c.worker == query.worker)
    if query.since is not None:
        found.append(E.c.occurrence_at >= query.since)
    if query.until is not None:
        found.append(E.c.occurrence_at < query.until)
    found.extend(_text_criteria(E.c, query.text))
    return found


def _after(stmt: sa.Select[Any], before: RunCursor | None) -> sa.Select[Any]:
    """``stmt`` keeping the runs after ``before`` in the order of a search (keyset paging)."""
    if before is None:
        return stmt
    after = sa.tuple_(sa.literal(ensure_aware(before.occurrence_at, "before"),
                                 E.c.occurrence_at.type),
                      sa.literal(before.key, E.c.key.type))
    return stmt.where(sa.tuple_(E.c.occurrence_at, E.c.key) < after)


def _text_criteria(columns: Any, text: str | None) -> list[sa.ColumnElement[bool]]:
    """The condition that a run's key, error or note (``columns``: of the table or of a
    subquery of it) contains ``text``, case aside; none without a text."""
    if not text:
        return []
    # The trigram indexes of migration 0020 serve each test on PostgreSQL: the key's is on
    # lower(key) (migrations/trigram.py says why), the errors' on the columns (ILIKE).
    return [sa.or_(sa.func.lower(columns.key).contains(text.lower(), autoescape=True),
                   *(column.icontains(text, autoescape=True)
                     for column in (columns.run_error, columns.last_error)))]


_RUN_STATES = frozenset(state.value for state in RunState)


def _outcome_criterion(outcomes: frozenset[str]) -> sa.ColumnElement[bool]:
    """Runs showing one of ``outcomes``: a worker's report by ``run_state``, a dispatch state
    by ``state`` among the runs not started. One outcome reads its index in order."""
    reported = sorted(outcomes & _RUN_STATES)
    dispatched = sorted(outcomes - _RUN_STATES)
    either: list[sa.ColumnElement[bool]] = []
    if reported:
        either.append(E.c.run_state == reported[0] if len(reported) == 1
                      else E.c.run_state.in_(reported))
    if dispatched:
        # The predicate as the partial index states it, for SQLite's planner.
        either.append(sa.and_(sa.text(NOT_STARTED_PREDICATE),
                              E.c.state == dispatched[0] if len(dispatched) == 1
                              else E.c.state.in_(dispatched)))
    return sa.or_(*either) if either else sa.false()
