"""The scheduling loop: lease, resubmit, claim, submit, and how long to sleep.

One :meth:`Engine.tick` does the work of DESIGN §4. It never imports Celery or a database
driver: the store, the lease manager and the submitter are injected, and only their protocols
are known here. The engine decides what each wake does and how long to sleep; it leaves the
lease to :mod:`~goatbeat_celery.core.loop.leadership`, claiming a batch to
:mod:`~goatbeat_celery.core.loop.claiming` (what each schedule claims to
:mod:`~goatbeat_celery.core.loop.planner`), the broker to
:mod:`~goatbeat_celery.core.loop.submission`, the backfills to
:mod:`~goatbeat_celery.core.loop.backfill_driver`, the config to
:mod:`~goatbeat_celery.core.loop.config_sync`, pruning, lost runs and alerts to
:mod:`~goatbeat_celery.core.loop.housekeeping`, and what a wake with no news may skip to
:mod:`~goatbeat_celery.core.loop.looks` and :mod:`~goatbeat_celery.core.loop.quiet_wakes`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime

from goatbeat_celery.core.loop.ahead import READ_AHEAD
from goatbeat_celery.core.loop.alerts import AlertWatcher, Quiet
from goatbeat_celery.core.loop.backfill_driver import BackfillDriver
from goatbeat_celery.core.loop.claiming import Claimer
from goatbeat_celery.core.loop.config_sync import ConfigSync
from goatbeat_celery.core.loop.dispatch import (
    BACKFILL_PAUSE,
    FIRST_BATCH,
    NOTHING_MOVED_PAUSE,
    Dispatcher,
)
from goatbeat_celery.core.loop.housekeeping import (
    LOST_BATCH,
    PRUNE_EVERY,
    PRUNE_IDLE_EVERY,
    Housekeeping,
)
from goatbeat_celery.core.loop.leadership import STORE_RETRY, Leadership, ShardLeadership
from goatbeat_celery.core.loop.looks import TIMER_SLACK, LookLedger
from goatbeat_celery.core.loop.observer import EngineObserver, NullObserver
from goatbeat_celery.core.loop.planner import Planner
from goatbeat_celery.core.loop.quiet_wakes import QuietWakes, nothing_waits
from goatbeat_celery.core.loop.settlement import RunSettler
from goatbeat_celery.core.loop.store_clock import StoreClock
from goatbeat_celery.core.loop.store_errors import report_store_error
from goatbeat_celery.core.loop.submission import SubmissionPipeline
from goatbeat_celery.core.loop.trigger_cache import TriggerCache
from goatbeat_celery.core.protocols import (
    AlertLog,
    LeaseManager,
    RunLog,
    ScheduleStore,
    TaskSubmitter,
)
from goatbeat_celery.core.rules.shards import Shard, member_lease_name
from goatbeat_celery.core.rules.triggers import TriggerRegistry
from goatbeat_celery.core.types.claims import Waiting
from goatbeat_celery.core.types.errors import (
    LeaseLost,
    StoreError,
)
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSpec, SyncReport

__all__ = ["BACKFILL_PAUSE", "FIRST_BATCH", "LOST_BATCH", "NOTHING_MOVED_PAUSE", "PRUNE_EVERY",
           "PRUNE_IDLE_EVERY", "TIMER_SLACK", "Engine"]

logger = logging.getLogger(__name__)


class Engine:
    """Hosts the scheduling loop for one replica.

    Call :meth:`tick` repeatedly and sleep (or :meth:`wait`) for the seconds it returns;
    call :meth:`close` on shutdown to release the lease so a standby takes over at once.
    """

    def __init__(
        self,
        *,
        store: ScheduleStore,
        lease: LeaseManager,
        submitter: TaskSubmitter,
        settings: Settings,
        holder: str,
        triggers: TriggerRegistry | None = None,
        config_schedules: Sequence[ScheduleSpec] = (),
        observer: EngineObserver | None = None,
        task_allowed: Callable[[str], bool] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        runs: RunLog | None = None,
        alerts: AlertLog | None = None,
    ) -> None:
        self.store = store
        #: Where workers record runs (the store, in practice): the leader marks the silent
        #: and never-started ones lost there. None: runs are not judged.
        self.runs = runs
        self.lease = lease
        self.submitter = submitter
        self.settings = settings
        self.holder = holder
        self.triggers = triggers or TriggerRegistry.default()
        self.observer: EngineObserver = observer or NullObserver()
        self._mono = monotonic
        self._closed = False
        self._clock = StoreClock(monotonic)
        self._looks = LookLedger()
        #: With several shards, which ones this replica leads (core.rules.shards); None with one.
        self.shards: ShardLeadership | None = None
        #: The shard being dispatched (None with one shard) and its leadership; with one
        #: shard, the one leadership there is.
        self._shard: Shard | None = None
        self._leadership = Leadership(
            lease=lease, settings=settings, holder=holder, observer=self.observer,
            monotonic=monotonic, member=member_lease_name(settings.lease_name, 1, holder))
        if settings.shards > 1:
            self.shards = ShardLeadership(lease=lease, settings=settings, holder=holder,
                                          observer=self.observer, monotonic=monotonic)
            self._leadership = self.shards.leaderships[0]
        self._trigger_cache = TriggerCache(self.triggers)
        self._config = ConfigSync(store=store, settings=settings, clock=self._clock,
                                  triggers=self._trigger_cache, schedules=config_schedules,
                                  on_synced=self._looks.heard)
        self._planner = Planner(
            store=store, settings=settings, triggers=self._trigger_cache,
            observer=self.observer, config_schedules=self._config.schedules,
            # Rows written through the API (or by SQL) may only send allowed tasks.
            task_allowed=task_allowed or (lambda task: True))
        self._claimer = Claimer(store=store, planner=self._planner, observer=self.observer,
                                clock=self._clock, monotonic=monotonic)
        self._submissions = SubmissionPipeline(
            store=store, submitter=submitter, settings=settings, observer=self.observer,
            time_left=lambda: self._leadership.time_left(), store_now=self._clock.now,
            set_aside=self._claimer.set_aside, monotonic=monotonic,
            triggers=self._trigger_cache)
        self._backfills = BackfillDriver(
            store=store, settings=settings, planner=self._planner,
            submissions=self._submissions, observer=self.observer, is_leader=self.is_leader,
            drop_expired=self._claimer.drop_expired)
        #: Judges the schedules' alerts (core.loop.alerts) where the store keeps them; None:
        #: no alerts.
        self.alerts = None if alerts is None else AlertWatcher(
            store=alerts, settings=settings, observer=self.observer, monotonic=monotonic,
            every_cycle_full=settings.shards > 1)
        self._housekeeping = Housekeeping(
            store=store, runs=runs, alerts=self.alerts, settings=settings,
            observer=self.observer, looks=self._looks, grant=lambda: self._leadership.grant,
            on_resent=self._runs_resent, monotonic=monotonic)
        self._settler = RunSettler(store=store, grid_after=self._planner.grid_after,
                                   observer=self.observer, batch_size=settings.batch_size)
        self._dispatcher = Dispatcher(
            store=store, settings=settings, clock=self._clock, claimer=self._claimer,
            submissions=self._submissions, backfills=self._backfills, settler=self._settler,
            housekeeping=self._housekeeping, sharded=self.shards is not None,
            is_leader=self.is_leader, renew_due=self._renew_due)
        self._wakes = QuietWakes(store=store, looks=self._looks, clock=self._clock,
                                 on_heard=self._heard)

    # -- state ---------------------------------------------------------------------------
    @property
    def grant(self) -> LeaseGrant | None:
        """The lease grant this replica holds, if any (with shards, that of the shard being
        dispatched, else shard 0's); it leads once its config is synced under it too
        (:meth:`is_leader`)."""
        return self._leadership.grant

    @property
    def config_schedules(self) -> tuple[ScheduleSpec, ...]:
        """The config schedules declared to this replica (:meth:`declare`)."""
        return self._config.schedules

    @property
    def last_sync(self) -> SyncReport | None:
        """The report of the last config sync made here, if any."""
        return self._config.last_sync

    def is_leader(self) -> bool:
        """True while holding a grant inside the local deadline (ttl - renew interval), with the
        config schedules synced under it: with shards, of any shard."""
        if self.shards is not None and self._shard is None:
            return self.shards.leads_any()
        return self._leadership.leads()

    def led_shards(self) -> list[int]:
        """The shards this replica leads now ([0] with one shard while it leads)."""
        if self.shards is None:
            return [0] if self._leadership.leads() else []
        return [shard.index for shard, _ in self.shards.leading()]

    # -- the loop ------------------------------------------------------------------------
    def tick(self) -> float:
        """Do whatever is due now; return the seconds until the next useful instant.

        Never raises: one schedule's trouble sets that schedule aside, a store or broker outage
        is waited out, and anything else is logged with its traceback and tried again."""
        if self._closed:
            return self.settings.max_interval.total_seconds()
        try:
            return self._tick()
        except Exception:
            logger.exception("unexpected error in the scheduling loop; retrying",
                             extra={"action": "tick_failed"})
            return min(STORE_RETRY, self.settings.max_interval.total_seconds())

    def _tick(self) -> float:
        first = self._leadership if self.shards is None else self.shards.leaderships[0]
        if self._config.pending and first.holds():
            self._config.sync(first, first.grant, retry=True)
        if self.shards is not None:
            return self._sharded_tick(self.shards)
        leadership = self._leadership
        if leadership.renew_due():
            unsynced = leadership.renew()
            if unsynced is not None:
                self._config.sync(leadership, unsynced)
        if not self.is_leader():
            return self._until(leadership.next_renew)
        return self._lead()

    def _sharded_tick(self, shards: ShardLeadership) -> float:
        """Look at the sharding when due, then dispatch each shard led, one after the other:
        each under its own grant, the global work with shard 0."""
        if shards.renew_due():
            for leadership in shards.renew():
                self._config.sync(leadership, leadership.grant)
        sleeps = [self._until(shards.next_check)]
        try:
            for shard, leadership in list(shards.leading()):
                self._shard, self._leadership = shard, leadership
                sleeps.append(self._lead())
        finally:
            self._shard, self._leadership = None, shards.leaderships[0]
        return min(sleeps)

    def _lead(self) -> float:
        """Dispatch what is due under the leadership at hand; return how long to sleep."""
        leadership = self._leadership
        grant = leadership.grant
        try:
            waiting = None
            if not self._may_start_quiet():
                self._dispatcher.forget_ahead()
            elif self._dispatcher.read_ahead_for is None:
                waiting = self._wakes.ask()
                self._housekeeping.open_runs = waiting.open_runs
                ahead = self._reads_ahead_of(waiting)
                if ahead or nothing_waits(waiting):
                    # A wake with no news: only the periodic looks that are due, and the
                    # first batch of a due instant that close read ahead of it.
                    if self._housekeeping.all_due(waiting.now,
                                                  Quiet(waiting, self._looks.looks_begun)):
                        self._looks.heard()  # their ends are settled by the next look
                    elif ahead:
                        assert grant is not None
                        self._dispatcher.read_ahead(grant, waiting)
                    return self._sleep_for(waiting.next_due_at, waiting.now)
            else:
                # Read ahead on a wake with no news, and nothing heard since: what waited
                # then waits now, and the due instant has come.
                waiting = self._dispatcher.waiting_ahead
            self._looks.begin()
            assert grant is not None
            next_due, store_now = self._dispatcher.dispatch(
                grant, self._shard, waiting, global_work=self._does_global_work())
        except LeaseLost:
            leadership.lose("fencing token refused")
            return 0.0
        except StoreError as exc:
            self._looks.heard()
            report_store_error(logger, "store error while dispatching: %s", exc, exc=exc,
                               action="store_error")
            return min(STORE_RETRY, self._until(self._next_renew()))
        self._looks.finished(None if grant is None else grant.token, next_due)
        if self._submissions.backing_off():
            self._looks.heard()  # the claims left to resend wait for a full look
        return self._sleep_for(next_due, store_now)

    def _may_start_quiet(self) -> bool:
        """Whether this wake may start from what the store says waits (core.loop.quiet_wakes);
        never with several shards (every wake looks at everything), nor while claims wait to
        be sent again."""
        grant = self._leadership.grant
        if (self.shards is not None or self._submissions.backing_off()
                or self._submissions.resend_now):
            return False
        return self._wakes.may_start_quiet(None if grant is None else grant.token)

    def _heard(self) -> None:
        """A change the store announced: the alerts and the lease are looked at soon too."""
        if self.alerts is not None:
            self.alerts.changes_heard()
        if self.shards is not None:
            self.shards.ask_soon()
        else:
            self._leadership.ask_soon()

    def _runs_resent(self) -> None:
        """Runs were put back to be sent again: by the next look's resubmission, which comes
        at once; with shards, by the leader of each one's shard, which the notification wakes."""
        self._looks.heard()
        self._submissions.resend_now = True
        if self.shards is not None:
            self.store.notify()

    def _next_renew(self) -> float:
        return self._leadership.next_renew if self.shards is None else self.shards.next_check

    def _renew_due(self) -> bool:
        return self._leadership.renew_due() if self.shards is None else self.shards.renew_due()

    def _reads_ahead(self) -> bool:
        """Whether this leader reads ahead of due instants (core.loop.ahead): on a store that
        wakes it on every change (what is read stays true until something is heard), with one
        shard."""
        return self.shards is None and self.store.wakes_on_every_change

    def _reads_ahead_of(self, waiting: Waiting) -> bool:
        """Whether a wake told ``waiting`` reads ahead: nothing but a run waits, due within
        twice READ_AHEAD by the store's clock but not yet."""
        next_due = waiting.next_due_at
        if (next_due is None or waiting.unsettled or waiting.claimed or waiting.backfills
                or not self._reads_ahead()):
            return False
        until_due = (next_due - waiting.now).total_seconds()
        return 0 < until_due <= 2 * READ_AHEAD

    def _does_global_work(self) -> bool:
        """Config sync, settling runs, lost runs, pruning: shard 0's leader's."""
        return self._shard is None or self._shard.does_global_work

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking early on a store notification (edit, release)."""
        return self._wakes.wait(seconds)

    def close(self, *, release: bool = True) -> None:
        """Stop leading and release the lease (idempotent). With ``release`` false nothing is
        asked of the store: the lease goes when this process's session ends, or expires."""
        if self._closed:
            return
        self._closed = True
        if not release:
            return
        if self.shards is not None:
            self.shards.release()
        else:
            self._leadership.release()

    def declare(self, config_schedules: Sequence[ScheduleSpec],
                triggers: TriggerRegistry | None = None) -> None:
        """This replica's config is now ``config_schedules`` (built by ``triggers`` if given):
        synced under the grant held at the next tick, else when a lease is next taken."""
        if triggers is not None:
            self.triggers = triggers
            self._trigger_cache.registry = triggers
            self._trigger_cache.clear()
        self._config.declare(config_schedules)
        self._planner.trust(self._config.schedules)

    # -- sleeping ------------------------------------------------------------------------
    def _until(self, instant: float, *, capped: bool = True) -> float:
        left = instant - self._mono()
        if capped:
            left = min(left, self.settings.max_interval.total_seconds())
        return max(0.0, left)

    def _sleep_for(self, next_due: datetime | None, store_now: datetime) -> float:
        """The leader's sleep: until the next thing it knows of. A store that wakes it on every
        change it must act on spares it the max_interval look for what it could not hear, so
        an idle leader wakes only to renew its lease (and for its periodic looks)."""
        capped = not self.store.wakes_on_every_change
        candidates = [self._until(self._next_renew(), capped=capped)]
        if self._does_global_work():  # the periodic looks are shard 0's
            candidates += [self._until(t, capped=capped) for t in self._housekeeping.timers()]
        if next_due is not None:
            # Time spent since that clock was read (the last batch's submission, pruning) is
            # already gone: without this the loop wakes that much late.
            until_due = (next_due - store_now).total_seconds() - self._clock.spent_since(
                store_now)
            if (until_due > READ_AHEAD and self._dispatcher.read_ahead_for != next_due
                    and self._reads_ahead()):
                until_due -= READ_AHEAD  # to read ahead of it (closer: at it, as before)
            candidates.append(max(0.0, until_due))
        if self._submissions.backing_off():
            candidates.append(self._until(self._submissions.backoff_until))
        if self._submissions.resend_now:
            self._submissions.resend_now = False
            candidates.append(0.0)
        return max(0.0, min(candidates))
