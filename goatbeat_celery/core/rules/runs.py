"""Run tracking: what workers report about each goatbeat occurrence, and the one rule that turns
those reports into the run columns of its execution.

Beat's dispatch state (``claimed`` → ``submitted``) says whether the broker took a run; the run
columns say what a worker did with it. They are written by different processes and never
overlap: beat writes ``state``, workers (through :class:`RunLog`) write the ``run_*`` columns,
and the leader marks silent runs lost.

A worker reports :class:`RunEvent` s keyed by the task id, which is the idempotency key. Reports
reach the database late (they are batched off the task's thread, held through an outage), out
of order between workers (a retry started on worker B before worker A's report of the retry
arrived) and sometimes twice (a batch replayed after its reply was lost). :func:`apply_event`
decides what each report changes, given the row as it stands, so that all three are harmless:

* every attempt carries an id of its own (``run``) chosen by the worker that ran it: a report
  of the attempt the row already shows is a replay, never a new attempt; a report of an older
  attempt than the one shown is a late one and changes nothing;
* a run's start and end instants come from the worker's monotonic clock as ages ("this happened
  2.1 s before the write"), turned into instants with the store's clock when written: the core
  never trusts a worker's wall clock;
* ``running`` always expires (:func:`lost_verdict`): a running row whose worker stopped sending
  heartbeats, or a submitted run that never started while the workers track runs, is marked
  ``lost`` by the leader; a run no worker reports on, where they may not track runs, ends
  ``unknown`` instead. Both are verdicts, not ends: the attempt's own report, should it come,
  replaces them.

Stores only execute this rule (they read the run columns, call :func:`apply_events` or
:func:`lost_verdict`, and write back what changed, compare-and-set on the columns read).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from goatbeat_celery.core.rules import validation
from goatbeat_celery.core.rules.defaults import own_or_default
from goatbeat_celery.core.types.runs import (
    CAS_COLUMNS,
    DEFAULT_HEARTBEAT_INTERVAL,
    DEFAULT_LOST_AFTER,
    DEFAULT_RUN_RESENDS,
    DEFAULT_START_TIMEOUT,
    ENDED_BY_ANY_REPORT,
    ENDED_STATE_VALUES,
    LOST_AFTER_HEARTBEATS,
    MAX_ATTEMPTS,
    MAX_ERROR_LENGTH,
    MAX_RUN_RESENDS,
    MIN_RESEND_WAIT,
    RUN_COLUMNS,
    RUN_TIME_MAXIMA,
    RunEvent,
    RunEventKind,
    RunOutcome,
    RunRecord,
    RunState,
    RunTimes,
    lost_after_problem,
    seconds_text,
)

__all__ = [
    "CAS_COLUMNS",
    "DEFAULT_HEARTBEAT_INTERVAL",
    "DEFAULT_LOST_AFTER",
    "DEFAULT_RUN_RESENDS",
    "DEFAULT_START_TIMEOUT",
    "ENDED_BY_ANY_REPORT",
    "ENDED_STATE_VALUES",
    "LOST_AFTER_HEARTBEATS",
    "MAX_ATTEMPTS",
    "MAX_ERROR_LENGTH",
    "MAX_RUN_RESENDS",
    "MIN_RESEND_WAIT",
    "RUN_COLUMNS",
    "RUN_TIME_MAXIMA",
    "RunEvent",
    "RunEventKind",
    "RunOutcome",
    "RunRecord",
    "RunState",
    "RunTimes",
    "UNTRACKED_REASON",
    "apply_event",
    "apply_events",
    "duplicate_reason",
    "error_summary",
    "last_news",
    "lost_after_problem",
    "lost_verdict",
    "resend_due",
    "resend_reason",
    "resend_wait",
    "schedule_period",
    "seconds_text",
]


# -- reports ---------------------------------------------------------------------------------
def apply_events(record: RunRecord, events: Iterable[RunEvent], now: datetime) -> RunRecord:
    """``record`` after ``events`` (all of one key), in order, written at store-time ``now``."""
    for event in events:
        record = apply_event(record, event, now)
    return record


def apply_event(record: RunRecord, event: RunEvent, now: datetime) -> RunRecord:
    """What one report changes in the run columns, written at store-time ``now``.

    Returns ``record`` itself when the report changes nothing (a replay, or a late report of an
    attempt that a later one replaced).

    * ``started``: a new attempt (``run_attempts`` + 1) becomes ``running`` on ``worker``, with
      ``started_at`` = now - age and ``heartbeat_at`` = now; its end fields are cleared. A
      replay (the row already shows this ``run``) changes nothing; a start older than the
      attempt the row shows is counted but changes nothing else.
    * ``retried`` / ``finished`` of the attempt the row shows: the row becomes ``retrying`` or
      the outcome, with ``finished_at`` = now - age (no earlier than the row's
      ``started_at``), the runtime and the error (``retrying``
      also sets ``heartbeat_at`` to that instant: the wait for the retry to start is bounded
      from there). This also applies to a row marked ``lost``: the report is better evidence.
    * ``retried`` / ``finished`` of another attempt that started in its process
      (``started_age``): when it started after the attempt the row shows, its start (as a
      ``started`` report says) then its end; ignored when it started before. A writer may
      therefore send the end alone when it holds both (one report per run instead of two;
      only an attempt older than the one shown then goes uncounted), and an end whose start
      report was dropped still records its attempt.
    * ``finished`` reported by a process that did not run it (``run`` None: the worker's main
      process revoked or rejected the message, or its pool process died): applied when the row
      shows no start, a retry, a lost run, or a run of that same worker; never over an end.
    """
    at = now - event.age
    kind = event.kind
    if kind is RunEventKind.STARTED:
        return _started(record, event.run, event.worker, at, now)
    if event.run is None:
        if not _ends_unknown_attempt(record, event):
            return record
    elif record.run_id != event.run:
        started_at = None if event.started_age is None else now - event.started_age
        if started_at is None or (record.started_at is not None
                                  and record.started_at > started_at):
            return record  # a later attempt is shown (or this one's start is unknown)
        # Its start then its end, in one step: the common report of a quick task.
        retried = kind is RunEventKind.RETRIED
        outcome = event.outcome
        assert retried or outcome is not None, "a finished report carries its outcome"
        return RunRecord(
            run_state=(RunState.RETRYING if retried or outcome is None
                       else outcome.state),
            run_id=event.run, worker=event.worker,
            run_attempts=_next_attempt(record.run_attempts), started_at=started_at,
            finished_at=at, heartbeat_at=at if retried else now, runtime=event.runtime,
            run_error=event.error, run_traceback=event.traceback)
    if kind is RunEventKind.RETRIED:
        return _ended(record, RunState.RETRYING, at, event, heartbeat_at=at)
    assert event.outcome is not None, "a finished report carries its outcome"
    return _ended(record, event.outcome.state, at, event, heartbeat_at=record.heartbeat_at)


def _started(record: RunRecord, run: str | None, worker: str, at: datetime,
             now: datetime) -> RunRecord:
    """``record`` once attempt ``run`` started at ``at`` (see :func:`apply_event`)."""
    if record.run_id == run:
        return record
    attempts = _next_attempt(record.run_attempts)
    if record.started_at is not None and record.started_at > at:
        return replace(record, run_attempts=attempts)
    return RunRecord(run_state=RunState.RUNNING, run_id=run, worker=worker,
                     run_attempts=attempts, started_at=at, heartbeat_at=now)


def _ended(record: RunRecord, state: RunState, at: datetime, event: RunEvent, *,
           heartbeat_at: datetime | None) -> RunRecord:
    started_at = record.started_at
    # A start and its end written apart are each placed by their own write's clock, whose
    # delay after the worker measured the age differs: a quick run could seem to end before it
    # started. It ends no earlier than it started.
    finished_at = at if started_at is None or at >= started_at else started_at
    # Built whole rather than with dataclasses.replace: this runs for every report.
    return RunRecord(run_state=state, run_id=record.run_id, worker=record.worker,
                     run_attempts=record.run_attempts, started_at=started_at,
                     finished_at=finished_at, heartbeat_at=heartbeat_at, runtime=event.runtime,
                     run_error=event.error, run_traceback=event.traceback)


def _ends_unknown_attempt(record: RunRecord, event: RunEvent) -> bool:
    """Whether a report of no particular attempt may end the run the row shows."""
    state = record.run_state
    if state is RunState.RUNNING:
        return record.worker == event.worker
    if event.kind is RunEventKind.RETRIED:
        return False
    return state is None or state in ENDED_BY_ANY_REPORT


def _next_attempt(attempts: int) -> int:
    return attempts + 1 if 0 <= attempts < MAX_ATTEMPTS else attempts


# -- expiry ----------------------------------------------------------------------------------
def lost_verdict(record: RunRecord, *, dispatched_at: datetime | None, now: datetime,
                 silent_for: timedelta, unstarted_for: timedelta,
                 tracked_since: datetime | None = None) -> RunRecord | None:
    """The row marked ``lost`` (or ``unknown``) if its run must count as over at store-time
    ``now``, else None.

    ``dispatched_at`` is when the broker took the run (``submitted_at`` of a ``submitted``
    execution; None while beat has not sent it). ``tracked_since`` is the store instant from
    which the leader knows the workers track runs (``goatbeat_track_runs``; None: it does not
    know they do). Lost are, on a tracking worker's evidence:

    * a ``running`` run whose last heartbeat (or, without one, its start) is older than
      ``silent_for``: its worker went silent (killed, frozen, cut off);
    * a ``retrying`` run whose retry has not started ``unstarted_for`` after it was asked for;
    * a run sent at or after ``tracked_since`` and never started ``unstarted_for`` after the
      broker took it (no worker consumes its queue, or the message was lost).

    A run never started ``unstarted_for`` after it was sent while the workers were not known
    to track runs is ``unknown``: no report was to be expected, so none missing condemns it.
    It ends all the same, so that nothing waits on it forever.

    Older means strictly older: at exactly ``silent_for`` the run is not lost yet. The verdict
    sets ``finished_at`` to ``now`` and ``run_error`` to the reason (clearing
    ``run_traceback``); the rest is kept.
    """
    state = record.run_state
    if state is RunState.RUNNING:
        last = record.heartbeat_at or record.started_at
        if last is None or now - last > silent_for:
            return _lost(record, now, f"worker silent for {seconds_text(silent_for)}")
    elif state is RunState.RETRYING:
        asked = record.heartbeat_at or record.finished_at
        if asked is None or now - asked > unstarted_for:
            return _lost(record, now, f"retry never started within {seconds_text(unstarted_for)}")
    elif state is None and dispatched_at is not None and now - dispatched_at > unstarted_for:
        if tracked_since is None:
            return _lost(record, now, UNTRACKED_REASON, RunState.UNKNOWN)
        if dispatched_at < tracked_since:
            return _lost(record, now, _SENT_UNTRACKED_REASON, RunState.UNKNOWN)
        return _lost(record, now, f"never started within {seconds_text(unstarted_for)}")
    return None


def resend_wait(*, start_timeout: timedelta, dispatched_at: datetime,
                expires_at: datetime | None, period: timedelta | None = None) -> timedelta:
    """How long a run sent at ``dispatched_at`` and not started waits before it is sent again.

    The start timeout, or less where the schedule says a run is stale sooner: its ``period``
    (the time to its next occurrence: a run of an every-minute schedule waits a minute, not
    ten), and, for a run with a starting deadline, half the time its send left before that
    deadline, so that the resend has as long to arrive as the first send had. Never less than
    :data:`MIN_RESEND_WAIT` (a start report takes up to half a second to be written, a queue
    a few seconds to drain) unless the start timeout itself is shorter.
    """
    wait = start_timeout
    if period is not None and period > timedelta(0):
        wait = min(wait, max(MIN_RESEND_WAIT, period))
    if expires_at is not None:
        wait = min(wait, max(MIN_RESEND_WAIT, (expires_at - dispatched_at) / 2))
    return wait


def schedule_period(occurrence_at: datetime, next_occurrence_at: datetime | None
                    ) -> timedelta | None:
    """The period a run's schedule keeps, as its row says: from the run's occurrence to the
    schedule's next one (None when the schedule has none, or its next is not later)."""
    if next_occurrence_at is None or next_occurrence_at <= occurrence_at:
        return None
    return next_occurrence_at - occurrence_at


