"""Claiming a batch of due schedules: plan each, set aside those that cannot run, claim the rest.

One schedule's trouble never holds the others: a batch the database refuses is claimed half by
half down to the one schedule it refuses, which is set aside; a schedule whose set-aside the
store cannot even record is left alone here until its retry time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from goatbeat_celery.core.loop.leadership import STORE_RETRY
from goatbeat_celery.core.loop.observer import EngineObserver
from goatbeat_celery.core.loop.planner import Planner
from goatbeat_celery.core.loop.store_clock import StoreClock
from goatbeat_celery.core.protocols import ScheduleStore
from goatbeat_celery.core.rules.validation import reason_text
from goatbeat_celery.core.types.claims import ClaimResult, Dispatch, DueBatch, PlannedClaim
from goatbeat_celery.core.types.errors import LeaseLost, StoreUnavailable, failure_reason
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.set_aside import SetAside, set_aside_delay
from goatbeat_celery.core.types.spec import quoted_name

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class PlannedBatch:
    """A batch's schedules planned: the claims to make and the set-asides to record."""

    claims: tuple[PlannedClaim, ...]
    asides: tuple[SetAside, ...]


class Claimer:
    """Claims the due schedules of a batch under a grant.

    Contract: :meth:`claim_batch` returns the dispatches claimed and how many schedules moved
    out of the due set (claimed or set aside); zero means rows were locked (an edit in
    progress). Only a lost lease or a store outage raises. It is :meth:`plan_batch` then
    :meth:`claim_planned`, which a leader reading ahead calls apart: planned at a due
    instant, claimed at it (``not_before``; a store clock still before it claims nothing and
    says so in the result's ``early``). :meth:`drop_expired` records ``expired`` the
    dispatches past their starting deadline and returns the others.
    """

    def __init__(self, *, store: ScheduleStore, planner: Planner, observer: EngineObserver,
                 clock: StoreClock, monotonic: Callable[[], float]) -> None:
        self.store = store
        self.planner = planner
        self.observer = observer
        self.clock = clock
        self._mono = monotonic
        # Schedules whose set-aside the store refused to record, by the monotonic instant
        # until which they are left alone here.
        self.left_alone_until: dict[str, float] = {}

    def claim_batch(self, batch: DueBatch, grant: LeaseGrant) -> tuple[tuple[Dispatch, ...], int]:
        dispatches, moved, _early = self.claim_planned(self.plan_batch(batch), grant)
        return dispatches, moved

    def plan_batch(self, batch: DueBatch) -> PlannedBatch:
        """The claims and set-asides of ``batch``'s schedules, planned at ``batch.now``."""
        claims: list[PlannedClaim] = []
        asides: list[SetAside] = []
        calendars = self.planner.calendars_of(batch.schedules)
        plan, now, left_alone = self.planner.plan, batch.now, self.left_alone_until
        for schedule in batch.schedules:
            if left_alone and self._left_alone(schedule.name):
                continue
            planned = plan(schedule, now, calendars)
            if isinstance(planned, SetAside):
                asides.append(planned)
            else:
                claims.append(planned)
        return PlannedBatch(claims=tuple(claims), asides=tuple(asides))

    def claim_planned(self, planned: PlannedBatch, grant: LeaseGrant,
                      not_before: datetime | None = None
                      ) -> tuple[tuple[Dispatch, ...], int, datetime | None]:
        """Record the set-asides and claim the claims of ``planned``: the dispatches, how
        many schedules moved, and the store's clock if it was still before ``not_before``
        (then nothing was claimed; the set-asides are recorded)."""
        moved = self.set_aside(planned.asides, grant)
        result = self.claim(planned.claims, grant, not_before)
        if result.early is not None:
            return (), moved, result.early
        for name in result.conflicts:
            logger.info("schedule %s was edited while being claimed; the edit wins",
                        quoted_name(name), extra={"action": "claim_conflict"})
        if result.skipped:
            for execution in result.skipped:
                logger.info("occurrence %s of schedule %s skipped: %s", execution.key,
                            quoted_name(execution.schedule_name), execution.last_error,
                            extra={"action": "occurrence_skipped"})
            self.observer.skipped(result.skipped)
        if result.dispatches:
            self.observer.claimed(result.dispatches)
            logger.debug("claimed %d occurrences", len(result.dispatches),
                         extra={"action": "claimed"})
        return result.dispatches, result.advanced + moved, None

    def _left_alone(self, name: str) -> bool:
        until = self.left_alone_until.get(name)
        if until is None:
            return False
        if self._mono() < until:
            return True
        del self.left_alone_until[name]
        return False

    def set_aside(self, entries: Sequence[SetAside], grant: LeaseGrant) -> int:
        """Record set-asides; returns how many schedules this moved out of the due set."""
        if not entries:
            return 0
        entries = [replace(entry, reason=reason_text(entry.reason)) for entry in entries]
        try:
            changed = self.store.set_aside(entries, lease=grant)
        except (LeaseLost, StoreUnavailable):
            raise
        except Exception as exc:
            if len(entries) > 1:
                # One row the database refuses must not keep the others' reasons unrecorded.
                return sum(self.set_aside([entry], grant) for entry in entries)
            # The store refuses even to record why: leave that schedule alone here until its
            # retry time rather than meet it at the head of every batch.
            logger.error("could not record why schedule %s is set aside: %s",
                         quoted_name(entries[0].schedule_name), failure_reason(exc),
                         extra={"action": "set_aside_failed"})
            self.left_alone_until[entries[0].schedule_name] = (
                self._mono() + set_aside_delay(0).total_seconds())
            return 1
        for entry in entries:
            retry_at = changed.get(entry.schedule_name)
            if retry_at is None:
                # Edited meanwhile (the edit may be the fix): read it again in a moment, not
                # in the very next batch.
                self.left_alone_until[entry.schedule_name] = self._mono() + STORE_RETRY
                continue
            logger.error("schedule %s set aside until %s: %s", quoted_name(entry.schedule_name),
                         retry_at.isoformat(), entry.reason, extra={"action": "set_aside"})
            self.observer.set_aside(entry.schedule_name, entry.reason)
        return len(changed)

    def claim(self, claims: Sequence[PlannedClaim], grant: LeaseGrant,
              not_before: datetime | None = None) -> ClaimResult:
        """Claim in one transaction; if the database refuses it, claim each half apart, down to
        the one schedule it refuses, which is set aside. Only an outage or a lost lease stops
        the batch."""
        if not claims:
            return ClaimResult(dispatches=())
        try:
            return self.store.claim(claims, lease=grant, not_before=not_before)
        except (LeaseLost, StoreUnavailable):
            raise
        except Exception as exc:
            if len(claims) == 1:
                claim = claims[0]
                moved = self.set_aside([SetAside(
                    schedule_name=claim.schedule_name, version=claim.version,
                    reason=f"the database refused its claim: {failure_reason(exc)}")], grant)
                return ClaimResult(dispatches=(), advanced=moved)
            middle = len(claims) // 2
            first = self.claim(claims[:middle], grant, not_before)
            if first.early is not None:
                return first
            second = self.claim(claims[middle:], grant, not_before)
            return ClaimResult(
                dispatches=first.dispatches + second.dispatches,
                advanced=first.advanced + second.advanced,
                conflicts=first.conflicts + second.conflicts,
                duplicates=first.duplicates + second.duplicates,
                missed=first.missed + second.missed,
            )

    def drop_expired(self, dispatches: Sequence[Dispatch]) -> list[Dispatch]:
        """Those of ``dispatches`` still within their starting deadline; the others are
        recorded ``expired`` and never sent (a worker would drop them anyway, and an outage's
        backlog must not be replayed)."""
        now = self.clock.now()
        if now is None:
            return list(dispatches)
        stale = [d.key for d in dispatches
                 if d.execution.expires_at is not None and d.execution.expires_at <= now]
        if not stale:
            return list(dispatches)
        self.store.mark_expired(stale)
        logger.warning("%d occurrences passed their starting deadline before they could be "
                       "sent; dropped (e.g. %s)", len(stale), quoted_name(stale[0]),
                       extra={"action": "expired"})
        dropped = set(stale)
        return [d for d in dispatches if d.key not in dropped]
