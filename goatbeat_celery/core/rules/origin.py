"""What made a run: the schedule itself, ``run_now``, or a backfill.

A run-now execution says so (``manual``). A backfill run is keyed ``<key>:backfill-<id>`` when
its occurrence already had an execution, else under the occurrence's own key; then it is known
by what only a backfill writes: due when claimed (``due_at`` = ``claimed_at``, as
``core.rules.backfill`` has it), for an occurrence inside a backfill's range, claimed while
that backfill was active. A grid run is due at its planned instant, which a claim never
equals once the occurrence is past, as every occurrence of a backfill's range is.
"""

from __future__ import annotations

from collections.abc import Iterable

from goatbeat_celery.core.rules.backfill import Backfill
from goatbeat_celery.core.types.execution import Execution

RUN_NOW = "run-now"


def backfill_of_key(key: str) -> str | None:
    """``backfill 3`` for a key a backfill derived (ending ``:backfill-3``), else None."""
    _, marker, rest = key.rpartition(":backfill-")
    return f"backfill {rest}" if marker and rest.isdigit() else None


def run_origin(execution: Execution, backfills: Iterable[Backfill] = ()) -> str | None:
    """``run-now``, ``backfill <id>``, or None for a run the schedule made; ``backfills``:
    those of the execution's schedule (a backfill run under its occurrence's own key is told
    by them)."""
    if execution.manual:
        return RUN_NOW
    derived = backfill_of_key(execution.key)
    if derived is not None or execution.due_at != execution.claimed_at:
        return derived
    claimed = execution.claimed_at
    for backfill in backfills:
        if (backfill.schedule_name == execution.schedule_name
                and backfill.start <= execution.occurrence_at <= backfill.end
                and execution.occurrence_at < claimed
                and (backfill.created_at is None or backfill.created_at <= claimed)
                and (backfill.finished_at is None or claimed <= backfill.finished_at)):
            return f"backfill {backfill.id}"
    return None