def resend_due(record: RunRecord, *, dispatched_at: datetime | None,
               expires_at: datetime | None, attempts: int, now: datetime,
               unstarted_for: timedelta, tracked_since: datetime | None,
               resends: int, schedule_resends: int | None = None,
               period: timedelta | None = None) -> bool:
    """Whether a run the broker took and no worker started must be sent again, under its own
    key, at store-time ``now`` (instead of being judged lost by :func:`lost_verdict`):

    * the workers were known to track runs when it was sent (``tracked_since``, as for
      :func:`lost_verdict`): only then does a missing start mean it never started;
    * it has waited :func:`resend_wait` since its last send (strictly longer);
    * it is still within its starting deadline (``expires_at``), so a worker would run it;
    * it was sent fewer than ``1 + n`` times, ``n`` its schedule's own ``run_resends``
      (``schedule_resends``) or, where the schedule gives none, the setting (``resends``)
      (``attempts`` counts every send, a send retried after a broker failure included).
    """
    if (record.run_state is not None or dispatched_at is None or tracked_since is None
            or dispatched_at < tracked_since
            or attempts > own_or_default(schedule_resends, resends)):
        return False
    if expires_at is not None and expires_at <= now:
        return False
    wait = resend_wait(start_timeout=unstarted_for, dispatched_at=dispatched_at,
                       expires_at=expires_at, period=period)
    return now - dispatched_at > wait


