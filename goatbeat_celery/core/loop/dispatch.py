"""One full look at the store: settle ends, resend what was left claimed, then claim and
submit batch after batch until nothing is due, then the backfills and the periodic looks."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from goatbeat_celery.core.loop.ahead import ReadAhead
from goatbeat_celery.core.loop.backfill_driver import BackfillDriver
from goatbeat_celery.core.loop.claiming import Claimer
from goatbeat_celery.core.loop.housekeeping import Housekeeping
from goatbeat_celery.core.loop.looks import due_by
from goatbeat_celery.core.loop.settlement import RunSettler
from goatbeat_celery.core.loop.store_clock import StoreClock
from goatbeat_celery.core.loop.submission import InFlight, SubmissionPipeline
from goatbeat_celery.core.protocols import ScheduleStore
from goatbeat_celery.core.rules.shards import Shard
from goatbeat_celery.core.types.claims import DueBatch, Waiting
from goatbeat_celery.core.types.errors import (
    GoatbeatError,
    LeaseLost,
    StoreUnavailable,
    failure_reason,
)
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.settings import Settings

logger = logging.getLogger(__name__)

#: A batch in which nothing moved (rows locked by an edit) is read again after this pause.
NOTHING_MOVED_PAUSE = 0.05
#: The first batch a look claims is this small, and each next one twice the last, up to
#: ``batch_size``: the first messages leave after a short claim, while the next, larger batch
#: is claimed beside their sending.
FIRST_BATCH = 25
#: While a backfill has occurrences left, the leader comes back for its next step this soon:
#: each tick dispatches the live schedules first, so a long backfill only ever waits for them.
BACKFILL_PAUSE = 0.1


class Dispatcher:
    """Makes the full looks of a leader.

    Contract: :meth:`dispatch` returns the next due instant known (None: none) and the store's
    clock it was read with; it stops early, returning at once, when leadership is lost
    (``is_leader``), when the lease is due for renewal (``renew_due``), or after a batch in
    which nothing moved. A lost lease or a store outage raises (LeaseLost, StoreError); one
    schedule's or one pass's trouble does not. ``sharded``: a change another shard's leader
    must act on is announced with the store's ``notify``.

    :meth:`read_ahead` reads and plans the first batch of a due instant before it comes
    (core.loop.ahead); the next :meth:`dispatch` under the same grant claims it at that instant
    instead of reading, unless :meth:`forget_ahead` was called (something was heard). A store
    clock still before the instant claims nothing: that dispatch returns the instant, and the
    batch waits for the next.
    """

    def __init__(self, *, store: ScheduleStore, settings: Settings, clock: StoreClock,
                 claimer: Claimer, submissions: SubmissionPipeline, backfills: BackfillDriver,
                 settler: RunSettler, housekeeping: Housekeeping, sharded: bool,
                 is_leader: Callable[[], bool], renew_due: Callable[[], bool]) -> None:
        self.store = store
        self.settings = settings
        self._clock = clock
        self._claimer = claimer
        self._submissions = submissions
        self._backfills = backfills
        self._settler = settler
        self._housekeeping = housekeeping
        self._sharded = sharded
        self._is_leader = is_leader
        self._renew_due = renew_due
        self._ahead: ReadAhead | None = None

    @property
    def read_ahead_for(self) -> datetime | None:
        """The due instant whose first batch is read ahead, if any."""
        return None if self._ahead is None else self._ahead.due_at

    @property
    def waiting_ahead(self) -> Waiting | None:
        """What the wake that read ahead was told waits, if a batch is read ahead."""
        return None if self._ahead is None else self._ahead.waiting

    def read_ahead(self, grant: LeaseGrant, waiting: Waiting) -> None:
        """Read the schedules due by ``waiting``'s next due instant (a first batch) and plan
        them at it.

        The loop's clock keeps the reading it had: the sleep to the instant is counted from
        the wake's short answer, read as it came, not from this read's clock, which is read
        only once its rows are decoded, a millisecond or two after the instant it names (the
        wake would come that much late)."""
        self._ahead = None
        due_at = waiting.next_due_at
        assert due_at is not None
        batch = self.store.due_schedules(min(FIRST_BATCH, self.settings.batch_size),
                                         until=due_at)
        at_due = DueBatch(now=due_at, schedules=batch.schedules, next_due_at=batch.next_due_at)
        self._ahead = ReadAhead(due_at=due_at, token=grant.token, waiting=waiting, batch=at_due,
                                planned=self._claimer.plan_batch(at_due))

    def forget_ahead(self) -> None:
        """Drop what was read ahead: it may no longer be what is due."""
        self._ahead = None

    def dispatch(self, grant: LeaseGrant, shard: Shard | None, waiting: Waiting | None, *,
                 global_work: bool) -> tuple[datetime | None, datetime]:
        """Resubmit, then claim and submit batch after batch; returns the next due instant
        and the store's clock it was read with. ``waiting``: what the store said waits at this
        wake, when nothing was heard since; the ends to settle and the claims to send are read
        only when it says some wait (the same predicates, core.types.claims.Waiting)."""
        submissions = self._submissions
        ahead, self._ahead = self._ahead, None
        from_ahead = ahead is not None
        if ahead is not None and (ahead.token != grant.token or shard is not None
                                  or not ahead.batch.schedules):
            ahead = None
        if waiting is None:
            # Unknown: the lost-run look asks the store. With an answer, runs sent from here
            # on are looked at from the next lost-run look, as after a quiet wake: none of
            # them can be lost yet.
            self._housekeeping.open_runs = True
        # Ends first: a fixed delay or a backoff moves a schedule before it is claimed, and a
        # held run released here goes out with the pending ones.
        if global_work and (waiting is None or waiting.unsettled):
            self._settle_runs(grant)
        if not submissions.backing_off() and (waiting is None or waiting.claimed):
            self._resubmit_pending(grant, shard)
        # Nothing was due when the wake asked, and no end was settled since (which could have
        # moved a schedule): the first due read would answer what that answer did, the same
        # earliest instant of the same schedules.
        batch_from_wake = None
        if not from_ahead and waiting is not None and not waiting.unsettled and not due_by(
                waiting.next_due_at, waiting.now):
            batch_from_wake = DueBatch(now=waiting.now, schedules=(),
                                       next_due_at=waiting.next_due_at)
        batch_size = min(FIRST_BATCH, self.settings.batch_size)
        # One batch goes to the broker on a helper thread while the next one is claimed: the
        # broker's round trips and the database's overlap instead of adding up.
        inflight = InFlight(submissions)
        try:
            while True:
                if ahead is not None and self._is_leader():
                    batch = ahead.batch
                    dispatches, moved, early = self._claimer.claim_planned(
                        ahead.planned, grant, not_before=ahead.due_at)
                    if early is not None:
                        # Woken before the store's clock reached the instant: claim then.
                        self._ahead = ahead
                        self._clock.read(early)
                        return ahead.due_at, early
                else:
                    if batch_from_wake is not None:
                        batch, batch_from_wake = batch_from_wake, None
                    else:
                        batch = self.store.due_schedules(batch_size, shard=shard)
                        self._clock.read(batch.now)
                    if not batch.schedules or not self._is_leader():
                        inflight.settle()
                        next_due = batch.next_due_at
                        # Backfills only once the live schedules due are claimed and sent;
                        # each by its schedule's shard's leader, which alone resends its claims.
                        if (self._is_leader() and (waiting is None or waiting.backfills)
                                and self._backfills.drain(grant, shard)):
                            soon = batch.now + timedelta(seconds=BACKFILL_PAUSE)
                            next_due = soon if next_due is None else min(next_due, soon)
                        if global_work:
                            self._housekeeping.all_due(batch.now)
                        return next_due, batch.now
                    dispatches, moved = self._claimer.claim_batch(batch, grant)
                ahead = None
                batch_size = min(batch_size * 2, self.settings.batch_size)
                if dispatches:
                    inflight.settle()
                    fresh = self._claimer.drop_expired(dispatches)
                    if fresh and not submissions.backing_off():
                        inflight.start(fresh, grant)
                if moved == 0:
                    # Nothing moved (rows locked by an edit in progress): read again shortly.
                    inflight.settle()
                    return batch.now + timedelta(seconds=NOTHING_MOVED_PAUSE), batch.now
                if self._renew_due():
                    inflight.settle()
                    return batch.now, batch.now
        except Exception:
            if inflight.busy:
                # Leaving on an error: still wait for the batch on the wire, but let the first
                # error be the one reported.
                try:
                    inflight.settle()
                except GoatbeatError as exc:
                    logger.warning("store error after a submission: %s", exc,
                                   extra={"action": "store_error"})
            raise
        except BaseException:
            if inflight.busy:
                # A stop that would not wait (SystemExit or KeyboardInterrupt mid-tick: beat
                # holds the first stop signal until the tick ends, so this is a second one).
                # The batch may be stuck in a call that never returns: it is left to its
                # daemon thread, and its claims, unrecorded, are resent under the same keys.
                logger.warning("stopping with a batch of %d on the wire, not recorded",
                               inflight.size, extra={"action": "batch_abandoned"})
            raise

    def _settle_runs(self, grant: LeaseGrant) -> None:
        """Apply the ends of runs to their schedules (core.loop.settlement); whatever one pass
        meets, new claims still go out."""
        try:
            report = self._settler.settle(grant)
            if self._sharded and (report.released or self._settler.moved):
                # A schedule moved or a held run released may be another replica's to send:
                # wake the other shards' leaders rather than leave it to their next look.
                self.store.notify()
        except (LeaseLost, StoreUnavailable):
            raise
        except Exception as exc:
            logger.error("could not apply the ends of runs to their schedules: %s",
                         failure_reason(exc), extra={"action": "settle_failed"})

    def _resubmit_pending(self, grant: LeaseGrant, shard: Shard | None) -> None:
        batch_size = self.settings.batch_size
        while self._is_leader():
            try:
                pending = self.store.take_pending(lease=grant, limit=batch_size,
                                                  shard=shard)
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
            fresh = self._claimer.drop_expired(pending)
            if (fresh and not self._submissions.submit(fresh, grant)) \
                    or len(pending) < batch_size:
                return
