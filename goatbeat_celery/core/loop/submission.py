"""The submission pipeline: claimed occurrences handed to the broker, and what it did recorded.

A batch is *sent* (on a thread of its own while the loop claims the next batch), then *settled*
in the loop's thread and *recorded*: observers hear of every attempt; a broker failure leaves the
rows claimed and holds sending back for ``retry_backoff``, doubled on each failure up to
``retry_backoff_max``; a message refused for itself fails alone, is abandoned after
:data:`MAX_SEND_ATTEMPTS` tries, and sets its schedule aside.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from goatbeat_celery.core.loop.observer import EngineObserver, OccurrenceRecord
from goatbeat_celery.core.loop.rotation import indexed
from goatbeat_celery.core.loop.trigger_cache import TriggerCache
from goatbeat_celery.core.protocols import Dispatches, TaskSubmitter
from goatbeat_celery.core.types.claims import Dispatch, SubmitResult
from goatbeat_celery.core.types.errors import GoatbeatError
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.quick import quick_new
from goatbeat_celery.core.types.set_aside import SetAside
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import quoted_name

logger = logging.getLogger(__name__)

#: A message refused for itself (it cannot be built, say) is abandoned once it has been tried
#: this many times; a broker outage never counts against it.
MAX_SEND_ATTEMPTS = 5
#: Leave this much of the local validity unused by a submission, for the bookkeeping after it.
SUBMIT_MARGIN = 0.25
#: Never let one submission call run longer than this, even with a long lease.
SUBMIT_TIMEOUT_MAX = 10.0
#: The loop waits for a batch on the wire in slices this long (seconds), so that a stop
#: signal is never left pending for the whole wait.
JOIN_SLICE = 0.1

#: What the broker did with a batch, and how long it took.
Sent = tuple[SubmitResult, timedelta]


class SubmissionPipeline:
    """Sends claimed batches, records the outcome, and keeps the broker backoff.

    ``time_left`` gives the seconds until the lease's local deadline (a send never outlasts it);
    ``store_now`` the store's clock as last read, for the instants observers are told;
    ``set_aside`` records set-asides as the engine does (its return value is not used here).
    """

    def __init__(
        self,
        *,
        store: Dispatches,
        submitter: TaskSubmitter,
        settings: Settings,
        observer: EngineObserver,
        time_left: Callable[[], float],
        store_now: Callable[[], datetime | None],
        set_aside: Callable[[Sequence[SetAside], LeaseGrant], int],
        monotonic: Callable[[], float],
        triggers: TriggerCache | None = None,
    ) -> None:
        self.store = store
        #: Builds a rotated schedule's trigger, for its occurrence's index (None: rotation
        #: indexes are not worked out, and rotated messages are refused).
        self.triggers = triggers
        self.submitter = submitter
        self.settings = settings
        self.observer = observer
        self._time_left = time_left
        self._store_now = store_now
        self._set_aside = set_aside
        self._mono = monotonic
        self._backoff = settings.retry_backoff.total_seconds()
        #: Monotonic instant before which nothing is sent (the broker failed last time).
        self.backoff_until = 0.0
        #: A batch was cut short by its time while the broker took the rest: send again at
        #: once instead of sleeping (the engine reads and clears it).
        self.resend_now = False

    def backing_off(self) -> bool:
        return self._mono() < self.backoff_until

    def submit(self, dispatches: Sequence[Dispatch], grant: LeaseGrant) -> bool:
        """Submit and record; returns False when the broker failed (rows stay claimed)."""
        return self._record(dispatches, self.send(dispatches, grant), grant)

    def start(self, dispatches: Sequence[Dispatch], grant: LeaseGrant) -> Submission:
        """Send ``dispatches`` on a thread of its own; :meth:`settle` waits for it."""
        return Submission(self, dispatches, grant)

    def settle(self, submission: Submission | None) -> bool:
        """Wait for a batch on the submission thread, then record it as :meth:`submit` does."""
        if submission is None:
            return True
        return self._record(submission.dispatches, submission.result(), submission.grant)

    def send(self, dispatches: Sequence[Dispatch], grant: LeaseGrant) -> Sent | None:
        """Hand ``dispatches`` to the broker and mark what it accepted (no observer call, no
        pipeline state changed: this may run on the submission thread). None: no time left."""
        remaining = self._time_left() - SUBMIT_MARGIN
        if remaining <= 0:
            return None
        started = self._mono()
        if self.triggers is not None:
            dispatches = indexed(dispatches, self.triggers)
        result = self.submitter.submit(
            dispatches, token=grant.token, timeout=min(remaining, SUBMIT_TIMEOUT_MAX)
        )
        elapsed = timedelta(seconds=self._mono() - started)
        if result.accepted:
            self.store.mark_submitted(result.accepted, result.clusters)
        if result.failed or result.rejected:
            attempts = {d.key: d.execution.attempts for d in dispatches}
            self.store.record_failures(
                {**result.failed, **result.rejected},
                abandon=[key for key in result.rejected
                         if attempts.get(key, 0) >= MAX_SEND_ATTEMPTS],
            )
        return result, elapsed

    def _record(self, dispatches: Sequence[Dispatch], sent: Sent | None,
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
        if result.failed and result.accepted:
            # The broker took part of the batch, so it is up: the rest ran out of the batch's
            # time (a backlog after an outage on a busy machine). Backing off here would let
            # the backlog grow behind a wait; the rest goes at once, on the next tick.
            self.resend_now = True
            self._backoff = self.settings.retry_backoff.total_seconds()
            logger.info(
                "broker took %d of %d messages before the batch's time ran out; the other %d "
                "are sent next under the same keys", len(result.accepted), len(dispatches),
                len(result.failed), extra={"action": "submit_partial"},
            )
            return False
        if result.failed:
            first_error = next(iter(result.failed.values()))
            self.backoff_until = self._mono() + self._backoff
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

    def _report(self, dispatches: Sequence[Dispatch], accepted: set[str],
                failures: dict[str, str], elapsed: timedelta, abandoned: set[str]) -> None:
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
            key = execution.key
            records.append(quick_new(OccurrenceRecord, {
                "key": key, "schedule_name": execution.schedule_name,
                "occurrence_at": execution.occurrence_at, "due_at": execution.due_at,
                "claimed_at": execution.claimed_at, "submitted_at": submitted,
                "lateness": None if submitted is None else submitted - execution.due_at,
                "missed": execution.missed, "token": execution.token,
                "attempt": execution.attempts, "manual": execution.manual,
                "error": failures.get(key), "abandoned": key in abandoned,
            }))
        self.observer.submitted(records)


class InFlight:
    """At most one batch on the wire (:meth:`SubmissionPipeline.start`) while the loop claims
    the next one."""

    def __init__(self, pipeline: SubmissionPipeline) -> None:
        self._pipeline = pipeline
        self._submission: Submission | None = None

    @property
    def busy(self) -> bool:
        """True while a batch is on the wire, not yet settled."""
        return self._submission is not None

    @property
    def size(self) -> int:
        """How many dispatches are on the wire."""
        return 0 if self._submission is None else len(self._submission.dispatches)

    def start(self, dispatches: Sequence[Dispatch], grant: LeaseGrant) -> None:
        """Put ``dispatches`` on the wire; the batch before must have been settled."""
        assert self._submission is None, "the batch before was not settled"
        self._submission = self._pipeline.start(dispatches, grant)

    def settle(self) -> None:
        """Wait for the batch on the wire, if any, and record it. The wire is empty afterwards
        even when recording raises, so no batch is recorded twice."""
        submission, self._submission = self._submission, None
        self._pipeline.settle(submission)


class Submission:
    """One claimed batch handed to the broker (and marked) on a thread of its own."""

    def __init__(self, pipeline: SubmissionPipeline, dispatches: Sequence[Dispatch],
                 grant: LeaseGrant) -> None:
        self.dispatches = dispatches
        self.grant = grant
        self._sent: Sent | None = None
        self._error: BaseException | None = None
        # A daemon thread: every broker and database call in it is bounded in time anyway.
        self._thread = threading.Thread(target=self._run, args=(pipeline,),
                                        name="goatbeat-submit", daemon=True)
        self._thread.start()

    def _run(self, pipeline: SubmissionPipeline) -> None:
        try:
            self._sent = pipeline.send(self.dispatches, self.grant)
        except BaseException as exc:  # re-raised in the loop's thread by result()
            self._error = exc

    def result(self) -> Sent | None:
        # In slices: a signal that lands just before a blocking wait begins is run only when
        # the waiting thread next runs Python code, and a stop must not wait for the batch.
        while self._thread.is_alive():
            self._thread.join(JOIN_SLICE)
        if self._error is not None:
            raise self._error
        return self._sent
