"""The scheduling loop: lease, resubmit, claim, submit, and how long to sleep.

One :meth:`Engine.tick` does the work of DESIGN §4. It never imports Celery or a database
driver: the store, the lease manager and the submitter are injected, and only their protocols
are known here.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from goatbeat_celery.core.errors import (
    ConfigurationError,
    GoatbeatError,
    LeaseLost,
    StoreError,
    StoreUnavailable,
)
from goatbeat_celery.core.misfire import first_occurrence, plan_misfires
from goatbeat_celery.core.model import (
    ClaimResult,
    Dispatch,
    LeaseGrant,
    PlannedClaim,
    Schedule,
    ScheduleSource,
    ScheduleSpec,
    SetAside,
    SubmitResult,
    SyncEntry,
    SyncReport,
    quoted_name,
    set_aside_delay,
)
from goatbeat_celery.core.observer import EngineObserver, NullObserver, OccurrenceRecord
from goatbeat_celery.core.protocols import LeaseManager, ScheduleStore, TaskSubmitter
from goatbeat_celery.core.settings import Settings
from goatbeat_celery.core.triggers import Trigger, TriggerRegistry
from goatbeat_celery.core.validation import reason_text

logger = logging.getLogger(__name__)

#: A message refused for itself (it cannot be built, say) is abandoned once it has been tried
#: this many times; a broker outage never counts against it.
MAX_SEND_ATTEMPTS = 5
#: A batch in which nothing moved (rows locked by an edit) is read again after this pause.
NOTHING_MOVED_PAUSE = 0.05
#: Leave this much of the local validity unused by a submission, for the bookkeeping after it.
SUBMIT_MARGIN = 0.25
#: Never let one submission call run longer than this, even with a long lease.
SUBMIT_TIMEOUT_MAX = 10.0
#: After a store error, try again this soon (bounded by the renew interval).
STORE_RETRY = 1.0
PRUNE_EVERY = 60.0
#: A standby asks for an expiring lease this long after its expiry on the store clock.
EXPIRY_MARGIN = 0.01
TRIGGER_CACHE_SIZE = 4096

#: What the broker did with a batch, and how long it took.
_Sent = tuple[SubmitResult, timedelta]


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
    ) -> None:
        self.store = store
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
        # Schedules whose set-aside the store refused to record, left alone here until then.
        self._aside_locally: dict[str, float] = {}
        self._mono = monotonic
        # Rows written through the API (or by SQL) may only send allowed tasks.
        self._task_allowed = task_allowed or (lambda task: True)
        self._grant: LeaseGrant | None = None
        self._deadline = 0.0
        self._next_renew = 0.0
        self._backoff = settings.retry_backoff.total_seconds()
        self._backoff_until = 0.0
        self._next_prune = 0.0
        self._closed = False
        self._trigger_cache: OrderedDict[Hashable, Trigger] = OrderedDict()
        # The last store instant read and the monotonic time it was read at: a resubmission's
        # record needs the store's "now", not its (old) claimed_at.
        self._store_seen: tuple[datetime, float] | None = None
        self.last_sync: SyncReport | None = None

    # -- state ---------------------------------------------------------------------------
    @property
    def grant(self) -> LeaseGrant | None:
        """The current lease grant, if this replica believes it leads."""
        return self._grant

    def is_leader(self) -> bool:
        """True while holding a grant and inside the local deadline (ttl - renew interval)."""
        return self._grant is not None and self._mono() < self._deadline

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
        if self._mono() >= self._next_renew:
            self._renew()
        if not self.is_leader():
            return self._until(self._next_renew)
        try:
            next_due, store_now = self._dispatch()
        except LeaseLost:
            self._lose("fencing token refused")
            return 0.0
        except StoreError as exc:
            logger.warning("store error while dispatching: %s", exc,
                           extra={"action": "store_error"})
            return min(STORE_RETRY, self._until(self._next_renew))
        return self._sleep_for(next_due, store_now)

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
        if woken and self._grant is None:
            # The notification may be a release: a standby asks for the lease now rather than
            # at its next renewal slot (up to lease_renew_interval away).
            self._next_renew = min(self._next_renew, self._mono())
        return woken

    def close(self) -> None:
        """Stop leading and release the lease (idempotent)."""
        if self._closed:
            return
        self._closed = True
        grant, self._grant = self._grant, None
        if grant is None:
            return
        try:
            released = self.lease.release(grant)
        except GoatbeatError as exc:
            logger.warning("could not release lease %r: %s", grant.name, exc,
                           extra={"action": "lease_release_failed"})
            return
        if released:
            logger.info("released lease %r (token %d)", grant.name, grant.token,
                        extra={"action": "lease_released"})
            self.observer.lease_lost(grant.name, self.holder, "released")

    # -- lease ---------------------------------------------------------------------------
    def _renew(self) -> None:
        settings = self.settings
        renew_interval = settings.lease_renew_interval.total_seconds()
        asked = self._mono()
        try:
            grant = self.lease.acquire(settings.lease_name, self.holder, settings.lease_ttl)
        except StoreError as exc:
            # StoreUnavailable is an outage; any other StoreError (say a missing GRANT) is not.
            what = "unreachable" if isinstance(exc, StoreUnavailable) else "refused"
            logger.warning("lease %r: store %s: %s", settings.lease_name, what, exc,
                           extra={"action": "lease_error"})
            self._next_renew = asked + min(STORE_RETRY, renew_interval)
            if self._grant is not None and asked >= self._deadline:
                self._lose(f"store {what} past the local deadline")
            return
        self._next_renew = asked + renew_interval
        if grant is None:
            if self._grant is not None:
                self._lose("taken by another replica")
            self._ask_again_at_expiry()
            return
        took_over = self._grant is None or grant.changed_holder
        self._grant = grant
        self._deadline = asked + settings.local_validity.total_seconds()
        if took_over:
            logger.info("acquired lease %r with token %d", grant.name, grant.token,
                        extra={"action": "lease_acquired"})
            self.observer.lease_acquired(grant)
            self._sync_config(grant)

    def _ask_again_at_expiry(self) -> None:
        """Refused: ask again when the holder's lease runs out, if that comes before the next
        renewal slot. A crashed leader is then replaced as its lease expires, not up to a
        renew interval later."""
        try:
            info = self.lease.inspect(self.settings.lease_name)
        except StoreError:
            return  # the regular slot will do
        if info is None or info.expires_at is None:
            return
        left = (info.expires_at - info.store_now).total_seconds() + EXPIRY_MARGIN
        self._next_renew = min(self._next_renew, self._mono() + max(0.0, left))

    def _lose(self, reason: str) -> None:
        grant, self._grant = self._grant, None
        self._next_renew = self._mono()
        if grant is not None:
            logger.warning("lost lease %r (token %d): %s", grant.name, grant.token, reason,
                           extra={"action": "lease_lost"})
            self.observer.lease_lost(grant.name, self.holder, reason)

    def _sync_config(self, grant: LeaseGrant) -> None:
        try:
            now = self.store.now()
            self._store_seen = (now, self._mono())
            entries = [entry for spec in self.config_schedules
                       if (entry := self._sync_entry(spec, now)) is not None]
            report = self.store.sync_config(entries, lease=grant)
        except LeaseLost:
            self._lose("fencing token refused during config sync")
            return
        except StoreError as exc:
            logger.warning("config sync failed, retrying: %s", exc,
                           extra={"action": "config_sync_failed"})
            self._grant = None  # take the lease "anew" on the next renew to sync again
            return
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
            trigger = self._trigger(spec)
        except ConfigurationError as exc:
            # Config is validated before the engine starts; this guards embedders that skip it.
            logger.error("config schedule %r skipped: %s", spec.name, exc,
                         extra={"action": "config_invalid"})
            return None
        occurrence, run = first_occurrence(trigger, now, spec.effective_offset())
        return SyncEntry(spec=spec, next_occurrence_at=occurrence, next_run_at=run)

    # -- dispatch ------------------------------------------------------------------------
    def _dispatch(self) -> tuple[datetime | None, datetime]:
        """Resubmit, then claim and submit batch after batch; returns the next due instant
        and the store's clock it was read with."""
        grant = self._grant
        assert grant is not None
        if self._mono() >= self._backoff_until:
            self._resubmit_pending(grant)
        batch_size = self.settings.batch_size
        # One batch goes to the broker on a helper thread while the next one is claimed: the
        # broker's round trips and the database's overlap instead of adding up.
        inflight: _Submission | None = None
        try:
            while True:
                batch = self.store.due_schedules(batch_size)
                self._store_seen = (batch.now, self._mono())
                if not batch.schedules or not self.is_leader():
                    previous, inflight = inflight, None
                    self._settle(previous)
                    self._prune(batch.now)
                    return batch.next_due_at, batch.now
                claims: list[PlannedClaim] = []
                asides: list[SetAside] = []
                for schedule in batch.schedules:
                    if self._left_alone(schedule.name):
                        continue
                    planned = self._plan(schedule, batch.now)
                    if isinstance(planned, SetAside):
                        asides.append(planned)
                    else:
                        claims.append(planned)
                moved = self._set_aside(asides, grant)
                result = self._claim(claims, grant)
                for name in result.conflicts:
                    logger.info("schedule %s was edited while being claimed; the edit wins",
                                quoted_name(name), extra={"action": "claim_conflict"})
                if result.dispatches:
                    self.observer.claimed(result.dispatches)
                    logger.debug("claimed %d occurrences", len(result.dispatches),
                                 extra={"action": "claimed"})
                    previous, inflight = inflight, None
                    self._settle(previous)
                    fresh = self._drop_expired(result.dispatches)
                    if fresh and self._mono() >= self._backoff_until:
                        inflight = _Submission(self, fresh, grant)
                if result.advanced + moved == 0:
                    # Nothing moved (rows locked by an edit in progress): read again shortly.
                    previous, inflight = inflight, None
                    self._settle(previous)
                    return batch.now + timedelta(seconds=NOTHING_MOVED_PAUSE), batch.now
                if self._mono() >= self._next_renew:
                    previous, inflight = inflight, None
                    self._settle(previous)
                    return batch.now, batch.now
        finally:
            if inflight is not None:
                # Leaving on an error: still wait for the batch on the wire, but let the first
                # error be the one reported.
                try:
                    self._settle(inflight)
                except GoatbeatError as exc:
                    logger.warning("store error after a submission: %s", exc,
                                   extra={"action": "store_error"})

    # -- one schedule at a time ----------------------------------------------------------
    def _plan(self, schedule: Schedule, now: datetime) -> PlannedClaim | SetAside:
        """The claim for one due schedule, or, whatever goes wrong with this one row, the
        record that sets it aside: a schedule is its own failure domain."""
        try:
            return self._plan_claim(schedule, now)
        except Exception as exc:
            # A version that could not be read (stand-in -1) cannot be compared: set aside
            # whatever the version.
            version = schedule.version if schedule.version >= 0 else None
            return SetAside(schedule_name=schedule.name, version=version, reason=_reason(exc))

    def _plan_claim(self, schedule: Schedule, now: datetime) -> PlannedClaim:
        spec = schedule.spec
        settings = self.settings
        problems = list(schedule.damage) or spec.problems(payload=False)
        if problems:
            raise ConfigurationError(problems, subject="schedule")
        self._check_task(spec)
        trigger = self._trigger(spec)
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
            expires_after=spec.starting_deadline or settings.starting_deadline,
        )

    def _check_task(self, spec: ScheduleSpec) -> None:
        """Refuse a task the allow-list does not cover, unless the row is one of this
        replica's own config entries, exactly."""
        if spec.source is ScheduleSource.CONFIG and self._is_own_entry(spec):
            return
        if self._task_allowed(spec.task):
            return
        if spec.source is ScheduleSource.CONFIG:
            raise ConfigurationError([
                f"source: marked 'config' but it is not this replica's beat_schedule entry "
                f"{spec.name!r} as configured, and task {spec.task!r} is not in "
                "goatbeat_allowed_tasks"])
        raise ConfigurationError(
            [f"task: {spec.task!r} is not in goatbeat_allowed_tasks; add it there"])

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

    def _trigger(self, spec: ScheduleSpec) -> Trigger:
        # A trigger depends on its kind and parameters only, so schedules sharing them (say
        # thousands of "every 60 s") share one object; the key is cheap to build per row.
        params = spec.trigger.params
        cache_key: Hashable
        try:
            cache_key = (spec.trigger.kind, *sorted(params.items()))
            hash(cache_key)
        except TypeError:  # a parameter that is a list or dict
            cache_key = (spec.trigger.kind, repr(sorted(params.items())))
        trigger = self._trigger_cache.get(cache_key)
        if trigger is None:
            trigger = self.triggers.build(spec.trigger)
            self._trigger_cache[cache_key] = trigger
            if len(self._trigger_cache) > TRIGGER_CACHE_SIZE:
                self._trigger_cache.popitem(last=False)
        else:
            self._trigger_cache.move_to_end(cache_key)
        return trigger

    def _resubmit_pending(self, grant: LeaseGrant) -> None:
        batch_size = self.settings.batch_size
        while self.is_leader():
            try:
                pending = self.store.take_pending(lease=grant, limit=batch_size)
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
            if (fresh and not self._submit(fresh, grant)) or len(pending) < batch_size:
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

    def _submit(self, dispatches: Sequence[Dispatch], grant: LeaseGrant) -> bool:
        """Submit and record; returns False when the broker failed (rows stay claimed)."""
        return self._record(dispatches, self._send(dispatches, grant), grant)

    def _send(self, dispatches: Sequence[Dispatch], grant: LeaseGrant) -> _Sent | None:
        """Hand ``dispatches`` to the broker and mark what it accepted (no observer call, no
        engine state changed: this may run on the submission thread). None: no time left."""
        remaining = self._deadline - self._mono() - SUBMIT_MARGIN
        if remaining <= 0:
            return None
        started = self._mono()
        result = self.submitter.submit(
            dispatches, token=grant.token, timeout=min(remaining, SUBMIT_TIMEOUT_MAX)
        )
        elapsed = timedelta(seconds=self._mono() - started)
        if result.accepted:
            self.store.mark_submitted(result.accepted)
        if result.failed or result.rejected:
            attempts = {d.key: d.execution.attempts for d in dispatches}
            self.store.record_failures(
                {**result.failed, **result.rejected},
                abandon=[key for key in result.rejected
                         if attempts.get(key, 0) >= MAX_SEND_ATTEMPTS],
            )
        return result, elapsed

    def _settle(self, submission: _Submission | None) -> bool:
        """Wait for a batch on the submission thread, then report it as :meth:`_submit` does."""
        if submission is None:
            return True
        return self._record(submission.dispatches, submission.result(), submission.grant)

    def _record(self, dispatches: Sequence[Dispatch], sent: _Sent | None,
                grant: LeaseGrant) -> bool:
        if sent is None:
            return False
        result, elapsed = sent
        abandoned = {d.key for d in dispatches
                     if d.key in result.rejected and d.execution.attempts >= MAX_SEND_ATTEMPTS}
        self._report(dispatches, set(result.accepted), {**result.failed, **result.rejected},
                     elapsed, abandoned)
        if result.rejected:
            self._rejected(dispatches, result.rejected, grant)
        if result.failed:
            first_error = next(iter(result.failed.values()))
            self._backoff_until = self._mono() + self._backoff
            logger.warning(
                "broker refused %d of %d messages (%s); retrying in %.1fs under the same keys",
                len(result.failed), len(dispatches), first_error, self._backoff,
                extra={"action": "submit_failed"},
            )
            self._backoff = min(self._backoff * 2,
                                self.settings.retry_backoff_max.total_seconds())
            return False
        self._backoff = self.settings.retry_backoff.total_seconds()
        return True

    def _rejected(self, dispatches: Sequence[Dispatch], rejected: dict[str, str],
                  grant: LeaseGrant) -> None:
        """Messages that could not be sent for themselves: each occurrence fails alone (given
        up after MAX_SEND_ATTEMPTS tries) and its schedule is set aside until it is fixed."""
        asides: dict[str, SetAside] = {}
        for dispatch in dispatches:
            error = rejected.get(dispatch.key)
            if error is None:
                continue
            execution = dispatch.execution
            given_up = execution.attempts >= MAX_SEND_ATTEMPTS
            logger.error("occurrence %s could not be sent (attempt %d%s): %s",
                         quoted_name(dispatch.key), execution.attempts,
                         ", abandoned" if given_up else "", error,
                         extra={"action": "submit_rejected"})
            if not execution.manual:
                asides[execution.schedule_name] = SetAside(
                    schedule_name=execution.schedule_name, version=None,
                    reason=f"its message could not be sent: {error}")
        try:
            self._set_aside(list(asides.values()), grant)
        except GoatbeatError as exc:
            logger.warning("could not set aside schedules whose messages were refused: %s",
                           exc, extra={"action": "store_error"})

    def _store_now(self) -> datetime | None:
        """The store's clock as last read, moved on by the local time elapsed since."""
        if self._store_seen is None:
            return None
        seen, at = self._store_seen
        return seen + timedelta(seconds=self._mono() - at)

    def _report(self, dispatches: Sequence[Dispatch], accepted: set[str],
                failures: dict[str, str], elapsed: timedelta,
                abandoned: set[str] | None = None) -> None:
        records = []
        store_now = self._store_now()
        for dispatch in dispatches:
            execution = dispatch.execution
            ok = dispatch.key in accepted
            submitted = None
            if ok:
                submitted = execution.claimed_at + elapsed
                if store_now is not None:
                    submitted = max(submitted, store_now)
            records.append(OccurrenceRecord(
                key=dispatch.key, schedule_name=execution.schedule_name,
                occurrence_at=execution.occurrence_at, due_at=execution.due_at,
                claimed_at=execution.claimed_at, submitted_at=submitted,
                lateness=None if submitted is None else submitted - execution.due_at,
                missed=execution.missed, token=execution.token, attempt=execution.attempts,
                manual=execution.manual, error=failures.get(dispatch.key),
                abandoned=dispatch.key in (abandoned or ()),
            ))
        self.observer.submitted(records)

    def _prune(self, now: datetime) -> None:
        if self._mono() < self._next_prune:
            return
        before = now - self.settings.retention
        deleted = self.store.prune(before=before, limit=self.settings.prune_batch)
        # A full batch means more are waiting: come back soon rather than in a minute.
        self._next_prune = self._mono() + (1.0 if deleted >= self.settings.prune_batch
                                           else PRUNE_EVERY)
        if deleted:
            logger.info("pruned %d executions older than %s", deleted, before.isoformat(),
                        extra={"action": "pruned"})

    # -- sleeping ------------------------------------------------------------------------
    def _until(self, instant: float) -> float:
        return max(0.0, min(instant - self._mono(), self.settings.max_interval.total_seconds()))

    def _sleep_for(self, next_due: datetime | None, store_now: datetime) -> float:
        candidates = [self._until(self._next_renew)]
        if next_due is not None:
            until_due = (next_due - store_now).total_seconds()
            if self._store_seen is not None and self._store_seen[0] == store_now:
                # Time spent since that clock was read (the last batch's submission, pruning)
                # is already gone: without this the loop wakes that much late.
                until_due -= self._mono() - self._store_seen[1]
            candidates.append(max(0.0, until_due))
        if self._backoff_until > self._mono():
            candidates.append(self._until(self._backoff_until))
        return max(0.0, min(candidates))


class _Submission:
    """One claimed batch handed to the broker (and marked) on a thread of its own."""

    def __init__(self, engine: Engine, dispatches: Sequence[Dispatch], grant: LeaseGrant) -> None:
        self.dispatches = dispatches
        self.grant = grant
        self._sent: _Sent | None = None
        self._error: BaseException | None = None
        # A daemon thread: every broker and database call in it is bounded in time anyway.
        self._thread = threading.Thread(target=self._run, args=(engine, grant),
                                        name="goatbeat-submit", daemon=True)
        self._thread.start()

    def _run(self, engine: Engine, grant: LeaseGrant) -> None:
        try:
            self._sent = engine._send(self.dispatches, grant)
        except BaseException as exc:  # re-raised in the loop's thread by result()
            self._error = exc

    def result(self) -> _Sent | None:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._sent


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
