"""The leader's settle pass: the engine reads the runs that ended
(:meth:`~goatbeat_celery.core.protocols.ScheduleStore.finished_runs`), asks
:func:`~goatbeat_celery.core.rules.settlement.settlement_of` what each one writes, and hands the
answers to :meth:`~goatbeat_celery.core.protocols.ScheduleStore.settle_runs`, which applies them
in the leader's fenced transaction and releases the claim ``buffer_one`` held back.

The rules (what a run's end writes, which held claim goes) are
:mod:`goatbeat_celery.core.rules.settlement`; this module only runs the pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol

from goatbeat_celery.core.loop.observer import EngineObserver
from goatbeat_celery.core.rules.policies import GridAfter
from goatbeat_celery.core.rules.settlement import (
    RESUME_CLEARS,
    claim_policies,
    fixed_delay_claim,
    held_to_release,
    settlement_of,
)
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.settlement import FinishedRun, RunSettlement, SettleReport
from goatbeat_celery.core.types.spec import quoted_name

# The rules are re-exported: they were first written here.
__all__ = ["RESUME_CLEARS", "RunSettler", "SettlingStore", "claim_policies",
           "fixed_delay_claim", "held_to_release", "settlement_of"]

logger = logging.getLogger(__name__)


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
