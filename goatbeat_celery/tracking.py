"""Run tracking on the workers: what happened to each run goatbeat sent.

One line in the app module every worker imports::

    import goatbeat_celery

    goatbeat_celery.track_runs(app)

Each worker process then records, for every task goatbeat submitted (recognised by its
headers, keyed by its task id = the idempotency key), when it started and on which worker,
each retry, and how it ended (succeeded, failed with a short error, revoked, rejected) with its
runtime, in the run columns of ``goatbeat_execution``. Tasks goatbeat did not send are left
alone.

The task's thread only notes the event in a bounded in-memory buffer (microseconds, no lock
held across any I/O); one daemon writer thread per process writes the buffer in batches. A
database outage never fails or slows a task: the writer keeps the events and retries with a
capped backoff; past :data:`MAX_EVENTS` it drops the oldest, counted and logged
(``action=run_events_dropped``). The writer also sends one heartbeat per
``heartbeat_interval`` for the runs of its process, so that a run whose worker dies (SIGKILL,
a lost host) is marked ``lost`` by the leader instead of staying ``running`` forever (see
:mod:`goatbeat_celery.core.runs` for the rules and ``docs/run-tracking.md`` for the bounds).
"""

from __future__ import annotations

import itertools
import logging
import os
import secrets
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from celery import signals
from celery import states as celery_states

from goatbeat_celery import config as config_module
from goatbeat_celery.core.errors import ConfigurationError, StoreUnavailable
from goatbeat_celery.core.runs import (
    RunEvent,
    RunEventKind,
    RunLog,
    RunOutcome,
    RunTimes,
    error_summary,
)
from goatbeat_celery.headers import OCCURRENCE, SCHEDULE

logger = logging.getLogger(__name__)

__all__ = ["BATCH_SIZE", "FLUSH_INTERVAL", "MAX_EVENTS", "RunTracker", "RunWriter",
           "WriterStats", "track_runs", "tracks_runs"]

#: Events one process holds at most while the database cannot take them; past this, the
#: oldest are dropped (counted, and logged with ``action=run_events_dropped``).
MAX_EVENTS = 10_000
#: Events wait at most this long (seconds) before being written, or until BATCH_SIZE wait.
FLUSH_INTERVAL = 0.5
#: Events written in one batch at most.
BATCH_SIZE = 500
#: After a failed write the writer waits FLUSH_INTERVAL, doubled after each failure up to this.
BACKOFF_MAX = 5.0
#: A batch the database refuses for itself (not an outage) is tried this many times, then
#: dropped (counted), so that one bad batch cannot hold back every later one.
REFUSED_TRIES = 3
#: How long a stopping process waits for its last events to be written (seconds).
STOP_TIMEOUT = 5.0
#: Dropped events are reported at most this often (seconds).
DROP_REPORT_INTERVAL = 10.0
#: SQLSTATE insufficient_privilege: the worker's database role lacks a grant.
_INSUFFICIENT_PRIVILEGE = "42501"
#: Where the grants a worker needs are written.
_WORKER_ROLE_DOC = "docs/deploying.md#a-worker-role-with-the-least-rights"


#: What a task's thread notes, turned into a RunEvent when written: (kind, key, run, worker,
#: at, outcome, runtime, error, started), instants on this process's monotonic clock, kind and
#: outcome as their values. A plain tuple of strings and numbers, which the garbage collector
#: stops tracking at its first look: a busy worker's buffer of events would otherwise move to
#: the oldest generation and lengthen its full collections.
_Noted = tuple[str, str, str | None, str, float, str | None, float | None, str | None,
               float | None]
_STARTED, _RETRIED, _FINISHED = (RunEventKind.STARTED.value, RunEventKind.RETRIED.value,
                                 RunEventKind.FINISHED.value)
_KINDS = {kind.value: kind for kind in RunEventKind}
_OUTCOME_OF = {outcome.value: outcome for outcome in RunOutcome}


