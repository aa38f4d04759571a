"""Ended runs settled on their schedules, for run policies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.settlement import FinishedRun, RunSettlement, SettleReport


class Settlements(Protocol):
    """The two store operations of a settle pass: the runs that ended, and their
    settlement."""

    def finished_runs(self, limit: int) -> list[FinishedRun]:
        """Up to ``limit`` runs whose end waits to be applied to their schedule: ``settled``
        False, and ended as :func:`goatbeat_celery.core.rules.policies.execution_end` says (a
        worker's end, a lost verdict, or never sent), earliest end first, each with its
        schedule as :meth:`ScheduleReads.get_schedule` reads it (None if deleted). Reads only;
        cost grows with ``limit`` and the unsettled runs, never with the schedules."""
        ...

    def settle_runs(self, settlements: Sequence[RunSettlement], *,
                    lease: LeaseGrant) -> SettleReport:
        """Apply the ends of runs to their schedules, in one transaction fenced by ``lease``
        (LeaseLost if stale, nothing changed). For each settlement whose run is still
        unsettled: with a ``version``, only while the schedule still has it (else the run is
        left for a later pass), write ``consecutive_failures`` and the next times, and with a
        ``paused_reason`` disable the schedule and record the reason, version + 1; then mark
        the run settled. Last, for every schedule named, turn the claim it holds back
        (``held``) into ``claimed`` when
        :func:`goatbeat_celery.core.rules.settlement.held_to_release` says so. Returns what it
        wrote."""
        ...
