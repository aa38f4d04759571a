"""SQL predicates several parts of the store share, each written once."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from goatbeat_celery.core.rules.backfill import BackfillState
from goatbeat_celery.core.rules.policies import PENDING_STATES
from goatbeat_celery.core.rules.runs import ENDED_STATE_VALUES
from goatbeat_celery.core.rules.shards import Shard
from goatbeat_celery.core.types.execution import ExecutionState
from goatbeat_celery.store.schema import (
    ACTIVE_BACKFILL_PREDICATE,
    IN_FLIGHT_PREDICATE,
    RUNNING_PREDICATE,
    UNSETTLED_PREDICATE,
    UNSTARTED_PREDICATE,
    backfill_table,
    schedule_table,
)

S = schedule_table
B = backfill_table


# Written exactly as the partial indexes' predicates, so that both planners match them: SQLite
# compares the terms as written (SQLAlchemy would render ``enabled = 1`` there), and a literal
# rather than a bound parameter lets PostgreSQL match even a generic prepared plan.
_IS_ENABLED = sa.text("goatbeat_schedule.enabled")
_IS_CLAIMED = sa.text("goatbeat_execution.state = 'claimed'")
# A schedule in shard :shard_index of :shard_count (core.rules.shards); no hash stored: shard 0.
_IN_SHARD = sa.or_(
    S.c.shard_hash % sa.bindparam("shard_count", type_=sa.BigInteger())
    == sa.bindparam("shard_index", type_=sa.BigInteger()),
    sa.and_(S.c.shard_hash.is_(None),
            sa.bindparam("shard_index", type_=sa.BigInteger()) == sa.literal_column("0")))

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
_ACTIVE_BACKFILL = B.c.state == BackfillState.ACTIVE.value
# The same test as the partial index has it, for a read of the backfill table alone (the look
# for waiting work), which a generic prepared plan can then match.
_IS_ACTIVE_BACKFILL = sa.text(ACTIVE_BACKFILL_PREDICATE)


def _shard_rows(shard: Shard) -> sa.ColumnElement[bool]:
    """Rows joined to their schedule (outer join) that are ``shard``'s: its schedules', and
    for shard 0 those whose schedule no longer exists (no row joined)."""
    return sa.or_(_IN_SHARD, S.c.name.is_(None)) if shard.does_global_work else _IN_SHARD


def due_params(limit: int, shard: Shard | None,
               until: datetime | None = None) -> dict[str, Any]:
    """The bound values of the due statement: its limit, a shard's count and index, and the
    instant read ahead to (the statement built ``ahead``)."""
    params: dict[str, Any] = {"due_limit": limit}
    if shard is not None:
        params.update(shard_count=shard.count, shard_index=shard.index)
    if until is not None:
        params["due_until"] = until
    return params