def _noted(kind: RunEventKind, key: str, run: str | None, worker: str, at: float,
           outcome: RunOutcome | None = None, runtime: float | None = None,
           error: str | None = None, started: float | None = None) -> _Noted:
    """A noted event, from its parts."""
    return (kind.value, key, run, worker, at, None if outcome is None else outcome.value,
            runtime, error, started)


@dataclass
class WriterStats:
    """What one process's writer did since it started."""

    written: int = 0
    dropped: int = 0
    unknown: int = 0
    failed_writes: int = 0
    heartbeats: int = 0


class RunWriter:
    """A bounded buffer of events and the daemon thread that writes it to a RunLog.

    :meth:`put` never blocks on I/O and never raises; everything that touches the database
    happens on the writer thread, started by the first event. ``running`` returns the keys of
    the runs this process is running, for the heartbeat.
    """

    def __init__(self, open_log: Callable[[], RunLog], *, heartbeat_interval: float,
                 running: Callable[[], Collection[str]] = tuple,
                 max_events: int = MAX_EVENTS, batch_size: int = BATCH_SIZE,
                 flush_interval: float = FLUSH_INTERVAL, backoff_max: float = BACKOFF_MAX,
                 name: str = "goatbeat-run-writer") -> None:
        self._open_log = open_log
        self._heartbeat_interval = heartbeat_interval
        self._running = running
        self._max = max_events
        self._batch_size = batch_size
        self._flush_interval = flush_interval
        self._backoff_max = backoff_max
        self._monotonic = time.monotonic
        self._name = name
        self._events: deque[_Noted] = deque()
        # Held only to move events in or out of the deque, never across I/O.
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._log: RunLog | None = None
        self._in_flight = 0
        self._idle = threading.Condition(self._lock)
        self._unreported_drops = 0
        self._drops_reported_at = float("-inf")
        self._outage_since: float | None = None
        self._refusals = 0
        # Why the last write failed, for the report of events dropped meanwhile.
        self._failure: str | None = None
        # The permission errors already logged: each is logged once, not at every retry.
        self._denials_logged: set[str] = set()
        self.stats = WriterStats()

    # -- the task's side -----------------------------------------------------------------
    def put(self, noted: _Noted) -> None:
        """Hold ``noted`` for writing; drops the oldest event held when the buffer is full."""
        with self._lock:
            events = self._events
            if len(events) >= self._max:
                events.popleft()
                self.stats.dropped += 1
                self._unreported_drops += 1
            events.append(noted)
            waiting = len(events)
        if self._thread is None:
            self.start()
        if waiting == self._batch_size:
            self._wake.set()

    @property
    def pending(self) -> int:
        """Events noted and not yet written (including a batch being written)."""
        with self._lock:
            return len(self._events) + self._in_flight

    # -- life ------------------------------------------------------------------------------
    def start(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = STOP_TIMEOUT) -> bool:
        """Write what is held (trying until ``timeout``), then close the log. Returns whether
        nothing was left unwritten."""
        self._stopping.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        left = self.pending
        if left:
            logger.warning("goatbeat: run tracking stopped with %d events unwritten", left,
                           extra={"action": "run_events_dropped", "count": left})
        return left == 0

    def flush(self, timeout: float) -> bool:
        """Wait until every event noted so far is written (or ``timeout`` passes); returns
        whether none is left. For tests and orderly shutdowns."""
        deadline = self._monotonic() + timeout
        self._wake.set()
        with self._idle:
            while self._events or self._in_flight:
                remaining = deadline - self._monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(min(remaining, 0.05))
                self._wake.set()
        return True

    # -- the writer thread -----------------------------------------------------------------
    def _run(self) -> None:
        backoff = 0.0  # the wait after a failed write; 0 while writes succeed
        started = self._monotonic()
        write_at = started + self._flush_interval
        next_beat = started + self._heartbeat_interval
        try:
            while True:
                self._sleep(min(write_at, next_beat) - self._monotonic(),
                            interruptible=backoff == 0.0)
                if self._stopping.is_set():
                    self._write_until_stopped()
                    return
                now = self._monotonic()
                if backoff == 0.0 or now >= write_at:
                    if self._write_all():
                        backoff = 0.0
                        write_at = self._monotonic() + self._flush_interval
                    else:
                        backoff = min(max(backoff * 2, self._flush_interval), self._backoff_max)
                        write_at = self._monotonic() + backoff
                if now >= next_beat:
                    next_beat = now + self._heartbeat_interval
                    self._heartbeat()
                self._report_drops()
        except Exception:  # never expected; tracking must not take the process down
            logger.exception("goatbeat: the run tracking writer stopped",
                             extra={"action": "run_tracking_failed"})
        finally:
            self._close()

    def _sleep(self, seconds: float, *, interruptible: bool) -> None:
        """Wait ``seconds``; a full batch or a stop cuts it short, but during a backoff only a
        stop does (a full buffer must not hammer a database that is down)."""
        deadline = self._monotonic() + seconds
        while True:
            remaining = deadline - self._monotonic()
            if remaining <= 0 or self._stopping.is_set():
                return
            if self._wake.wait(remaining):
                self._wake.clear()
                if interruptible:
                    return

    def _write_until_stopped(self) -> None:
        """The last writes of a stopping process: a few tries within the stop timeout."""
        deadline = self._monotonic() + STOP_TIMEOUT
        delay = self._flush_interval
        while True:
            if self._write_all():
                if not self.pending or self._monotonic() >= deadline:
                    break
                continue  # noted while the last ones were written
            if self._monotonic() + delay >= deadline:
                break
            time.sleep(delay)
            delay = min(delay * 2, self._backoff_max)
        self._report_drops(force=True)

    def _write_all(self) -> bool:
        """Write the events held when called, batch by batch; False when a write failed (the
        batch is put back, oldest first, and the buffer trimmed to its bound). Events noted
        meanwhile wait for the next flush: writing them at once would turn a busy worker's
        reports into a stream of small writes."""
        with self._lock:
            left = len(self._events)
        while True:
            with self._lock:
                events = self._events
                if not events or left <= 0:
                    if not events:
                        self._idle.notify_all()
                    return True
                count = min(self._batch_size, len(events), left)
                left -= count
                batch = [events.popleft() for _ in range(count)]
                self._in_flight = count
            try:
                unknown = self._write(batch)
            except Exception as exc:
                keep = self._failed(exc)
                with self._lock:
                    self._in_flight = 0
                    if keep:
                        self._events.extendleft(reversed(batch))
                        overflow = len(self._events) - self._max
                        for _ in range(max(0, overflow)):
                            self._events.popleft()
                        self.stats.dropped += max(0, overflow)
                        self._unreported_drops += max(0, overflow)
                    else:
                        # Logged as it is dropped, with the database's reason.
                        self.stats.dropped += len(batch)
                    self._idle.notify_all()
                return False
            with self._lock:
                self._in_flight = 0
            self._succeeded(batch, unknown)

    def _write(self, batch: list[_Noted]) -> int:
        log = self._log
        if log is None:
            log = self._log = self._open_log()
        now = self._monotonic()
        # A run that started and ended within the batch is sent as its end alone, which
        # carries its start (core.runs.apply_event): one report per task instead of two.
        ended = {noted[2] for noted in batch if noted[0] != _STARTED and noted[8] is not None}
        return log.record_runs([_event(noted, now) for noted in batch
                                if noted[0] != _STARTED or noted[2] not in ended])

    def _failed(self, exc: Exception) -> bool:
        """Note a failed write; returns whether to keep its batch for another try."""
        self.stats.failed_writes += 1
        denied = _permission_denied(exc)
        self._failure = str(exc)
        if denied is not None and denied not in self._denials_logged:
            self._denials_logged.add(denied)
            logger.error("goatbeat: run tracking is not allowed to write: %s. The workers' "
                         "database role lacks a privilege (%s); grant what %s lists. Up to %d "
                         "events are held meanwhile, and written once it is granted", exc,
                         denied, _WORKER_ROLE_DOC, self._max,
                         extra={"action": "run_tracking_denied"})
        elif self._outage_since is None:
            logger.warning("goatbeat: run tracking cannot write (%s); holding up to %d events "
                           "and retrying", exc, self._max,
                           extra={"action": "run_tracking_unavailable"})
        else:
            logger.debug("goatbeat: run tracking still cannot write: %s", exc)
        if self._outage_since is None:
            self._outage_since = self._monotonic()
        # A missing grant is fixed by an operator, not by dropping the batch: hold the events
        # as through an outage, so that they are written once the grant is there.
        if denied is not None or isinstance(exc, StoreUnavailable) or self._log is None:
            self._refusals = 0
            return True
        self._refusals += 1
        if self._refusals < REFUSED_TRIES:
            return True
        self._refusals = 0
        logger.error("goatbeat: the database refused a batch of run events %d times; "
                     "dropping it: %s", REFUSED_TRIES, exc,
                     extra={"action": "run_events_dropped"})
        return False

    def _succeeded(self, batch: list[_Noted], unknown: int) -> None:
        stats = self.stats
        stats.written += len(batch)
        stats.unknown += unknown
        self._refusals = 0
        self._failure = None
        self._denials_logged.clear()
        if self._outage_since is not None:
            logger.info("goatbeat: run tracking writes again after %.1fs",
                        self._monotonic() - self._outage_since,
                        extra={"action": "run_tracking_recovered"})
            self._outage_since = None
        if unknown:
            logger.warning("goatbeat: %d run events named no execution in the database (pruned "
                           "rows, or workers and beat on different databases?)", unknown,
                           extra={"action": "run_events_unknown", "count": unknown})
        if logger.isEnabledFor(logging.DEBUG):
            for kind, key, _, worker, _, outcome, *_ in batch:
                logger.debug("goatbeat: run %s %s on %s%s", key, kind, worker,
                             f" ({outcome})" if outcome else "",
                             extra={"action": f"run_{kind}", "key": key})

    def _heartbeat(self) -> None:
        keys = tuple(dict.fromkeys(self._running()))
        if not keys:
            return
        try:
            log = self._log
            if log is None:
                log = self._log = self._open_log()
            log.heartbeat(keys)
        except Exception as exc:
            self.stats.failed_writes += 1
            logger.debug("goatbeat: run heartbeat failed: %s", exc)
        else:
            self.stats.heartbeats += 1

    def _report_drops(self, *, force: bool = False) -> None:
        with self._lock:
            dropped = self._unreported_drops
            now = self._monotonic()
            if not dropped or (not force and now - self._drops_reported_at
                               < DROP_REPORT_INTERVAL):
                return
            self._unreported_drops = 0
            self._drops_reported_at = now
        failure = self._failure
        why = ("the database could not keep up" if failure is None
               else f"the last write failed: {failure}")
        logger.warning("goatbeat: %d run events dropped (buffer of %d full: %s; %d dropped in "
                       "all)", dropped, self._max, why, self.stats.dropped,
                       extra={"action": "run_events_dropped", "count": dropped})

    def _close(self) -> None:
        log, self._log = self._log, None
        close = getattr(log, "close", None)
        if close is not None:
            try:
                close()
            except Exception as exc:  # closing is best effort
                logger.debug("goatbeat: closing the run log failed: %s", exc)


