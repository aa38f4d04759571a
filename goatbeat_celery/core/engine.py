"""The scheduling loop: lease, resubmit, claim, submit, and how long to sleep.

One :meth:`Engine.tick` does the work of DESIGN §4. It never imports Celery or a database
driver: the store, the lease manager and the submitter are injected, and only their protocols
are known here. The engine plans, claims, prunes and decides how long to sleep; it leaves the
lease to :mod:`~goatbeat_celery.core.leadership`, the broker to
:mod:`~goatbeat_celery.core.submission` and building triggers to
:mod:`~goatbeat_celery.core.trigger_cache`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from goatbeat_celery.core.allowlist import sending_problems
from goatbeat_celery.core.backfill import (
    BACKFILLS_PER_TICK,
    Backfill,
    BackfillStep,
    choose_runs,
    next_window,
    stored_problems,
)
from goatbeat_celery.core.calendars import Calendar, resolve
from goatbeat_celery.core.controls import bound_claim, bounded_first
from goatbeat_celery.core.errors import (
    ConfigurationError,
    GoatbeatError,
    LeaseLost,
    StoreError,
    StoreUnavailable,
)
from goatbeat_celery.core.leadership import STORE_RETRY, Leadership, ShardLeadership
from goatbeat_celery.core.misfire import first_occurrence, plan_misfires
from goatbeat_celery.core.model import (
    ClaimResult,
    Dispatch,
    Execution,
    LeaseGrant,
    PlannedClaim,
    Schedule,
    ScheduleSpec,
    SetAside,
    SyncEntry,
    SyncReport,
    quoted_name,
    set_aside_delay,
)
from goatbeat_celery.core.observer import EngineObserver, NullObserver
from goatbeat_celery.core.policies import GridAfter, ScheduleMode
from goatbeat_celery.core.protocols import LeaseManager, ScheduleStore, TaskSubmitter
from goatbeat_celery.core.runs import RunLog
from goatbeat_celery.core.settings import Settings
from goatbeat_celery.core.settlement import RunSettler, claim_policies, fixed_delay_claim
from goatbeat_celery.core.shards import Shard
from goatbeat_celery.core.submission import (
    MAX_SEND_ATTEMPTS,
    SUBMIT_TIMEOUT_MAX,
    Submission,
    SubmissionPipeline,
)
from goatbeat_celery.core.trigger_cache import TriggerCache
from goatbeat_celery.core.triggers import TriggerRegistry
from goatbeat_celery.core.validation import reason_text

# The submission limits bound what a tick does with a batch; they are read from here too.
__all__ = ["MAX_SEND_ATTEMPTS", "SUBMIT_TIMEOUT_MAX", "Engine"]

logger = logging.getLogger(__name__)

#: A batch in which nothing moved (rows locked by an edit) is read again after this pause.
NOTHING_MOVED_PAUSE = 0.05
PRUNE_EVERY = 60.0
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
        # A config row is trusted (sent without the allow-list) only while it is exactly one of
        # this replica's entries: writing source='config' into a row must not make it so.
        self._config_specs = {spec.name: spec for spec in self.config_schedules}
        self._config_hashes: dict[str, str] = {}
        # Bound once: planning asks for every due row.
        self._own_entry = self._is_own_entry
        # Schedules whose set-aside the store refused to record, left alone here until then.
        self._aside_locally: dict[str, float] = {}
        self._mono = monotonic
        # Rows written through the API (or by SQL) may only send allowed tasks.
        self._task_allowed = task_allowed or (lambda task: True)
        self._next_prune = 0.0
        self._next_lost_look = 0.0
        self._closed = False
        # The last store instant read and the monotonic time it was read at: a resubmission's
        # record needs the store's "now", not its (old) claimed_at.
        self._store_seen: tuple[datetime, float] | None = None
        self.last_sync: SyncReport | None = None
        #: With several shards, which ones this replica leads (core.shards); None with one.
        self.shards: ShardLeadership | None = None
        #: The shard being dispatched (None with one shard) and its leadership; with one
        #: shard, the one leadership there is.
        self._shard: Shard | None = None
        self._leadership = Leadership(lease=lease, settings=settings, holder=holder,
                                      observer=self.observer, monotonic=monotonic)
        if settings.shards > 1:
            self.shards = ShardLeadership(lease=lease, settings=settings, holder=holder,
                                          observer=self.observer, monotonic=monotonic)
            self._leadership = self.shards.leaderships[0]
        self._submissions = SubmissionPipeline(
            store=store, submitter=submitter, settings=settings, observer=self.observer,
            time_left=lambda: self._leadership.time_left(), store_now=self._store_now,
            set_aside=self._set_aside, monotonic=monotonic)
        self._trigger_cache = TriggerCache(self.triggers)
        self._settler = RunSettler(store=store, grid_after=self._grid_after,
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
        try:
            next_due, store_now = self._dispatch()
        except LeaseLost:
            leadership.lose("fencing token refused")
            return 0.0
        except StoreError as exc:
            logger.warning("store error while dispatching: %s", exc,
                           extra={"action": "store_error"})
            return min(STORE_RETRY, self._until(self._next_renew()))
        return self._sleep_for(next_due, store_now)

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
    def _sync_config(self, grant: LeaseGrant | None) -> None:
        if grant is None:
            return
        try:
            now = self.store.now()
            self._store_seen = (now, self._mono())
            entries = [entry for spec in self.config_schedules
                       if (entry := self._sync_entry(spec, now)) is not None]
            report = self.store.sync_config(entries, lease=grant)
        except LeaseLost:
            self._leadership.lose("fencing token refused during config sync")
            return
        except StoreError as exc:
            # Still holding the lease, config pending: synced again after the next renewal.
            logger.warning("config sync failed, retrying: %s", exc,
                           extra={"action": "config_sync_failed"})
            return
        self._leadership.config_synced()
        self.last_sync = report
        logger.info(
            "config sync: %d created, %d updated, %d unchanged, %d disabled",
            len(report.created), len(report.updated), len(report.unchanged),
            len(report.disabled), extra={"action": "config_synced"},
        )
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
    def _dispatch(self) -> tuple[datetime | None, datetime]:
        """Resubmit, then claim and submit batch after batch; returns the next due instant
        and the store's clock it was read with."""
        grant = self._leadership.grant
        assert grant is not None
        submissions = self._submissions
        global_work = self._does_global_work()
        # Ends first: a fixed delay or a backoff moves a schedule before it is claimed, and a
        # held run released here goes out with the pending ones.
        if global_work:
            self._settle_runs(grant)
        if not submissions.backing_off():
            self._resubmit_pending(grant)
        batch_size = self.settings.batch_size
        # One batch goes to the broker on a helper thread while the next one is claimed: the
        # broker's round trips and the database's overlap instead of adding up.
        inflight: Submission | None = None
        try:
            while True:
                batch = self.store.due_schedules(batch_size, shard=self._shard)
                self._store_seen = (batch.now, self._mono())
                if not batch.schedules or not self.is_leader():
                    previous, inflight = inflight, None
                    submissions.settle(previous)
                    next_due = batch.next_due_at
                    # Backfills only once the live schedules due are claimed and sent; each
                    # by its schedule's shard's leader, which alone resends its claims.
                    if self.is_leader() and self._drain_backfills(grant):
                        soon = batch.now + timedelta(seconds=BACKFILL_PAUSE)
                        next_due = soon if next_due is None else min(next_due, soon)
                    if global_work:
                        self._prune(batch.now)
                        self._mark_lost()
                    return next_due, batch.now
                claims: list[PlannedClaim] = []
                asides: list[SetAside] = []
                calendars = self._calendars_of(batch.schedules)
                for schedule in batch.schedules:
                    if self._left_alone(schedule.name):
                        continue
                    planned = self._plan(schedule, batch.now, calendars)
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
                    previous, inflight = inflight, None
                    submissions.settle(previous)
                    fresh = self._drop_expired(result.dispatches)
                    if fresh and not submissions.backing_off():
                        inflight = submissions.start(fresh, grant)
                if result.advanced + moved == 0:
                    # Nothing moved (rows locked by an edit in progress): read again shortly.
                    previous, inflight = inflight, None
                    submissions.settle(previous)
                    return batch.now + timedelta(seconds=NOTHING_MOVED_PAUSE), batch.now
                if self._renew_due():
                    previous, inflight = inflight, None
                    submissions.settle(previous)
                    return batch.now, batch.now
        finally:
            if inflight is not None:
                # Leaving on an error: still wait for the batch on the wire, but let the first
                # error be the one reported.
                try:
                    submissions.settle(inflight)
                except GoatbeatError as exc:
                    logger.warning("store error after a submission: %s", exc,
                                   extra={"action": "store_error"})

    # -- backfills -----------------------------------------------------------------------
    def _drain_backfills(self, grant: LeaseGrant) -> bool:
        """One step of each active backfill, oldest first, until the tick has sent the
        ``backfill_per_tick`` setting's worth (the first step always goes, its size its own
        ``per_tick``); returns whether any has occurrences left. A backfill that cannot be
        worked on is set aside with its reason; the others, and the live schedules, go on."""
        submissions = self._submissions
        if submissions.backing_off():
            return False  # the broker is down: live claims wait too
        try:
            active = self.store.active_backfills(BACKFILLS_PER_TICK, shard=self._shard)
        except (LeaseLost, StoreUnavailable):
            raise
        except Exception as exc:
            logger.error("could not read the active backfills: %s", _reason(exc),
                         extra={"action": "backfill_failed"})
            return False
        more = False
        sent = 0
        for backfill in active:
            if (not self.is_leader() or submissions.backing_off()
                    or sent >= self.settings.backfill_per_tick):
                return True
            try:
                step = self._backfill_step(backfill)
                result = self.store.claim_backfill(step, lease=grant)
            except (LeaseLost, StoreUnavailable):
                raise
            except StoreError as exc:
                # Nothing was written: the same step is planned again at the next wake-up.
                logger.warning("backfill %d of schedule %s: the database refused its step, "
                               "tried again later: %s", backfill.id,
                               quoted_name(backfill.schedule_name), _reason(exc),
                               extra={"action": "backfill_retry"})
                continue
            except Exception as exc:  # the row, or its schedule, cannot run as stored
                self._fail_backfill(backfill, _reason(exc), grant)
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

    def _backfill_step(self, backfill: Backfill) -> BackfillStep:
        """The next step of ``backfill``: its next window of occurrences, and which of them
        its mode runs. Raises (ConfigurationError, ScheduleNotFound) when it cannot run."""
        problems = stored_problems(backfill)
        if problems:
            raise ConfigurationError(problems, subject="backfill")
        schedule = self.store.get_schedule(backfill.schedule_name)
        spec = schedule.spec
        # The schedule's own rules, as for its live runs: a row that cannot be planned, or a
        # task the allow-list does not cover, sends nothing.
        problems = list(schedule.damage) or spec.problems(payload=False)
        if problems:
            raise ConfigurationError(problems, subject="schedule")
        self._check_task(spec)
        trigger = self._trigger_cache.get(spec.trigger)
        count = backfill.per_tick or self.settings.backfill_per_tick
        window, done = next_window(backfill, trigger.next_after, count)
        existing = (self.store.occurrence_executions(
            backfill.schedule_name, min(window), max(window)) if window else [])
        return BackfillStep(
            backfill_id=backfill.id, schedule_name=backfill.schedule_name,
            examined_before=backfill.examined, examined=len(window),
            cursor=window[-1] if window else None,
            runs=tuple(choose_runs(backfill, window, existing)), done=done)

    def _fail_backfill(self, backfill: Backfill, reason: str, grant: LeaseGrant) -> None:
        logger.error("backfill %d of schedule %s set aside: %s", backfill.id,
                     quoted_name(backfill.schedule_name), reason,
                     extra={"action": "backfill_set_aside"})
        try:
            self.store.fail_backfill(backfill.id, reason_text(reason), lease=grant)
        except (LeaseLost, StoreUnavailable):
            raise
        except Exception as exc:
            logger.error("could not record why backfill %d is set aside: %s", backfill.id,
                         _reason(exc), extra={"action": "backfill_failed"})

    # -- one schedule at a time ----------------------------------------------------------
    def _calendars_of(self, schedules: Sequence[Schedule]) -> Mapping[str, Calendar]:
        """The calendars the due ``schedules`` observe, read afresh for each batch: one small
        read, only for batches that need it, so an edit applies at the next planning on every
        replica without a cache to invalidate."""
        names = {name for schedule in schedules for name in schedule.spec.calendars}
        return self.store.find_calendars(names) if names else {}

    def _plan(self, schedule: Schedule, now: datetime,
              calendars: Mapping[str, Calendar] | None = None) -> PlannedClaim | SetAside:
        """The claim for one due schedule, or, whatever goes wrong with this one row, the
        record that sets it aside: a schedule is its own failure domain."""
        try:
            return self._plan_claim(schedule, now, calendars or {})
        except Exception as exc:
            # A version that could not be read (stand-in -1) cannot be compared: set aside
            # whatever the version.
            version = schedule.version if schedule.version >= 0 else None
            return SetAside(schedule_name=schedule.name, version=version, reason=_reason(exc))

    def _plan_claim(self, schedule: Schedule, now: datetime,
                    calendars: Mapping[str, Calendar]) -> PlannedClaim:
        spec = schedule.spec
        # Resolved first: a calendar missing or unreadable sets the schedule aside before it
        # could run on a day it should not.
        exclusions = resolve(spec, calendars) if spec.calendars else None
        claim = self._unbounded_claim(schedule, now)
        if (spec.start_at is not None or spec.end_at is not None
                or schedule.paused_until is not None):
            bounded = bound_claim(claim, schedule, self._grid_after(schedule))
            if bounded.next_run_at is None and claim.next_run_at is not None:
                logger.info("schedule %s ends: its next run would fall after its end_at %s",
                            quoted_name(spec.name), _iso(spec.end_at),
                            extra={"action": "schedule_ended"})
            claim = bounded
        if exclusions is not None:
            claim = exclusions.exclude(claim)
        if spec.max_runs is not None:
            # Checked and counted by the store, in the claim's transaction.
            claim = replace(claim, max_runs=spec.max_runs)
            runs = len(claim.occurrences) - len(claim.excluded)
            if schedule.total_runs + runs >= spec.max_runs:
                logger.info("schedule %s ends: this claim reaches its max_runs (%d)",
                            quoted_name(spec.name), spec.max_runs,
                            extra={"action": "schedule_ended"})
        return claim

    def _unbounded_claim(self, schedule: Schedule, now: datetime) -> PlannedClaim:
        spec = schedule.spec
        settings = self.settings
        problems = list(schedule.damage) or spec.problems(payload=False)
        if problems:
            raise ConfigurationError(problems, subject="schedule")
        self._check_task(spec)
        trigger = self._trigger_cache.get(spec.trigger)
        offset = spec.effective_offset()
        first = schedule.next_occurrence_at
        if first is None:
            # Due without a next occurrence (a row edited by hand): start again from now.
            occurrence, run = first_occurrence(trigger, now, offset)
            logger.warning("schedule %s had no next occurrence; starting again at %s",
                           quoted_name(spec.name), None if run is None else run.isoformat(),
                           extra={"action": "restarted"})
            return PlannedClaim(schedule_name=spec.name, version=schedule.version,
                                occurrences=(), missed=0, next_occurrence_at=occurrence,
                                next_run_at=run)
        expires_after = spec.starting_deadline or settings.starting_deadline
        if spec.mode is ScheduleMode.FIXED_DELAY:
            return fixed_delay_claim(schedule, now, expires_after=expires_after,
                                     default_overlap=settings.overlap_policy)
        policy = spec.misfire_policy or settings.misfire_policy
        plan = plan_misfires(
            trigger=trigger,
            first=first,
            now=now,
            offset=offset,
            policy=policy,
            grace=(spec.misfire_grace if spec.misfire_grace is not None
                   else settings.misfire_grace),
            max_catchup=spec.max_catchup or settings.max_catchup,
        )
        if plan.missed:
            logger.warning("schedule %s missed %d occurrences (policy %s)", quoted_name(spec.name),
                           plan.missed, policy.value, extra={"action": "missed"})
            self.observer.missed(spec.name, plan.missed)
        upcoming = plan.next_occurrence
        return PlannedClaim(
            schedule_name=spec.name,
            version=schedule.version,
            occurrences=tuple((point, point + offset) for point in plan.run),
            missed=plan.missed,
            next_occurrence_at=upcoming,
            next_run_at=None if upcoming is None else upcoming + offset,
            expires_after=expires_after,
            **claim_policies(spec, settings.overlap_policy),
        )

    # -- run policies ----------------------------------------------------------------------
    def _settle_runs(self, grant: LeaseGrant) -> None:
        """Apply the ends of runs to their schedules (core.settlement); whatever one pass
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
                         _reason(exc), extra={"action": "settle_failed"})

    def _grid_after(self, schedule: Schedule) -> GridAfter:
        trigger = self._trigger_cache.get(schedule.spec.trigger)
        offset = schedule.spec.effective_offset()
        return lambda instant: first_occurrence(trigger, instant, offset)

    def _skipped(self, executions: Sequence[Execution]) -> None:
        for execution in executions:
            logger.info("occurrence %s of schedule %s skipped: %s", execution.key,
                        quoted_name(execution.schedule_name), execution.last_error,
                        extra={"action": "occurrence_skipped"})
        self.observer.skipped(executions)

    def _check_task(self, spec: ScheduleSpec) -> None:
        """Refuse a task the allow-list does not cover, unless the row is one of this
        replica's own config entries, exactly (core.allowlist)."""
        problems = sending_problems(spec, self._task_allowed, self._own_entry)
        if problems:
            raise ConfigurationError(problems)

    def _is_own_entry(self, spec: ScheduleSpec) -> bool:
        entry = self._config_specs.get(spec.name)
        if entry is None:
            return False
        if entry == replace(spec, enabled=entry.enabled):
            return True
        expected = self._config_hashes.get(spec.name)
        if expected is None:
            expected = self._config_hashes[spec.name] = entry.spec_hash()
        return spec.spec_hash() == expected

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
                         quoted_name(entries[0].schedule_name), _reason(exc),
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
                    reason=f"the database refused its claim: {_reason(exc)}")], grant)
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
                logger.error("could not read the executions left claimed: %s", _reason(exc),
                             extra={"action": "resubmit_failed"})
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
        self._next_prune = self._mono() + (1.0 if deleted >= self.settings.prune_batch
                                           else PRUNE_EVERY)
        if deleted:
            logger.info("pruned %d executions older than %s", deleted, before.isoformat(),
                        extra={"action": "pruned"})

    def _mark_lost(self) -> None:
        """Once per heartbeat interval, mark lost the runs whose worker went silent or that
        never started (core.runs.lost_verdict), so that nothing waits on them forever."""
        if self.runs is None or self._mono() < self._next_lost_look - TIMER_SLACK:
            return
        settings = self.settings
        lost = self.runs.mark_lost(silent_for=settings.run_lost_after,
                                   unstarted_for=settings.run_start_timeout, limit=LOST_BATCH)
        self._next_lost_look = self._mono() + (
            1.0 if len(lost) >= LOST_BATCH else settings.heartbeat_interval.total_seconds())
        if lost:
            first = lost[0]
            logger.warning("marked %d runs lost (%s: %s%s)", len(lost), first.key,
                           first.run_error, ", ..." if len(lost) > 1 else "",
                           extra={"action": "run_lost", "count": len(lost)})
            for execution in lost:
                logger.debug("run %s lost: %s", execution.key, execution.run_error,
                             extra={"action": "run_lost", "key": execution.key})

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
            candidates.append(self._until(self._next_prune, capped=capped))
            if self.runs is not None:
                candidates.append(self._until(self._next_lost_look, capped=capped))
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


def _iso(instant: datetime | None) -> str | None:
    return None if instant is None else instant.isoformat()


def _reason(exc: BaseException) -> str:
    """One line saying what went wrong, for logs and a schedule's recorded fault."""
    if isinstance(exc, ConfigurationError):
        return "; ".join(_unprefixed(problem) for problem in exc.problems)
    if isinstance(exc, GoatbeatError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _unprefixed(problem: str) -> str:
    # Problems of a spec start with "schedule '<name>': ", which the row already says.
    if problem.startswith("schedule ") and ": " in problem:
        return problem.split(": ", 1)[1]
    return problem
