"""Executions between their claim and the broker: pending, submitted, failed, requested."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from goatbeat_celery.core.protocols import Dispatches
from goatbeat_celery.core.rules.audit import with_change
from goatbeat_celery.core.rules.backfill import Backfill
from goatbeat_celery.core.rules.backfill_outcomes import rerun_executions, rerun_exists
from goatbeat_celery.core.rules.claims import (
    ATTEMPTS_MAX,
    manual_execution,
    manual_run_exists,
    next_attempt,
)
from goatbeat_celery.core.rules.shards import Shard
from goatbeat_celery.core.rules.validation import reason_text
from goatbeat_celery.core.types.audit import AuditNote
from goatbeat_celery.core.types.claims import Dispatch
from goatbeat_celery.core.types.errors import ScheduleNotFound
from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.instants import check_aware
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.store.schema import execution_table, schedule_table
from goatbeat_celery.store.sql.base import SQLStoreBase
from goatbeat_celery.store.sql.execution_rows import _dispatch, _execution
from goatbeat_celery.store.sql.predicates import _IS_CLAIMED, _STILL_CLAIMED, _shard_rows

S = schedule_table
E = execution_table


class SQLDispatch(SQLStoreBase, Dispatches):
    """Claimed executions taken for submission and marked as it goes."""

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
                              S.c.options, S.c.trigger, S.c.total_runs, S.c.rotate,
                              S.c.rotate_handover)
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

    def mark_submitted(self, keys: Sequence[str],
                       clusters: Mapping[str, str] | None = None) -> int:
        keys = list(dict.fromkeys(keys))
        if not keys:
            return 0
        # One statement per queue the batch went to (a rotation names a few), and one for the
        # keys of no rotation, which leave the column as it is.
        by_cluster: dict[str | None, list[str]] = {}
        for key in keys:
            by_cluster.setdefault((clusters or {}).get(key), []).append(key)
        changed = 0
        with self._write_each("mark submitted") as conn:
            now = self._now_sql()
            for cluster, group in by_cluster.items():
                values: dict[str, Any] = {"state": ExecutionState.SUBMITTED.value,
                                          "submitted_at": now}
                if cluster is not None:
                    values["cluster"] = cluster
                for chunk in self._chunks(group):
                    result = conn.execute(
                        sa.update(E).where(self._in(E.c.key, chunk), _STILL_CLAIMED)
                        .values(**values)
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

    def request_run(self, name: str, *, audit: AuditNote | None = None) -> Execution:
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
            self._record(conn, [(name, with_change(audit, "run", execution.key))], row.now)
            txn.announce = True
        return execution

    def request_reruns(self, backfill: Backfill, round_: int,
                       occurrences: Sequence[datetime], *,
                       audit: AuditNote | None = None) -> list[Execution]:
        check_aware(*occurrences)
        name = backfill.schedule_name
        with self._write("request re-runs") as txn:
            conn = txn.conn
            exists = sa.select(S.c.name).where(S.c.name == name).scalar_subquery()
            row = conn.execute(sa.select(self._now_sql().label("now"),
                                         exists.label("found"))).one()
            if row.found is None:
                raise ScheduleNotFound(name)
            executions = rerun_executions(backfill, round_, occurrences, now=row.now)
            # Raising rolls the transaction back: the round is written whole or not at all.
            if len(self._insert_executions(conn, executions)) != len(executions):
                raise rerun_exists(backfill, round_)
            if audit is not None:
                self._record(conn, [(name, audit)], row.now)
            txn.announce = True
        return executions

    def oldest_pending(self) -> Execution | None:
        stmt = sa.select(E).where(_IS_CLAIMED).order_by(E.c.due_at, E.c.key).limit(1)
        with self._read("read the oldest pending execution") as conn:
            row = conn.execute(stmt).one_or_none()
        return None if row is None else _execution(row)