def _event(noted: _Noted, now: float) -> RunEvent:
    """A noted event as written at monotonic instant ``now``: its instants become ages."""
    kind, key, run, worker, at, outcome, runtime, error, started = noted
    # timedelta(0, seconds): positional, a third cheaper than by keyword, once per report.
    return RunEvent(
        key=key, kind=_KINDS[kind], run=run, worker=worker,
        age=timedelta(0, now - at if now > at else 0.0),
        outcome=None if outcome is None else _OUTCOME_OF[outcome],
        runtime=None if runtime is None else timedelta(0, runtime), error=error,
        started_age=(None if started is None
                     else timedelta(0, now - started if now > started else 0.0)),
    )


# -- Celery ------------------------------------------------------------------------------------
def _sent_by_goatbeat(request: Any) -> bool:
    """Whether a task request carries goatbeat's headers (as attributes, or in its
    ``headers``)."""
    schedule = getattr(request, SCHEDULE, None)
    occurrence = getattr(request, OCCURRENCE, None)
    if schedule is None or occurrence is None:
        headers = getattr(request, "headers", None)
        if isinstance(headers, Mapping):
            schedule = headers.get(SCHEDULE, schedule)
            occurrence = headers.get(OCCURRENCE, occurrence)
    return isinstance(schedule, str) and isinstance(occurrence, str)


