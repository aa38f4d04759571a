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
from goatbeat_celery.core.rules.backfill_outcomes import (
    BackfillTally,
    OutcomeCount,
    round_of,
)
from goatbeat_celery.core.rules.shards import Shard
from goatbeat_celery.core.rules.validation import reason_text
from goatbeat_celery.core.types.audit import AuditNote
from goatbeat_celery.core.types.claims import ClaimResult
from goatbeat_celery.core.types.errors import BackfillNotFound, ScheduleNotFound
from goatbeat_celery.core.types.execution import ExecutionState, key_name
from goatbeat_celery.core.types.instants import check_aware
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.store.schema import backfill_table, execution_table, schedule_table
from goatbeat_celery.store.sql.base import SQLStoreBase
from goatbeat_celery.store.sql.execution_rows import _backfill, _dispatch
from goatbeat_celery.store.sql.predicates import _ACTIVE_BACKFILL, _shard_rows

S = schedule_table
B = backfill_table
E = execution_table
#: The digits a re-run key ends with.
_DIGITS = "0123456789"
#: core.rules.backfill.failed_execution's dispatch states.
_NEVER_SENT = (ExecutionState.EXPIRED.value, ExecutionState.ABANDONED.value)


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

    def backfill_tally(self, backfill: Backfill) -> BackfillTally:
        if backfill.created_at is None:
            return BackfillTally(counts=(), failed=())
        kind, own, rerun = self._backfill_kind(backfill)
        # The executions tally_executions is given: its schedule's occurrences in its range
        # (the history index) claimed since it was created.
        scope = (E.c.schedule_name == backfill.schedule_name,
                 E.c.occurrence_at >= backfill.start, E.c.occurrence_at <= backfill.end,
                 E.c.claimed_at >= backfill.created_at, E.c.manual.is_(False),
                 sa.or_(own, rerun))
        outcome = sa.func.coalesce(E.c.run_state, E.c.state)
        grouped = (sa.select(kind.label("kind"), outcome.label("outcome"),
                             sa.func.count().label("n"),
                             sa.func.min(E.c.claimed_at).label("first"))
                   .where(*scope).group_by(kind, outcome))
        # Each occurrence's latest run, by claim then key (core.rules.backfill_outcomes).
        latest = (sa.select(E.c.occurrence_at, E.c.state, E.c.run_state,
                            sa.func.row_number().over(
                                partition_by=E.c.occurrence_at,
                                order_by=(E.c.claimed_at.desc(), E.c.key.desc())).label("nth"))
                  .where(*scope).subquery("latest"))
        failed = (sa.select(latest.c.occurrence_at)
                  .where(latest.c.nth == 1,
                         sa.or_(latest.c.state.in_(_NEVER_SENT),
                                latest.c.run_state.in_(("failed", "lost"))))
                  .order_by(latest.c.occurrence_at))
        counts: list[OutcomeCount] = []
        with self._read("count a backfill's runs") as conn:
            for row in conn.execute(grouped):
                round_ = 0 if row.kind == "" else round_of(row.kind)
                if round_ is not None:
                    counts.append(OutcomeCount(round_, row.outcome, row.n, row.first))
            at = [row.occurrence_at for row in conn.execute(failed)]
        return BackfillTally(counts=tuple(sorted(counts)), failed=tuple(at))

    def _backfill_kind(self, backfill: Backfill) -> tuple[
            sa.ColumnElement[str], sa.ColumnElement[bool], sa.ColumnElement[bool]]:
        """Which of ``backfill``'s runs an execution of its scope is, from its key as
        core.rules.backfill_outcomes judges it: ``''`` its own, else the re-run's round as the
        key's last digits; and the predicates of either. The instant in the key is not compared
        with ``occurrence_at``: goatbeat writes each key from its occurrence."""
        prefix = f"{key_name(backfill.schedule_name)}:"
        grid = sa.and_(E.c.key.startswith(prefix, autoescape=True),
                       E.c.key.endswith("+00:00", autoescape=True),
                       E.c.due_at == E.c.claimed_at)
        if backfill.finished_at is not None:
            grid = sa.and_(grid, E.c.claimed_at <= backfill.finished_at)
        own = sa.or_(grid, sa.and_(E.c.key.startswith(prefix, autoescape=True),
                                   E.c.key.endswith(f":backfill-{backfill.id}",
                                                    autoescape=True)))
        if self._engine.dialect.name in ("mysql", "mariadb"):
            digits: sa.ColumnElement[str] = sa.func.substring_index(E.c.key, "-", -1)
        else:
            digits = sa.func.substr(E.c.key, sa.func.length(sa.func.rtrim(E.c.key, _DIGITS)) + 1)
        # Ending with the round's digits (1 to 9 of them, the first not 0), as rerun_round reads.
        rerun = sa.and_(E.c.key.startswith(prefix, autoescape=True),
                        E.c.key.like(sa.literal(f"%:backfill-{backfill.id}-rerun-") + digits),
                        sa.func.length(digits).between(1, 9), digits.not_like("0%"))
        kind = sa.case((own, sa.literal("")), else_=digits)
        return kind, own, rerun

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