def resend_reason(execution: Any, now: datetime) -> str:
    """Why a run is sent again (its ``last_error``): how long it waited unstarted since its last
    send (``submitted_at``) and which send this was."""
    waited = now - execution.submitted_at if execution.submitted_at is not None else None
    since = "" if waited is None else f" within {seconds_text(_whole(waited))}"
    return f"never started{since} after send {execution.attempts}; sent again"


def _whole(value: timedelta) -> timedelta:
    return timedelta(seconds=round(value.total_seconds()))


def duplicate_reason(record: RunRecord | None, *, now: datetime, live_for: timedelta,
                     redelivered: bool) -> str | None:
    """Why a delivery of a run must not run, as a worker tracking runs judges it from the row
    at store-time ``now``: None when it must run.

    * the run ended (succeeded, failed, revoked, rejected): this delivery is a copy of a run
      already over;
    * it is running with a heartbeat younger than ``live_for`` and this delivery is not the
      broker's redelivery: a copy sent again (a resend, a resubmission) while it runs.

    A broker's redelivery (``redelivered``) of a running run does run: the broker redelivers
    only once the consumer that held the message went away, so that attempt is presumed lost;
    so does one of a run that failed because its pool process died (``WorkerLostError``, with
    ``task_reject_on_worker_lost``).
    A run not started, retrying (``self.retry()`` sends the same id again), lost or of unknown
    outcome runs. A row not found runs too (the report of it is ignored as for any task).
    """
    if record is None:
        return None
    state = record.run_state
    if state is not None and state in _ENDED_BY_WORKER:
        if redelivered and state is RunState.FAILED \
                and (record.run_error or "").startswith(_WORKER_LOST):
            return None  # its pool process died: the message is delivered again to run it
        return f"the run already {state.value}"
    if state is RunState.RUNNING and not redelivered:
        beat = record.heartbeat_at or record.started_at
        if beat is not None and now - beat < live_for:
            return f"the run is running on {record.worker}"
    return None