def _headers_sent_by_goatbeat(headers: Any) -> bool:
    """Whether a message's headers are goatbeat's."""
    return (isinstance(headers, Mapping) and isinstance(headers.get(SCHEDULE), str)
            and isinstance(headers.get(OCCURRENCE), str))


#: The outcome (its value) of each final state task_postrun reports.
_OUTCOMES = {
    celery_states.SUCCESS: RunOutcome.SUCCEEDED.value,
    # The task ended on purpose without a result (Ignore, or self.replace()).
    celery_states.IGNORED: RunOutcome.SUCCEEDED.value,
    celery_states.FAILURE: RunOutcome.FAILED.value,
    celery_states.REJECTED: RunOutcome.REJECTED.value,
    celery_states.REVOKED: RunOutcome.REVOKED.value,
}
_SUCCEEDED, _FAILED = RunOutcome.SUCCEEDED.value, RunOutcome.FAILED.value

#: The Celery signals a tracker connects, by its handler's name.
_SIGNALS = {
    "_on_prerun": signals.task_prerun,
    "_on_postrun": signals.task_postrun,
    "_on_failure": signals.task_failure,
    "_on_revoked": signals.task_revoked,
    "_on_rejected": signals.task_rejected,
    "_on_unknown": signals.task_unknown,
    "_on_worker_named": signals.celeryd_init,
    "_on_worker_init": signals.worker_init,
    "_on_process_named": signals.worker_process_init,
    "_on_process_shutdown": signals.worker_process_shutdown,
    "_on_worker_shutdown": signals.worker_shutdown,
}


