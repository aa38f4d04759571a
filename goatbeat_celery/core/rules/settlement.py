"""What the end of a run writes on its schedule, and what a claim tells the store about it.

A store applies :func:`settlement_of`'s answers in the leader's fenced transaction and releases
the claim ``buffer_one`` held back as :func:`held_to_release` decides; the planner gives each
claim its run-policy fields (:func:`claim_policies`, :func:`fixed_delay_claim`); a write that
leaves a schedule enabled clears what :data:`RESUME_CLEARS` names. The policies themselves
(failures in a row, backoff, fixed delay, pause) are
:func:`goatbeat_celery.core.rules.policies.settle`; this module fits them to stored rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

from goatbeat_celery.core.rules.claims import InFlight
from goatbeat_celery.core.rules.defaults import own_or_default
from goatbeat_celery.core.rules.policies import (
    GridAfter,
    OverlapPolicy,
    RunEnd,
    execution_end,
    settle,
)
from goatbeat_celery.core.types.claims import PlannedClaim
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.settlement import FinishedRun, RunSettlement
from goatbeat_celery.core.types.spec import ScheduleSpec

__all__ = ["RESUME_CLEARS", "claim_policies", "fixed_delay_claim", "held_to_release",
           "settlement_of"]


#: What a write that leaves a schedule enabled (``resume``, an edit of a running schedule)
#: writes: the pause's reason, its end and the failures in a row are the operator's to clear.
RESUME_CLEARS: Mapping[str, Any] = MappingProxyType(
    {"paused_reason": None, "paused_until": None, "consecutive_failures": 0})


def settlement_of(run: FinishedRun, grid_after: GridAfter) -> RunSettlement:
    """What ``run`` writes on its schedule. ``grid_after`` gives the schedule's first
    ``(occurrence, due)`` strictly after an instant (for a backoff on the fixed-rate grid).

    A run of a deleted schedule, or of a paused one, or whose end changes nothing on its
    schedule, is only marked settled (``version`` None: nothing to compare, nothing to write).
    A paused schedule's next times are set when it is resumed. A manual run counts like any
    other."""
    execution, schedule = run.execution, run.schedule
    if schedule is None:
        return RunSettlement(key=execution.key, schedule_name=execution.schedule_name,
                             version=None)
    only_the_run = RunSettlement(key=execution.key, schedule_name=schedule.name, version=None)
    end = execution_end(execution) or RunEnd.NEUTRAL
    if not schedule.spec.enabled:
        return only_the_run
    spec = schedule.spec
    finished_at = execution.finished_at or execution.submitted_at or execution.claimed_at
    decided = settle(
        end, finished_at=finished_at, failures=schedule.consecutive_failures, mode=spec.mode,
        delay=spec.delay(), backoff=spec.backoff(), pause_after=spec.pause_after_failures,
        next_occurrence_at=schedule.next_occurrence_at, next_run_at=schedule.next_run_at,
        grid_after=grid_after, run_error=execution.run_error)
    if (decided.consecutive_failures, decided.next_occurrence_at, decided.next_run_at,
            decided.paused_reason) == (schedule.consecutive_failures,
                                       schedule.next_occurrence_at, schedule.next_run_at, None):
        return only_the_run
    return RunSettlement(key=execution.key, schedule_name=schedule.name,
                         version=schedule.row_version,
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


def claim_policies(spec: ScheduleSpec, default_overlap: OverlapPolicy) -> dict[str, Any]:
    """The run-policy fields of a :class:`~goatbeat_celery.core.types.claims.PlannedClaim` of
    ``spec``: its overlap policy (``default_overlap`` when it gives none), its fixed delay, and
    whether its runs wait to be settled (a policy learns something from their end)."""
    overlap = own_or_default(spec.overlap, default_overlap)
    delay = spec.delay()
    settle_ends = (delay is not None or spec.failure_backoff is not None
                   or spec.pause_after_failures is not None
                   or overlap is OverlapPolicy.BUFFER_ONE)
    return {"overlap": overlap, "delay": delay, "settle": settle_ends}


def fixed_delay_claim(schedule: Schedule, now: datetime, *,
                      expires_after: timedelta | None,
                      default_overlap: OverlapPolicy) -> PlannedClaim:
    """The claim of a due fixed-delay schedule: its one pending occurrence, however late (a
    fixed delay has no grid to miss), and a provisional next run one delay after the later of
    its due instant and ``now``, where the schedule is looked at again should the run's end
    never be settled (the end, once settled, sets the exact time)."""
    spec = schedule.spec
    delay = spec.delay()
    occurrence, due = schedule.next_occurrence_at, schedule.next_run_at
    assert delay is not None and occurrence is not None and due is not None
    again = max(due, now) + delay
    return PlannedClaim(
        schedule_name=spec.name, version=schedule.row_version, occurrences=((occurrence, due),),
        missed=0, next_occurrence_at=again, next_run_at=again, expires_after=expires_after,
        **claim_policies(spec, default_overlap))