#: The ends a worker reports; a delivery of a run that has one is a duplicate.
_ENDED_BY_WORKER = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.REVOKED,
                              RunState.REJECTED})
_WORKER_LOST = "WorkerLostError"

#: Why a run's outcome is unknown: what its ``run_error`` says.
UNTRACKED_REASON = "workers do not track runs (goatbeat_track_runs is off)"
_SENT_UNTRACKED_REASON = "sent before the workers were known to track runs"


def may_be_lost(record: RunRecord, *, dispatched_at: datetime | None) -> bool:
    """Whether :func:`lost_verdict` may condemn the run as time goes on: it is running or
    retrying, or the broker took it and no worker has started it. (The store's
    ``ix_goatbeat_execution_running`` and ``ix_goatbeat_execution_unstarted`` hold those rows.)
    """
    live = record.run_state is not None and record.run_state.live
    return live or (record.run_state is None and dispatched_at is not None)


def last_news(record: RunRecord, *, dispatched_at: datetime | None) -> datetime | None:
    """When a run was last heard of: its last heartbeat, else its end, its start, or when the
    broker took it. :meth:`RunLog.mark_lost` judges the runs with the oldest news first."""
    return record.heartbeat_at or record.finished_at or record.started_at or dispatched_at


def _lost(record: RunRecord, now: datetime, reason: str,
          state: RunState = RunState.LOST) -> RunRecord:
    # The verdict's reason replaces the error; a traceback would belong to the error replaced.
    return replace(record, run_state=state, finished_at=now, run_error=reason,
                   run_traceback=None)


def settled_after_report(settled: bool | None, run_state: RunState | None) -> bool | None:
    """The execution's ``settled`` once its run columns say ``run_state``: a run nothing waited
    on (``None``) turns unsettled (``False``) as it ends, so that the leader reports its end
    once (:meth:`~goatbeat_celery.core.loop.observer.EngineObserver.runs_ended`) and counts it in
    its schedule's failures in a row; a run already unsettled or settled keeps its flag.
    Stores write this as they write a report or a lost verdict."""
    if settled is None and run_state is not None and not run_state.live:
        return False
    return settled


def measured_text(value: timedelta) -> str:
    """A measured duration, to the hundredth of a second: ``2.39s``, ``0.03s``, ``600s``
    (a clock reading's microseconds say nothing to the reader)."""
    return f"{value.total_seconds():.2f}".rstrip("0").rstrip(".") + "s"


def error_summary(error: BaseException | str | None) -> str | None:
    """``ExcType: message`` on one line, control characters escaped, at most
    :data:`MAX_ERROR_LENGTH` characters; a string is kept as given (cleaned and cut alike)."""
    if error is None:
        return None
    if isinstance(error, BaseException):
        try:
            message = str(error)
        except Exception:  # a __str__ that fails must not fail the report
            message = ""
        name = type(error).__name__
        text = f"{name}: {message}" if message else name
    else:
        text = str(error)
    text = " ".join(text.split())
    text = validation.reason_text(text[:MAX_ERROR_LENGTH + 1])
    if len(text) > MAX_ERROR_LENGTH:
        text = text[:MAX_ERROR_LENGTH - 3] + "..."
    return text


# -- settings --------------------------------------------------------------------------------