class RunTracker:
    """Records goatbeat runs from Celery's signals in this process (and its forked children).

    ``open_log`` opens where the events go and ``times`` gives the heartbeat interval; both
    default to the app's goatbeat configuration (its store, opened as beat opens it, and
    ``goatbeat_heartbeat_interval``). Use :func:`track_runs`.
    """

    def __init__(self, app: Any, *, open_log: Callable[[], RunLog] | None = None,
                 times: RunTimes | None = None, max_events: int = MAX_EVENTS,
                 batch_size: int = BATCH_SIZE, flush_interval: float = FLUSH_INTERVAL) -> None:
        self.app = app
        self._given_open_log = open_log
        self._times = times
        self._writer_options: dict[str, Any] = {
            "max_events": max_events, "batch_size": batch_size,
            "flush_interval": flush_interval}
        self._monotonic = time.monotonic
        self._running: dict[tuple[str, int], tuple[str, float]] = {}
        self._run_ids = _RunIds()
        self._hostname: str | None = None
        self._config: config_module.GoatbeatConfig | None = None
        self._disabled = False
        self._connected = False
        self._writer_lock = threading.Lock()
        self._writer: RunWriter | None = None
        # Writers a fork left behind: never used again, and never closed or collected in the
        # child, whose parent still uses their connections.
        self._abandoned: list[RunWriter] = []
        _after_fork_in_child(self)

    # -- wiring ----------------------------------------------------------------------------
    def connect(self) -> RunTracker:
        """Connect the signal handlers (once; idempotent)."""
        if not self._connected:
            for handler, signal in _SIGNALS.items():
                signal.connect(getattr(self, handler), weak=False,
                               dispatch_uid=f"goatbeat-track-runs-{id(self)}-{handler}")
            self._connected = True
        return self

    def disconnect(self) -> None:
        if self._connected:
            for handler, signal in _SIGNALS.items():
                signal.disconnect(getattr(self, handler),
                                  dispatch_uid=f"goatbeat-track-runs-{id(self)}-{handler}")
            self._connected = False

    @property
    def writer(self) -> RunWriter:
        """This process's writer (made on first use, and again in a forked child)."""
        writer = self._writer
        if writer is None:
            with self._writer_lock:
                writer = self._writer
                if writer is None:
                    writer = self._writer = RunWriter(
                        self._open_log, heartbeat_interval=self._heartbeat_seconds(),
                        running=self.running_keys, **self._writer_options)
        return writer

    def running_keys(self) -> list[str]:
        """The keys of the goatbeat runs this process is running."""
        return [key for key, _ in tuple(self._running)]

    def stop(self, timeout: float = STOP_TIMEOUT) -> bool:
        """Write what is held and stop this process's writer; returns whether all was written."""
        writer = self._writer
        return True if writer is None else writer.stop(timeout)

    def _forked(self) -> None:
        if self._writer is not None:
            self._abandoned.append(self._writer)
        self._writer_lock = threading.Lock()
        self._writer = None
        self._running = {}
        self._run_ids = _RunIds()

    # -- configuration -----------------------------------------------------------------------
    def _load_config(self) -> config_module.GoatbeatConfig | None:
        """The app's goatbeat configuration, read once (at worker start, before any task)."""
        if self._disabled:
            return None
        if self._config is None:
            try:
                self._config = config_module.load(self.app, with_schedules=False).config
            except ConfigurationError as exc:
                self._disabled = True
                logger.error("goatbeat: run tracking is off: %s", exc,
                             extra={"action": "run_tracking_disabled"})
        return self._config

    def _open_log(self) -> RunLog:
        if self._given_open_log is not None:
            return self._given_open_log()
        config = self._load_config()
        if config is None:
            raise ConfigurationError(["run tracking: the goatbeat configuration is invalid"])
        return config.open_store()

    def _heartbeat_seconds(self) -> float:
        times = self._times
        if times is None:
            config = self._load_config()
            times = config.settings.run_times if config is not None else RunTimes()
        return times.heartbeat_interval.total_seconds()

    # -- noting ----------------------------------------------------------------------------
    def _note(self, noted: _Noted) -> None:
        if not self._disabled:
            (self._writer or self.writer).put(noted)

    def _worker_of(self, request: Any) -> str:
        """The worker's node name (``celery@host``), as its main process and its pool
        processes all know it (a request's own ``hostname`` is the bare host name under
        some pools)."""
        if self._hostname:
            return self._hostname
        hostname = getattr(request, "hostname", None)
        if isinstance(hostname, str) and hostname:
            return hostname
        return _default_hostname()

    # -- signal handlers (each catches everything: a task never sees tracking fail) --------
    def _on_prerun(self, sender: Any = None, task_id: str | None = None, task: Any = None,
                   **_: Any) -> None:
        try:
            request = getattr(task, "request", None)
            if (task_id is None or not _sent_by_goatbeat(request)
                    or getattr(request, "is_eager", False)):
                return
            run = self._run_ids.next()
            now = self._monotonic()
            self._running[(task_id, threading.get_ident())] = (run, now)
            self._note((_STARTED, task_id, run, self._hostname or self._worker_of(request), now,
                        None, None, None, None))
        except Exception as exc:
            _handler_failed("task_prerun", exc)

    def _on_postrun(self, sender: Any = None, task_id: str | None = None, task: Any = None,
                    retval: Any = None, state: str | None = None, **_: Any) -> None:
        try:
            if task_id is None:
                return
            entry = self._running.pop((task_id, threading.get_ident()), None)
            if entry is None:
                return
            run, started = entry
            now = self._monotonic()
            worker = self._hostname or self._worker_of(getattr(task, "request", None))
            if state == celery_states.RETRY:
                self._note((_RETRIED, task_id, run, worker, now, None, now - started,
                            error_summary(_exception(retval)), started))
                return
            outcome = _OUTCOMES.get(state or "", _FAILED)
            error = None
            if outcome != _SUCCEEDED:
                error = error_summary(_exception(retval)) or (
                    f"ended in state {state}" if state else "ended without an outcome")
            self._note((_FINISHED, task_id, run, worker, now, outcome, now - started, error,
                        started))
        except Exception as exc:
            _handler_failed("task_postrun", exc)

    def _on_failure(self, sender: Any = None, task_id: str | None = None,
                    exception: BaseException | None = None, **_: Any) -> None:
        # In the process that ran the task, task_postrun reports the failure. This reports the
        # failures the worker's main process announces: a pool process that died (SIGKILL, out
        # of memory) or passed its hard time limit.
        try:
            if task_id is None or any(key == task_id for key, _ in tuple(self._running)):
                return
            request = getattr(sender, "request", None)
            if not _sent_by_goatbeat(request) or getattr(request, "id", task_id) != task_id:
                return
            self._note(_noted(RunEventKind.FINISHED, task_id, None, self._worker_of(request),
                              self._monotonic(), RunOutcome.FAILED,
                              error=error_summary(exception) or "failed"))
        except Exception as exc:
            _handler_failed("task_failure", exc)

    def _on_revoked(self, sender: Any = None, request: Any = None, terminated: bool = False,
                    signum: Any = None, expired: bool = False, **_: Any) -> None:
        try:
            task_id = getattr(request, "id", None)
            if not isinstance(task_id, str) or not _sent_by_goatbeat(request):
                return
            if expired:
                reason = "expired before it started"
            elif terminated:
                reason = f"terminated ({signum})" if signum else "terminated"
            else:
                reason = "revoked"
            self._note(_noted(RunEventKind.FINISHED, task_id, None, self._worker_of(request),
                              self._monotonic(), RunOutcome.REVOKED, error=reason))
        except Exception as exc:
            _handler_failed("task_revoked", exc)

    def _on_rejected(self, sender: Any = None, message: Any = None,
                     exc: BaseException | None = None, **_: Any) -> None:
        try:
            headers = getattr(message, "headers", None)
            task_id = headers.get("id") if isinstance(headers, Mapping) else None
            if not isinstance(task_id, str) or not _headers_sent_by_goatbeat(headers):
                return
            self._note(_noted(RunEventKind.FINISHED, task_id, None, self._worker_of(sender),
                              self._monotonic(), RunOutcome.REJECTED,
                              error=error_summary(exc) or "message rejected by the worker"))
        except Exception as error:
            _handler_failed("task_rejected", error)

    def _on_unknown(self, sender: Any = None, message: Any = None,
                    exc: BaseException | None = None, name: str | None = None,
                    id: str | None = None, **_: Any) -> None:
        try:
            headers = getattr(message, "headers", None)
            if not isinstance(id, str) or not _headers_sent_by_goatbeat(headers):
                return
            self._note(_noted(RunEventKind.FINISHED, id, None, self._worker_of(sender),
                              self._monotonic(), RunOutcome.REJECTED,
                              error=error_summary(f"unregistered task {name!r}")))
        except Exception as error:
            _handler_failed("task_unknown", error)

    def _on_worker_named(self, sender: Any = None, **_: Any) -> None:
        # celeryd_init and worker_process_init are sent with the node name.
        if isinstance(sender, str) and sender:
            self._hostname = sender

    def _on_worker_init(self, sender: Any = None, **_: Any) -> None:
        # Read and check the configuration before any task runs (and before the pool forks),
        # so that no task pays for it and a mistake is reported at start.
        try:
            hostname = getattr(sender, "hostname", None)
            if isinstance(hostname, str) and hostname:
                self._hostname = hostname
            config = self._load_config()
            if config is not None:
                _load_store_code(config.database_url)
        except Exception as exc:
            _handler_failed("worker_init", exc)

    _on_process_named = _on_worker_named

    def _on_process_shutdown(self, **_: Any) -> None:
        self.stop()

    def _on_worker_shutdown(self, **_: Any) -> None:
        self.stop()


