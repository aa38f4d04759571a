"""How the end of a run is applied to its schedule: the engine reads the runs that ended
(:meth:`~goatbeat_celery.core.protocols.ScheduleStore.finished_runs`), asks
:func:`settlement_of` what each one writes, and hands the answers to
:meth:`~goatbeat_celery.core.protocols.ScheduleStore.settle_runs`, which applies them in the
leader's fenced transaction and releases the claim ``buffer_one`` held back, as
:func:`held_to_release` decides.

The rules themselves (failures in a row, backoff, fixed delay, pause) are
:func:`goatbeat_celery.core.policies.settle`; this module only fits them to stored rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from goatbeat_celery.core.claims import InFlight
from goatbeat_celery.core.model import FinishedRun, RunSettlement
from goatbeat_celery.core.policies import GridAfter, RunEnd, execution_end, settle

__all__ = ["RESUME_CLEARS", "held_to_release", "settlement_of"]

#: What a write that leaves a schedule enabled (``resume``, an edit of a running schedule)
#: writes: the pause's reason and the failures in a row are the operator's to clear.
RESUME_CLEARS: Mapping[str, Any] = MappingProxyType(
    {"paused_reason": None, "consecutive_failures": 0})


def settlement_of(run: FinishedRun, grid_after: GridAfter) -> RunSettlement:
    """What ``run`` writes on its schedule. ``grid_after`` gives the schedule's first
    ``(occurrence, due)`` strictly after an instant (for a backoff on the fixed-rate grid).

    A run of a deleted schedule, or of a paused one, is only marked settled (a paused
    schedule's next times are set when it is resumed). A manual run counts like any other."""
    execution, schedule = run.execution, run.schedule
    if schedule is None:
        return RunSettlement(key=execution.key, schedule_name=execution.schedule_name,
                             version=None)
    keep = RunSettlement(key=execution.key, schedule_name=schedule.name,
                         version=schedule.version,
                         consecutive_failures=schedule.consecutive_failures,
                         next_occurrence_at=schedule.next_occurrence_at,
                         next_run_at=schedule.next_run_at)
    end = execution_end(execution) or RunEnd.NEUTRAL
    if not schedule.spec.enabled:
        return keep
    spec = schedule.spec
    finished_at = execution.finished_at or execution.submitted_at or execution.claimed_at
    decided = settle(
        end, finished_at=finished_at, failures=schedule.consecutive_failures, mode=spec.mode,
        delay=spec.delay(), backoff=spec.backoff(), pause_after=spec.pause_after_failures,
        next_occurrence_at=schedule.next_occurrence_at, next_run_at=schedule.next_run_at,
        grid_after=grid_after, run_error=execution.run_error)
    return RunSettlement(key=execution.key, schedule_name=schedule.name,
                         version=schedule.version,
                         consecutive_failures=decided.consecutive_failures,
                         next_occurrence_at=decided.next_occurrence_at,
                         next_run_at=decided.next_run_at, paused_reason=decided.paused_reason,
                         backoff=decided.backoff)


def held_to_release(in_flight: InFlight) -> str | None:
    """The key of the claim held back (``buffer_one``) that may now be sent: the one waiting,
    once no run of its schedule is unfinished. It becomes ``claimed``, and goes out with the
    leader's pending claims."""
    if in_flight.waiting is not None and in_flight.unfinished is None:
        return in_flight.waiting
    return None
