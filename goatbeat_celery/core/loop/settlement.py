"""How the end of a run is applied to its schedule: the engine reads the runs that ended
(:meth:`~goatbeat_celery.core.protocols.ScheduleStore.finished_runs`), asks
:func:`settlement_of` what each one writes, and hands the answers to
:meth:`~goatbeat_celery.core.protocols.ScheduleStore.settle_runs`, which applies them in the
leader's fenced transaction and releases the claim ``buffer_one`` held back, as
:func:`held_to_release` decides.

The rules themselves (failures in a row, backoff, fixed delay, pause) are
:func:`goatbeat_celery.core.rules.policies.settle`; this module only fits them to stored rows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Protocol

from goatbeat_celery.core.loop.observer import EngineObserver
from goatbeat_celery.core.rules.claims import InFlight
from goatbeat_celery.core.rules.defaults import own_or_default
from goatbeat_celery.core.rules.policies import (
    GridAfter,
    OverlapPolicy,
    RunEnd,
    execution_end,
    settle,
)
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSpec, quoted_name
from goatbeat_celery.core.types.tick import FinishedRun, PlannedClaim, RunSettlement, SettleReport

__all__ = ["RESUME_CLEARS", "RunSettler", "SettlingStore", "claim_policies",
           "fixed_delay_claim", "held_to_release", "settlement_of"]

logger = logging.getLogger(__name__)

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


# -- the engine's side -------------------------------------------------------------------------
def claim_policies(spec: ScheduleSpec, default_overlap: OverlapPolicy) -> dict[str, Any]:
    """The run-policy fields of a :class:`~goatbeat_celery.core.types.tick.PlannedClaim` of
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


class SettlingStore(Protocol):
    """The two store operations of a settle pass (see
    :class:`~goatbeat_celery.core.protocols.ScheduleStore`)."""

    def finished_runs(self, limit: int) -> list[FinishedRun]: ...

    def settle_runs(self, settlements: Sequence[RunSettlement], *,
                    lease: LeaseGrant) -> SettleReport: ...


class RunSettler:
    """The leader's pass over the runs that ended since the last one: each end applied to its
    schedule as :func:`settlement_of` decides, in the leader's fenced transaction, and the held
    claims that may now go released. ``grid_after`` gives a schedule's grid (it raises for a
    schedule whose trigger cannot be built: that run is settled without moving its schedule,
    which the claim path sets aside)."""

    def __init__(self, *, store: SettlingStore,
                 grid_after: Callable[[Schedule], GridAfter], observer: EngineObserver,
                 batch_size: int) -> None:
        self.store = store
        self.grid_after = grid_after
        self.observer = observer
        self.batch_size = batch_size
        #: The schedules the last pass wrote (next times, failures, a pause): what the leader
        #: of another shard may have to act on.
        self.moved: tuple[str, ...] = ()

    def settle(self, lease: LeaseGrant) -> SettleReport:
        """One pass: at most ``batch_size`` runs. LeaseLost and StoreError travel up."""
        self.moved = ()
        runs = self.store.finished_runs(self.batch_size)
        if not runs:
            return SettleReport()
        decided = [self._decide(run) for run in runs]
        report = self.store.settle_runs(decided, lease=lease)
        written = set(report.settled)
        self.moved = tuple(dict.fromkeys(s.schedule_name for s in decided
                                         if s.version is not None and s.key in written))
        ended = [run.execution for run in runs if run.execution.key in written
                 and run.execution.run_state is not None and not run.execution.run_state.live]
        if ended:
            # Settled once, by the leader that holds the lease: each end is reported once.
            self.observer.runs_ended(ended)
        for settlement in decided:
            if settlement.backoff and settlement.key in written \
                    and settlement.next_run_at is not None:
                logger.info("schedule %s backs off after %d failed runs in a row: next run at "
                            "%s (%s after run %s)", quoted_name(settlement.schedule_name),
                            settlement.consecutive_failures, settlement.next_run_at.isoformat(),
                            settlement.backoff, quoted_name(settlement.key),
                            extra={"action": "run_backoff"})
        for name, reason in report.paused:
            logger.warning("schedule %s paused itself: %s; `celery goatbeat resume` runs it "
                           "again", quoted_name(name), reason, extra={"action": "schedule_paused"})
            self.observer.paused(name, reason)
        if report.released:
            logger.info("%d held runs released: the runs before them finished",
                        len(report.released), extra={"action": "held_released"})
        return report

    def _decide(self, run: FinishedRun) -> RunSettlement:
        schedule = run.schedule
        try:
            grid = self.grid_after(schedule) if schedule is not None else _no_grid
            return settlement_of(run, grid)
        except Exception:  # a schedule is its own failure domain
            logger.warning("run %s settled without moving its schedule, whose trigger cannot "
                           "be built", quoted_name(run.execution.key),
                           extra={"action": "settle_failed"})
            return RunSettlement(key=run.execution.key,
                                 schedule_name=run.execution.schedule_name, version=None)


def _no_grid(instant: datetime) -> tuple[datetime | None, datetime | None]:
    raise LookupError("no schedule")