def _load_store_code(database_url: str) -> None:
    """Load what opening the store needs (its driver and the schema's head revision, which
    Alembic finds by reading every migration script) once, in the worker's main process, so
    that the pool processes it forks inherit it instead of each paying for it on its first
    write."""
    from goatbeat_celery import migrations
    from goatbeat_celery.store.url import Backend, backend_of

    backend = backend_of(database_url)
    if backend is Backend.POSTGRES:
        import goatbeat_celery.store.postgres  # noqa: F401
    elif backend is Backend.SQLITE:
        import goatbeat_celery.store.sqlite  # noqa: F401
    if backend is not Backend.MEMORY:
        migrations.head_revision()


def _permission_denied(exc: BaseException) -> str | None:
    """The database's words when ``exc`` (or an error it was raised from) is a missing grant,
    such as ``permission denied for table goatbeat_execution``; None otherwise."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if getattr(current, "sqlstate", None) == _INSUFFICIENT_PRIVILEGE:
            text = str(current).strip()
            return text.splitlines()[0] if text else "permission denied"
        orig = getattr(current, "orig", None)  # SQLAlchemy's wrapper of the driver's error
        current = orig if isinstance(orig, BaseException) else current.__cause__
    return None


def _exception(retval: Any) -> BaseException | str | None:
    if isinstance(retval, BaseException):
        return retval
    exception = getattr(retval, "exception", None)  # an ExceptionInfo
    if isinstance(exception, BaseException):
        return exception
    return None if retval is None else str(retval)


def _handler_failed(where: str, exc: Exception) -> None:
    logger.debug("goatbeat: run tracking ignored an error in %s: %r", where, exc)


def _default_hostname() -> str:
    import socket

    return f"celery@{socket.gethostname()}"


class _RunIds:
    """Attempt ids unique across processes: a random prefix per process, then a counter."""

    def __init__(self) -> None:
        self._prefix = secrets.token_hex(6)
        self._counter = itertools.count(1)

    def next(self) -> str:
        return f"{self._prefix}-{next(self._counter):x}"


_trackers: weakref.WeakSet[RunTracker] = weakref.WeakSet()
_fork_hook_lock = threading.Lock()
_fork_hook_registered = False


def _after_fork_in_child(tracker: RunTracker) -> None:
    """Give ``tracker`` a fresh writer in every forked child (a prefork pool process): the
    parent's writer thread does not exist there and its lock may be held."""
    global _fork_hook_registered
    _trackers.add(tracker)
    with _fork_hook_lock:
        if not _fork_hook_registered:
            os.register_at_fork(after_in_child=_reset_in_child)
            _fork_hook_registered = True


def _reset_in_child() -> None:
    for tracker in list(_trackers):
        tracker._forked()


_by_app: weakref.WeakKeyDictionary[Any, RunTracker] = weakref.WeakKeyDictionary()


def track_runs(app: Any) -> RunTracker:
    """Record, in every worker of ``app``, what happens to each run goatbeat submitted.

    Call it once in the module that defines the Celery app (the one ``celery -A`` names), so
    that every worker process runs it. Calling it again for the same app returns the same
    tracker. Nothing connects to the database until a goatbeat run starts; a configuration
    problem is logged when the worker starts and turns tracking off, never failing a task.

    It also sets ``goatbeat_track_runs`` on the app, so that beat, importing the same module,
    knows the workers track runs: only then does it judge a run never started to be lost.
    """
    app.conf.goatbeat_track_runs = True
    tracker = _by_app.get(app)
    if tracker is None:
        tracker = _by_app[app] = RunTracker(app)
    return tracker.connect()


def tracks_runs() -> bool:
    """Whether :func:`track_runs` was called in this process, for any app: a Django project's
    checks and admin, which make an app of their own from the settings, learn it from this."""
    return len(_by_app) > 0
