"""The scheduling loop: lease, resubmit, claim, submit, and how long to sleep.

One :meth:`Engine.tick` does the work of DESIGN §4. It never imports Celery or a database
driver: the store, the lease manager and the submitter are injected, and only their protocols
are known here. The engine claims, prunes and decides how long to sleep; it leaves the lease to
:mod:`~goatbeat_celery.core.loop.leadership`, what each due schedule claims to
:mod:`~goatbeat_celery.core.loop.planner`, the backfills to
:mod:`~goatbeat_celery.core.loop.backfill_driver`, the broker to
:mod:`~goatbeat_celery.core.loop.submission` and building triggers to
:mod:`~goatbeat_celery.core.loop.trigger_cache`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from goatbeat_celery.core.loop.alerts import AlertWatcher, Quiet
from goatbeat_celery.core.loop.backfill_driver import BackfillDriver
from goatbeat_celery.core.loop.leadership import STORE_RETRY, Leadership, ShardLeadership
from goatbeat_celery.core.loop.observer import EngineObserver, NullObserver
from goatbeat_celery.core.loop.planner import Planner
from goatbeat_celery.core.loop.settlement import RunSettler
from goatbeat_celery.core.loop.store_errors import report_store_error
from goatbeat_celery.core.loop.submission import InFlight, SubmissionPipeline
from goatbeat_celery.core.loop.trigger_cache import TriggerCache
from goatbeat_celery.core.protocols import (
    AlertLog,
    LeaseManager,
    RunLog,
    ScheduleStore,
    TaskSubmitter,
)
from goatbeat_celery.core.rules.controls import bounded_first
from goatbeat_celery.core.rules.misfire import first_occurrence
from goatbeat_celery.core.rules.runs import RunState
from goatbeat_celery.core.rules.shards import Shard, member_lease_name
from goatbeat_celery.core.rules.triggers import TriggerRegistry
from goatbeat_celery.core.rules.validation import reason_text
from goatbeat_celery.core.types.errors import (
    ConfigurationError,
    GoatbeatError,
    LeaseLost,
    StoreError,
    StoreUnavailable,
    failure_reason,
)
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSpec, SyncEntry, SyncReport, quoted_name
from goatbeat_celery.core.types.tick import (
    ClaimResult,
    Dispatch,
    DueBatch,
    PlannedClaim,
    SetAside,
    Waiting,
    set_aside_delay,
)

logger = logging.getLogger(__name__)

#: A batch in which nothing moved (rows locked by an edit) is read again after this pause.
NOTHING_MOVED_PAUSE = 0.05
#: The first batch a look claims is this small, and each next one twice the last, up to
#: ``batch_size``: the first messages leave after a short claim, while the next, larger batch
#: is claimed beside their sending.
FIRST_BATCH = 25
PRUNE_EVERY = 60.0
#: After a prune that found nothing to delete: history older than the retention is only
#: written as time passes, so an idle leader asks this seldom.
PRUNE_IDLE_EVERY = 600.0
#: A periodic look (pruning, lost runs) due this soon is taken with the wake at hand rather
#: than with a wake of its own a moment later.
TIMER_SLACK = 0.5
#: Runs marked lost in one look at most; a full look comes back soon for the rest.
LOST_BATCH = 1000
#: While a backfill has occurrences left, the leader comes back for its next step this soon:
#: each tick dispatches the live schedules first, so a long backfill only ever waits for them.
BACKFILL_PAUSE = 0.1


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
        self.config_schedules = tuple(config_schedules)
        self.observer: EngineObserver = observer or NullObserver()
        # Schedules whose set-aside the store refused to record, left alone here until then.
        self._aside_locally: dict[str, float] = {}
        self._mono = monotonic
        self._next_prune = 0.0
        # Whether the last prune left rows to delete: only then does pruning wake the leader;
        # else it waits for a wake at hand (no promise is made of when history goes).
        self._prune_more = False
        self._next_lost_look = 0.0
        # The fencing token whose lease began when this leader started judging runs with
        # tracking on, and that instant (core.rules.runs.lost_verdict's tracked_since).
        self._tracking_from: tuple[int, datetime] | None = None
        # Quiet wakes: the fencing token of the last full look, the next due instant known,
        # and whether anything was heard since.
        self._looked_under: int | None = None
        # How many full looks were begun: an alert cycle begun after the last one's claims
        # has seen them all (core.loop.alerts).
        self._full_looks = 0
        self._known_due: datetime | None = None
        self._news = True
        # Whether a run the leader may have to mark lost may be in the store; false only while
        # the store says none is (Waiting.open_runs).
        self._open_runs = True
        self._closed = False
        # The last store instant read and the monotonic time it was read at: a resubmission's
        # record needs the store's "now", not its (old) claimed_at.
        self._store_seen: tuple[datetime, float] | None = None
        self.last_sync: SyncReport | None = None
        self._declared = False  # a config declared since the last sync, synced at the next tick
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
        self._submissions = SubmissionPipeline(
            store=store, submitter=submitter, settings=settings, observer=self.observer,
            time_left=lambda: self._leadership.time_left(), store_now=self._store_now,
            set_aside=self._set_aside, monotonic=monotonic)
        self._trigger_cache = TriggerCache(self.triggers)
        self._planner = Planner(
            store=store, settings=settings, triggers=self._trigger_cache,
            observer=self.observer, config_schedules=self.config_schedules,
            # Rows written through the API (or by SQL) may only send allowed tasks.
            task_allowed=task_allowed or (lambda task: True))
        self._backfills = BackfillDriver(
            store=store, settings=settings, planner=self._planner,
            submissions=self._submissions, observer=self.observer, is_leader=self.is_leader,
            drop_expired=self._drop_expired)
        #: Judges the schedules' alerts (core.loop.alerts) where the store keeps them; None:
        #: no alerts.
        self.alerts = None if alerts is None else AlertWatcher(
            store=alerts, settings=settings, observer=self.observer, monotonic=monotonic,
            every_cycle_full=settings.shards > 1)
        self._settler = RunSettler(store=store, grid_after=self._planner.grid_after,
                                   observer=self.observer, batch_size=settings.batch_size)

    # -- state ---------------------------------------------------------------------------
    @property
    def grant(self) -> LeaseGrant | None:
        """The lease grant this replica holds, if any (with shards, that of the shard being
        dispatched, else shard 0's); it leads once its config is synced under it too
        (:meth:`is_leader`)."""
        return self._leadership.grant

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
        self._sync_declared()
        if self.shards is not None:
            return self._sharded_tick(self.shards)
        leadership = self._leadership
        if leadership.renew_due():
            unsynced = leadership.renew()
            if unsynced is not None:
                self._sync_config(unsynced)
        if not self.is_leader():
            return self._until(leadership.next_renew)
        return self._lead()

    def _sharded_tick(self, shards: ShardLeadership) -> float:
        """Look at the sharding when due, then dispatch each shard led, one after the other:
        each under its own grant, the global work with shard 0."""
        if shards.renew_due():
            for leadership in shards.renew():
                self._leadership = leadership
                self._sync_config(leadership.grant)
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
            if self._heard_nothing():
                waiting = self._ask_what_waits()
                sleep = self._quiet_wake(waiting)
                if sleep is not None:
                    return sleep
            self._news = False  # what is heard from here on calls for another look
            self._full_looks += 1
            next_due, store_now = self._dispatch(waiting)
        except LeaseLost:
            leadership.lose("fencing token refused")
            return 0.0
        except StoreError as exc:
            self._news = True
            report_store_error(logger, "store error while dispatching: %s", exc, exc=exc,
                               action="store_error")
            return min(STORE_RETRY, self._until(self._next_renew()))
        if grant is not None:
            self._looked_under = grant.token
        self._known_due = next_due
        if self._submissions.backing_off():
            self._news = True  # the claims left to resend wait for a full look
        return self._sleep_for(next_due, store_now)

    def _heard_nothing(self) -> bool:
        """Whether this wake may start from what the store says waits (a quiet wake, or a
        full look that skips what it says is empty): on a store that wakes the leader on every
        change it must act on, when nothing was heard since a full look made under the same
        grant, nothing known is due and nothing waits to be sent again. The answer covers all
        a full look reads, so a row written by hand without notifying is found at the next
        wake too. With several shards every wake looks at everything."""
        grant = self._leadership.grant
        if (self.shards is not None or not self.store.wakes_on_every_change or self._news
                or grant is None or self._looked_under != grant.token
                or self._submissions.backing_off() or self._submissions.resend_now):
            return False
        now = self._store_now()
        return now is not None and not _due(self._known_due, now)

    def _ask_what_waits(self) -> Waiting:
        """The store's answer to what waits (one round trip at most: PostgreSQL's renewal
        brings it along)."""
        waiting = self.store.waiting()
        self._store_seen = (waiting.now, self._mono())
        self._known_due, self._open_runs = waiting.next_due_at, waiting.open_runs
        return waiting

    def _quiet_wake(self, waiting: Waiting) -> float | None:
        """A wake with no news: None when something waits (a run due, an end to settle, a
        claim to send, an active backfill), else the periodic looks that are due (pruning,
        lost runs while a run may be lost, alerts) and the sleep until the next thing known."""
        if (waiting.unsettled or waiting.claimed or waiting.backfills
                or _due(waiting.next_due_at, waiting.now)):
            return None
        self._prune(waiting.now)
        if self._mark_lost():
            self._news = True  # their ends are settled by the next look
        self._look_at_alerts(Quiet(waiting, self._full_looks))
        return self._sleep_for(waiting.next_due_at, waiting.now)

    def _next_renew(self) -> float:
        return self._leadership.next_renew if self.shards is None else self.shards.next_check

    def _renew_due(self) -> bool:
        return self._leadership.renew_due() if self.shards is None else self.shards.renew_due()

    def _does_global_work(self) -> bool:
        """Config sync, settling runs, lost runs, pruning: shard 0's leader's."""
        return self._shard is None or self._shard.does_global_work

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking early on a store notification (edit, release)."""
        if seconds <= 0:
            return False
        try:
            woken = self.store.wait(seconds)
        except Exception as exc:  # a StoreError, or anything else: never end the loop here
            logger.warning("store wait failed: %s", exc, extra={"action": "store_error"})
            time.sleep(min(seconds, STORE_RETRY))
            return False
        if woken:
            self._news = True
            if self.alerts is not None:
                self.alerts.changes_heard()
            if self.shards is not None:
                self.shards.ask_soon()
            else:
                self._leadership.ask_soon()
        return woken

    def close(self) -> None:
        """Stop leading and release the lease (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self.shards is not None:
            self.shards.release()
        else:
            self._leadership.release()

    # -- config sync ---------------------------------------------------------------------
    def declare(self, config_schedules: Sequence[ScheduleSpec],
                triggers: TriggerRegistry | None = None) -> None:
        """This replica's config is now ``config_schedules`` (built by ``triggers`` if given):
        synced under the grant held at the next tick, else when a lease is next taken."""
        if triggers is not None:
            self.triggers = triggers
            self._trigger_cache.registry = triggers
            self._trigger_cache.clear()
        self.config_schedules = tuple(config_schedules)
        self._planner.trust(self.config_schedules)
        self._declared = True

    def _sync_declared(self) -> None:
        leadership = self._leadership if self.shards is None else self.shards.leaderships[0]
        if self._declared and leadership.holds():
            self._sync_config(leadership.grant, leadership)

    def _sync_config(self, grant: LeaseGrant | None,
                     leadership: Leadership | None = None) -> None:
        if grant is None:
            return
        self._declared = False  # what is read below is synced, or synced again on failure
        try:
            now = self.store.now()
            self._store_seen = (now, self._mono())
            entries = [entry for spec in self.config_schedules
                       if (entry := self._sync_entry(spec, now)) is not None]
            prune = {"prune_after": self.settings.config_prune_grace} if (
                self.settings.config_prune) else {}
            report = self.store.sync_config(entries, lease=grant, **prune)
        except LeaseLost:
            (leadership or self._leadership).lose("fencing token refused during config sync")
            return
        except StoreError as exc:
            # Still holding the lease, config pending: synced again after the next renewal.
            report_store_error(logger, "config sync failed, retrying: %s", exc, exc=exc,
                               action="config_sync_failed")
            if leadership is not None:
                self._declared = True
            return
        (leadership or self._leadership).config_synced()
        self._news = True  # the sync may have moved what is due
        self.last_sync = report
        logger.info(
            "config sync: %d created, %d updated, %d unchanged, %d disabled",
            len(report.created), len(report.updated), len(report.unchanged),
            len(report.disabled), extra={"action": "config_synced"},
        )
        for name in report.deleted:
            logger.warning("config schedule %r deleted: out of beat_schedule and unchanged for "
                           "goatbeat_config_prune_grace (%s)", name,
                           self.settings.config_prune_grace, extra={"action": "config_pruned"})
        for name in report.conflicts:
            logger.warning("config entry %r left alone: a schedule of that name was created "
                           "through the API", name, extra={"action": "config_conflict"})

    def _sync_entry(self, spec: ScheduleSpec, now: datetime) -> SyncEntry | None:
        try:
            trigger = self._trigger_cache.get(spec.trigger)
        except ConfigurationError as exc:
            # Config is validated before the engine starts; this guards embedders that skip it.
            logger.error("config schedule %r skipped: %s", spec.name, exc,
                         extra={"action": "config_invalid"})
            return None
        offset = spec.effective_offset()
        occurrence, run = bounded_first(
            lambda instant: first_occurrence(trigger, instant, offset), now, spec)
        return SyncEntry(spec=spec, next_occurrence_at=occurrence, next_run_at=run)

    # -- dispatch ------------------------------------------------------------------------
    def _dispatch(self, waiting: Waiting | None = None) -> tuple[datetime | None, datetime]:
        """Resubmit, then claim and submit batch after batch; returns the next due instant
        and the store's clock it was read with. ``waiting``: what the store said waits at this
        wake, when nothing was heard since; the ends to settle and the claims to send are read
        only when it says some wait (the same predicates, core.types.tick.Waiting)."""
        grant = self._leadership.grant
        assert grant is not None
        submissions = self._submissions
        planner = self._planner
        plan = planner.plan
        global_work = self._does_global_work()
        if waiting is None:
            # Unknown: the lost-run look asks the store. With an answer, runs sent from here
            # on are looked at from the next lost-run look, as after a quiet wake: none of
            # them can be lost yet.
            self._open_runs = True
        # Ends first: a fixed delay or a backoff moves a schedule before it is claimed, and a
        # held run released here goes out with the pending ones.
        if global_work and (waiting is None or waiting.unsettled):
            self._settle_runs(grant)
        if not submissions.backing_off() and (waiting is None or waiting.claimed):
            self._resubmit_pending(grant)
        # Nothing was due when the wake asked, and no end was settled since (which could have
        # moved a schedule): the first due read would answer what that answer did, the same
        # earliest instant of the same schedules.
        known = None
        if waiting is not None and not waiting.unsettled and not _due(waiting.next_due_at,
                                                                      waiting.now):
            known = DueBatch(now=waiting.now, schedules=(), next_due_at=waiting.next_due_at)
        batch_size = min(FIRST_BATCH, self.settings.batch_size)
        # One batch goes to the broker on a helper thread while the next one is claimed: the
        # broker's round trips and the database's overlap instead of adding up.
        inflight = InFlight(submissions)
        try:
            while True:
                if known is not None:
                    batch, known = known, None
                else:
                    batch = self.store.due_schedules(batch_size, shard=self._shard)
                    self._store_seen = (batch.now, self._mono())
                batch_size = min(batch_size * 2, self.settings.batch_size)
                if not batch.schedules or not self.is_leader():
                    inflight.settle()
                    next_due = batch.next_due_at
                    # Backfills only once the live schedules due are claimed and sent; each
                    # by its schedule's shard's leader, which alone resends its claims.
                    if (self.is_leader() and (waiting is None or waiting.backfills)
                            and self._backfills.drain(grant, self._shard)):
                        soon = batch.now + timedelta(seconds=BACKFILL_PAUSE)
                        next_due = soon if next_due is None else min(next_due, soon)
                    if global_work:
                        self._prune(batch.now)
                        self._mark_lost()
                        self._look_at_alerts()
                    return next_due, batch.now
                claims: list[PlannedClaim] = []
                asides: list[SetAside] = []
                calendars = planner.calendars_of(batch.schedules)
                for schedule in batch.schedules:
                    if self._left_alone(schedule.name):
                        continue
                    planned = plan(schedule, batch.now, calendars)
                    if isinstance(planned, SetAside):
                        asides.append(planned)
                    else:
                        claims.append(planned)
                moved = self._set_aside(asides, grant)
                result = self._claim(claims, grant)
                for name in result.conflicts:
                    logger.info("schedule %s was edited while being claimed; the edit wins",
                                quoted_name(name), extra={"action": "claim_conflict"})
                if result.skipped:
                    self._skipped(result.skipped)
                if result.dispatches:
                    self.observer.claimed(result.dispatches)
                    logger.debug("claimed %d occurrences", len(result.dispatches),
                                 extra={"action": "claimed"})
                    inflight.settle()
                    fresh = self._drop_expired(result.dispatches)
                    if fresh and not submissions.backing_off():
                        inflight.start(fresh, grant)
                if result.advanced + moved == 0:
                    # Nothing moved (rows locked by an edit in progress): read again shortly.
                    inflight.settle()
                    return batch.now + timedelta(seconds=NOTHING_MOVED_PAUSE), batch.now
                if self._renew_due():
                    inflight.settle()
                    return batch.now, batch.now
        finally:
            if inflight.busy:
                # Leaving on an error: still wait for the batch on the wire, but let the first
                # error be the one reported.
                try:
                    inflight.settle()
                except GoatbeatError as exc:
                    logger.warning("store error after a submission: %s", exc,
                                   extra={"action": "store_error"})

    # -- run policies ----------------------------------------------------------------------
    def _settle_runs(self, grant: LeaseGrant) -> None:
        """Apply the ends of runs to their schedules (core.loop.settlement); whatever one pass
        meets, new claims still go out."""
        try:
            report = self._settler.settle(grant)
            if self.shards is not None and (report.released or self._settler.moved):
                # A schedule moved or a held run released may be another replica's to send:
                # wake the other shards' leaders rather than leave it to their next look.
                self.store.notify()
        except (LeaseLost, StoreUnavailable):
            raise
        except Exception as exc:
            logger.error("could not apply the ends of runs to their schedules: %s",
                         failure_reason(exc), extra={"action": "settle_failed"})

    def _skipped(self, executions: Sequence[Execution]) -> None:
        for execution in executions:
            logger.info("occurrence %s of schedule %s skipped: %s", execution.key,
                        quoted_name(execution.schedule_name), execution.last_error,
                        extra={"action": "occurrence_skipped"})
        self.observer.skipped(executions)

    def _left_alone(self, name: str) -> bool:
        until = self._aside_locally.get(name)
        if until is None:
            return False
        if self._mono() < until:
            return True
        del self._aside_locally[name]
        return False

    def _set_aside(self, entries: Sequence[SetAside], grant: LeaseGrant) -> int:
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
                return sum(self._set_aside([entry], grant) for entry in entries)
            # The store refuses even to record why: leave that schedule alone here until its
            # retry time rather than meet it at the head of every batch.
            logger.error("could not record why schedule %s is set aside: %s",
                         quoted_name(entries[0].schedule_name), failure_reason(exc),
                         extra={"action": "set_aside_failed"})
            self._aside_locally[entries[0].schedule_name] = (
                self._mono() + set_aside_delay(0).total_seconds())
            return 1
        for entry in entries:
            retry_at = changed.get(entry.schedule_name)
            if retry_at is None:
                # Edited meanwhile (the edit may be the fix): read it again in a moment, not
                # in the very next batch.
                self._aside_locally[entry.schedule_name] = self._mono() + STORE_RETRY
                continue
            logger.error("schedule %s set aside until %s: %s", quoted_name(entry.schedule_name),
                         retry_at.isoformat(), entry.reason, extra={"action": "set_aside"})
            self.observer.set_aside(entry.schedule_name, entry.reason)
        return len(changed)

    def _claim(self, claims: Sequence[PlannedClaim], grant: LeaseGrant) -> ClaimResult:
        """Claim in one transaction; if the database refuses it, claim each half apart, down to
        the one schedule it refuses, which is set aside. Only an outage or a lost lease stops
        the batch."""
        if not claims:
            return ClaimResult(dispatches=())
        try:
            return self.store.claim(claims, lease=grant)
        except (LeaseLost, StoreUnavailable):
            raise
        except Exception as exc:
            if len(claims) == 1:
                claim = claims[0]
                moved = self._set_aside([SetAside(
                    schedule_name=claim.schedule_name, version=claim.version,
                    reason=f"the database refused its claim: {failure_reason(exc)}")], grant)
                return ClaimResult(dispatches=(), advanced=moved)
            middle = len(claims) // 2
            first = self._claim(claims[:middle], grant)
            second = self._claim(claims[middle:], grant)
            return ClaimResult(
                dispatches=first.dispatches + second.dispatches,
                advanced=first.advanced + second.advanced,
                conflicts=first.conflicts + second.conflicts,
                duplicates=first.duplicates + second.duplicates,
                missed=first.missed + second.missed,
            )

    def _resubmit_pending(self, grant: LeaseGrant) -> None:
        batch_size = self.settings.batch_size
        while self.is_leader():
            try:
                pending = self.store.take_pending(lease=grant, limit=batch_size,
                                                  shard=self._shard)
            except (LeaseLost, StoreUnavailable):
                raise
            except Exception as exc:
                # Whatever the pending rows hold, new claims still go out.
                logger.error("could not read the executions left claimed: %s",
                             failure_reason(exc), extra={"action": "resubmit_failed"})
                return
            if not pending:
                return
            # A manual run is queued as a claim for the leader to send: its first send is no
            # resubmission after a crash.
            manual = sum(1 for d in pending if d.execution.manual and d.execution.attempts <= 1)
            if manual:
                logger.info("sending %d manual runs", manual, extra={"action": "manual_run"})
            if len(pending) > manual:
                logger.info("resubmitting %d claimed occurrences under their keys",
                            len(pending) - manual, extra={"action": "resubmit"})
            fresh = self._drop_expired(pending)
            if (fresh and not self._submissions.submit(fresh, grant)) \
                    or len(pending) < batch_size:
                return

    def _drop_expired(self, dispatches: Sequence[Dispatch]) -> list[Dispatch]:
        """Those of ``dispatches`` still within their starting deadline; the others are
        recorded ``expired`` and never sent (a worker would drop them anyway, and an outage's
        backlog must not be replayed)."""
        now = self._store_now()
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

    def _store_now(self) -> datetime | None:
        """The store's clock as last read, moved on by the local time elapsed since."""
        if self._store_seen is None:
            return None
        seen, at = self._store_seen
        return seen + timedelta(seconds=self._mono() - at)

    def _prune(self, now: datetime) -> None:
        if self._mono() < self._next_prune - TIMER_SLACK:
            return
        before = now - self.settings.retention
        deleted = self.store.prune(before=before, limit=self.settings.prune_batch)
        # A full batch means more are waiting: come back soon rather than in a minute.
        self._prune_more = deleted >= self.settings.prune_batch
        self._next_prune = self._mono() + (1.0 if self._prune_more
                                           else PRUNE_EVERY if deleted else PRUNE_IDLE_EVERY)
        if deleted:
            logger.info("pruned %d rows of history (executions, backfills, audit entries, "
                        "outbox events) older than %s", deleted, before.isoformat(),
                        extra={"action": "pruned"})

    def _mark_lost(self) -> int:
        """Once per heartbeat interval, end the runs whose worker went silent or that never
        started (core.rules.runs.lost_verdict: lost, or of unknown outcome where the workers are not
        known to track runs), so that nothing waits on them forever; returns how many. Skipped
        while the store says no run may be lost (a quiet wake's Waiting.open_runs)."""
        if self.runs is None or self._mono() < self._next_lost_look - TIMER_SLACK:
            return 0
        settings = self.settings
        interval = settings.heartbeat_interval.total_seconds()
        if not self._open_runs:
            self._next_lost_look = self._mono() + interval
            return 0
        self._resend_unstarted()
        ended = self.runs.mark_lost(silent_for=settings.run_lost_after,
                                    unstarted_for=settings.run_start_timeout,
                                    tracked_since=self._tracked_since(), limit=LOST_BATCH)
        self._next_lost_look = self._mono() + (1.0 if len(ended) >= LOST_BATCH else interval)
        lost = [execution for execution in ended if execution.run_state is RunState.LOST]
        if lost:
            first = lost[0]
            logger.warning("marked %d runs lost (%s: %s%s)", len(lost), first.key,
                           first.run_error, ", ..." if len(lost) > 1 else "",
                           extra={"action": "run_lost", "count": len(lost)})
        for execution in ended:
            # An unknown outcome is what every untracked run ends with: nothing to warn about.
            verdict = "lost" if execution.run_state is RunState.LOST else "unknown"
            logger.debug("run %s %s: %s", execution.key, verdict, execution.run_error,
                         extra={"action": f"run_{verdict}", "key": execution.key})
        return len(ended)

    def _look_at_alerts(self, quiet: Quiet | None = None) -> None:
        """When due, judge one page of schedules' alerts (core.loop.alerts), after the due
        runs were sent: only a run falling due during the look (bounded by alert_batch)
        waits for it. ``quiet``: in a wake with no news, what the store said waits."""
        if self.alerts is not None and self.alerts.due(TIMER_SLACK):
            self.alerts.safe_look(self._leadership.grant, self._tracked_since(),
                                  full_looks=self._full_looks, quiet=quiet)

    def _resend_unstarted(self) -> int:
        """Before judging runs lost, put back to claimed, in the leader's fenced transaction,
        the runs sent to tracking workers that none started in time and that are still within
        their deadline (core.rules.runs.resend_due); the pending resubmission sends them under
        their keys at once. Returns how many."""
        grant = self._leadership.grant
        tracked_since = self._tracked_since()
        # Looked for even with the setting at 0: a schedule's own run_resends may ask.
        if self.runs is None or grant is None or tracked_since is None:
            return 0
        resent = self.runs.resend_unstarted(
            lease=grant, unstarted_for=self.settings.run_start_timeout,
            tracked_since=tracked_since, resends=self.settings.run_resends, limit=LOST_BATCH)
        if not resent:
            return 0
        first = resent[0]
        logger.warning("sending again %d runs no worker started (%s: %s%s)", len(resent),
                       first.key, first.last_error, ", ..." if len(resent) > 1 else "",
                       extra={"action": "run_resent", "count": len(resent)})
        self.observer.runs_resent(resent)
        # Sent by the next look's resubmission, which comes at once; with shards, by the
        # leader of each one's shard, which the notification wakes.
        self._news = True
        self._submissions.resend_now = True
        if self.shards is not None:
            self.store.notify()
        return len(resent)

    def _tracked_since(self) -> datetime | None:
        """From when this leader knows the workers track runs (None: it does not): the start
        of its lease, so that a run sent before, perhaps by a leader whose workers did not
        track runs, is never judged lost for the report it was not going to get."""
        grant = self._leadership.grant
        if not self.settings.track_runs or grant is None:
            return None
        if self._tracking_from is None or self._tracking_from[0] != grant.token:
            # The first grant of a token seen here was taken (or renewed) a ttl before it
            # expires: its start, or later, which only spares more runs.
            self._tracking_from = (grant.token, grant.expires_at - self.settings.lease_ttl)
        return self._tracking_from[1]

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
            if self._prune_more:
                candidates.append(self._until(self._next_prune, capped=capped))
            if self.runs is not None:
                candidates.append(self._until(self._next_lost_look, capped=capped))
            if self.alerts is not None:
                candidates.append(self._until(self.alerts.next_look, capped=capped))
        if next_due is not None:
            until_due = (next_due - store_now).total_seconds()
            if self._store_seen is not None and self._store_seen[0] == store_now:
                # Time spent since that clock was read (the last batch's submission, pruning)
                # is already gone: without this the loop wakes that much late.
                until_due -= self._mono() - self._store_seen[1]
            candidates.append(max(0.0, until_due))
        if self._submissions.backing_off():
            candidates.append(self._until(self._submissions.backoff_until))
        if self._submissions.resend_now:
            self._submissions.resend_now = False
            candidates.append(0.0)
        return max(0.0, min(candidates))


def _due(next_due: datetime | None, now: datetime) -> bool:
    """Whether a run known to be due at ``next_due`` is due at ``now``, or so nearly that this
    wake should take it."""
    return next_due is not None and (next_due - now).total_seconds() <= TIMER_SLACK
