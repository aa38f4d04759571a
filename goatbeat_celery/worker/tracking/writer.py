"""The writer of run events: a bounded in-memory buffer filled by the tasks' threads, and one
daemon thread per process that writes it to the run log in batches, retries through an outage
and sends the heartbeat of the runs in progress.

It knows nothing of Celery: :mod:`goatbeat_celery.worker.tracking.signals` notes the events.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import timedelta

from goatbeat_celery.core.links import doc
from goatbeat_celery.core.protocols import RunLog
from goatbeat_celery.core.rules.runs import RunEvent, RunEventKind, RunOutcome
from goatbeat_celery.core.types.errors import StoreUnavailable

logger = logging.getLogger(__name__)

__all__ = ["BATCH_SIZE", "FLUSH_INTERVAL", "MAX_EVENTS", "STOP_TIMEOUT", "RunWriter",
           "WriterStats"]

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
_WORKER_ROLE_DOC = doc("deploying.md#a-worker-role-with-the-least-rights")


#: What a task's thread notes, turned into a RunEvent when written: (kind, key, run, worker,
#: at, outcome, runtime, error, started, traceback), instants on this process's monotonic
#: clock, kind and outcome as their values. A plain tuple of strings and numbers, which the
#: garbage collector stops tracking at its first look: a busy worker's buffer of events would
#: otherwise move to the oldest generation and lengthen its full collections.
_Noted = tuple[str, str, str | None, str, float, str | None, float | None, str | None,
               float | None, str | None]
_STARTED, _RETRIED, _FINISHED = (RunEventKind.STARTED.value, RunEventKind.RETRIED.value,
                                 RunEventKind.FINISHED.value)
_KINDS = {kind.value: kind for kind in RunEventKind}
_OUTCOME_OF = {outcome.value: outcome for outcome in RunOutcome}


def _noted(kind: RunEventKind, key: str, run: str | None, worker: str, at: float,
           outcome: RunOutcome | None = None, runtime: float | None = None,
           error: str | None = None, started: float | None = None,
           traceback: str | None = None) -> _Noted:
    """A noted event, from its parts."""
    return (kind.value, key, run, worker, at, None if outcome is None else outcome.value,
            runtime, error, started, traceback)


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
        # carries its start (core.rules.runs.apply_event): one report per task instead of two.
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
    kind, key, run, worker, at, outcome, runtime, error, started, traceback = noted
    # timedelta(0, seconds): positional, a third cheaper than by keyword, once per report.
    return RunEvent(
        key=key, kind=_KINDS[kind], run=run, worker=worker,
        age=timedelta(0, now - at if now > at else 0.0),
        outcome=None if outcome is None else _OUTCOME_OF[outcome],
        runtime=None if runtime is None else timedelta(0, runtime), error=error,
        started_age=(None if started is None
                     else timedelta(0, now - started if now > started else 0.0)),
        traceback=traceback,
    )


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
