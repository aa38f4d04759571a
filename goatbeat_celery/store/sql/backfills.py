"""Backfills: their rows, and claiming a step of one under the lease."""

from __future__ import annotations

import sqlalchemy as sa

from goatbeat_celery.core.protocols import BackfillStore
from goatbeat_celery.core.rules.audit import with_change
from goatbeat_celery.core.rules.backfill import (
    Backfill,
    BackfillRequest,
    BackfillState,
    BackfillStep,
    progress_after,
    step_executions,
)
from goatbeat_celery.core.rules.shards import Shard
from goatbeat_celery.core.rules.validation import reason_text
from goatbeat_celery.core.types.audit import AuditNote
from goatbeat_celery.core.types.claims import ClaimResult
from goatbeat_celery.core.types.errors import BackfillNotFound, ScheduleNotFound
from goatbeat_celery.core.types.instants import check_aware
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.store.schema import backfill_table, schedule_table
from goatbeat_celery.store.sql.base import SQLStoreBase
from goatbeat_celery.store.sql.execution_rows import _backfill, _dispatch
from goatbeat_celery.store.sql.predicates import _ACTIVE_BACKFILL, _shard_rows

S = schedule_table
B = backfill_table


class SQLBackfills(SQLStoreBase, BackfillStore):
    """Backfills as the API creates them and the leader steps through them."""

    def create_backfill(self, request: BackfillRequest, *,
                        audit: AuditNote | None = None) -> Backfill:
        check_aware(request.start, request.end)
        with self._write("create backfill") as txn:
            conn = txn.conn
            found = conn.execute(sa.select(S.c.name).where(
                S.c.name == request.schedule_name)).one_or_none()
            if found is None:
                raise ScheduleNotFound(request.schedule_name)
            row = self._insert_new(conn, B, {
                "schedule_name": request.schedule_name, "start_at": request.start,
                "end_at": request.end, "mode": request.mode.value,
                "newest_first": request.newest_first, "per_tick": request.per_tick,
                "total": request.total, "examined": 0, "claimed": 0, "cursor_at": None,
                "state": BackfillState.ACTIVE.value, "created_at": self._now_sql()},
                returning=list(B.c))[0]
            self._record(conn, [(request.schedule_name, with_change(audit, "backfill", row.id))])
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

    def cancel_backfill(self, backfill_id: int, *,
                        audit: AuditNote | None = None) -> Backfill:
        with self._write("cancel backfill") as txn:
            row = self._update_row(
                txn.conn, sa.update(B).where(B.c.id == backfill_id, _ACTIVE_BACKFILL)
                .values(state=BackfillState.CANCELLED.value, finished_at=self._now_sql()), B)
            if row is not None:
                self._record(txn.conn, [(row.schedule_name, audit)])
        return self.get_backfill(backfill_id) if row is None else _backfill(row)

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
                sa.select(S.c.name, S.c.task, S.c.args, S.c.kwargs, S.c.options, S.c.trigger,
                          S.c.total_runs, S.c.rotate, S.c.rotate_handover)
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
