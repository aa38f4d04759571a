"""Claiming due occurrences under the lease, and setting unplannable schedules aside."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from goatbeat_celery.core.protocols import Claims
from goatbeat_celery.core.rules.claims import ClaimPlan, plan_claims
from goatbeat_celery.core.rules.faults import CLAIM_CLEARS, plan_set_aside
from goatbeat_celery.core.types.claims import ClaimResult, PlannedClaim, check_claims_aware
from goatbeat_celery.core.types.instants import check_aware
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.set_aside import SetAside
from goatbeat_celery.store.schema import UTCDateTime, schedule_table
from goatbeat_celery.store.sql.base import SQLStoreBase
from goatbeat_celery.store.sql.execution_rows import _dispatch
from goatbeat_celery.store.sql.rows import _instant

S = schedule_table


#: What a claim reads of the rows it locks: the version to compare and what a dispatch carries.
#: ``total_runs`` too: a run limit is checked against the count locked with the row.
_CLAIM_COLUMNS = (S.c.name, S.c.version, S.c.task, S.c.args, S.c.kwargs, S.c.options,
                  S.c.total_runs, S.c.trigger, S.c.rotate, S.c.rotate_handover)

# Advancing one claimed schedule as core.rules.claims.Advance says: counters grow in SQL, the last
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


class SQLClaims(SQLStoreBase, Claims):
    """Claims: locking the due rows, recording executions, advancing schedules."""

    def claim(self, claims: Sequence[PlannedClaim], *, lease: LeaseGrant,
              not_before: datetime | None = None) -> ClaimResult:
        check_claims_aware(claims)
        with self._write("claim") as txn:
            conn = txn.conn
            names = list(dict.fromkeys(c.schedule_name for c in claims))
            now, rows = self._lock_for_claim(conn, lease, names)
            if not claims:
                return ClaimResult(dispatches=())
            if not_before is not None and now < not_before:
                return ClaimResult(dispatches=(), early=now)
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
