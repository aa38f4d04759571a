"""Driving the stored backfills: the leader's share of each tick once the live schedules are
sent. The rules of a backfill (its windows, which occurrences its mode runs) are
:mod:`~goatbeat_celery.core.rules.backfill`'s; this module reads the active ones, plans and claims
their next steps and sends what those claimed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from goatbeat_celery.core.loop.observer import EngineObserver
from goatbeat_celery.core.loop.planner import Planner
from goatbeat_celery.core.loop.submission import SubmissionPipeline
from goatbeat_celery.core.protocols import ScheduleStore
from goatbeat_celery.core.rules.backfill import (
    BACKFILLS_PER_TICK,
    Backfill,
    BackfillStep,
    choose_runs,
    next_window,
    stored_problems,
)
from goatbeat_celery.core.rules.defaults import own_or_default
from goatbeat_celery.core.rules.shards import Shard
from goatbeat_celery.core.rules.validation import reason_text
from goatbeat_celery.core.types.claims import Dispatch
from goatbeat_celery.core.types.errors import (
    ConfigurationError,
    LeaseLost,
    StoreError,
    StoreUnavailable,
    failure_reason,
)
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import quoted_name

logger = logging.getLogger(__name__)


class BackfillDriver:
    """Works on the active backfills, a step of each at a time, for the engine's leader."""

    def __init__(
        self,
        *,
        store: ScheduleStore,
        settings: Settings,
        planner: Planner,
        submissions: SubmissionPipeline,
        observer: EngineObserver,
        is_leader: Callable[[], bool],
        drop_expired: Callable[[Sequence[Dispatch]], list[Dispatch]],
    ) -> None:
        self.store = store
        self.settings = settings
        self.planner = planner
        self.submissions = submissions
        self.observer = observer
        self._is_leader = is_leader
        self._drop_expired = drop_expired

    def drain(self, grant: LeaseGrant, shard: Shard | None) -> bool:
        """One step of each active backfill of ``shard``, oldest first, until the tick has
        sent the ``backfill_per_tick`` setting's worth (the first step always goes, its size
        its own ``per_tick``); returns whether any has occurrences left. A backfill that cannot
        be worked on is set aside with its reason; the others, and the live schedules, go
        on."""
        submissions = self.submissions
        if submissions.backing_off():
            return False  # the broker is down: live claims wait too
        try:
            active = self.store.active_backfills(BACKFILLS_PER_TICK, shard=shard)
        except (LeaseLost, StoreUnavailable):
            raise
        except Exception as exc:
            logger.error("could not read the active backfills: %s", failure_reason(exc),
                         extra={"action": "backfill_failed"})
            return False
        more = False
        sent = 0
        for backfill in active:
            if (not self._is_leader() or submissions.backing_off()
                    or sent >= self.settings.backfill_per_tick):
                return True
            try:
                step = self.step(backfill)
                result = self.store.claim_backfill(step, lease=grant)
            except (LeaseLost, StoreUnavailable):
                raise
            except StoreError as exc:
                # Nothing was written: the same step is planned again at the next wake-up.
                logger.warning("backfill %d of schedule %s: the database refused its step, "
                               "tried again later: %s", backfill.id,
                               quoted_name(backfill.schedule_name), failure_reason(exc),
                               extra={"action": "backfill_retry"})
                continue
            except Exception as exc:  # the row, or its schedule, cannot run as stored
                self._fail(backfill, failure_reason(exc), grant)
                continue
            if step.done:
                logger.info("backfill %d of schedule %s done", backfill.id,
                            quoted_name(backfill.schedule_name),
                            extra={"action": "backfill_done"})
            else:
                more = True
            sent += len(result.dispatches)
            if result.dispatches:
                self.observer.claimed(result.dispatches)
                logger.info("backfill %d of schedule %s: sending %d occurrences", backfill.id,
                            quoted_name(backfill.schedule_name), len(result.dispatches),
                            extra={"action": "backfill_claimed"})
                fresh = self._drop_expired(result.dispatches)
                if fresh:
                    submissions.submit(fresh, grant)
        return more

    def step(self, backfill: Backfill) -> BackfillStep:
        """The next step of ``backfill``: its next window of occurrences, and which of them
        its mode runs. Raises (ConfigurationError, ScheduleNotFound) when it cannot run."""
        problems = stored_problems(backfill)
        if problems:
            raise ConfigurationError(problems, subject="backfill")
        schedule = self.store.get_schedule(backfill.schedule_name)
        # The schedule's own rules, as for its live runs: a row that cannot be planned, or a
        # task the allow-list does not cover, sends nothing.
        trigger = self.planner.runnable_trigger(schedule)
        count = own_or_default(backfill.per_tick, self.settings.backfill_per_tick)
        window, done = next_window(backfill, trigger.next_after, count)
        existing = (self.store.occurrence_executions(
            backfill.schedule_name, min(window), max(window)) if window else [])
        return BackfillStep(
            backfill_id=backfill.id, schedule_name=backfill.schedule_name,
            examined_before=backfill.examined, examined=len(window),
            cursor=window[-1] if window else None,
            runs=tuple(choose_runs(backfill, window, existing)), done=done)

    def _fail(self, backfill: Backfill, reason: str, grant: LeaseGrant) -> None:
        logger.error("backfill %d of schedule %s set aside: %s", backfill.id,
                     quoted_name(backfill.schedule_name), reason,
                     extra={"action": "backfill_set_aside"})
        try:
            self.store.fail_backfill(backfill.id, reason_text(reason), lease=grant)
        except (LeaseLost, StoreUnavailable):
            raise
        except Exception as exc:
            logger.error("could not record why backfill %d is set aside: %s", backfill.id,
                         failure_reason(exc), extra={"action": "backfill_failed"})
