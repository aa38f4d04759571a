"""Run tracking's Celery side: :class:`RunTracker` connects to Celery's task and worker
signals, notes each event of a run goatbeat sent for the process's
:class:`~goatbeat_celery.worker.tracking.writer.RunWriter`, and gives every forked pool process a
writer of its own; :func:`track_runs` installs it for an app.
"""

from __future__ import annotations

import itertools
import logging
import os
import secrets
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from celery import signals
from celery import states as celery_states

from goatbeat_celery import config as config_module
from goatbeat_celery.core.protocols import RunLog
from goatbeat_celery.core.rules.runs import RunEventKind, RunOutcome, RunTimes, error_summary
from goatbeat_celery.core.rules.tracebacks import traceback_text
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.execution import is_key_of
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.headers import OCCURRENCE, SCHEDULE
from goatbeat_celery.worker.tracking.duplicates import DuplicateCheck, install
from goatbeat_celery.worker.tracking.writer import (
    _FINISHED,
    _RETRIED,
    _STARTED,
    BATCH_SIZE,
    FLUSH_INTERVAL,
    MAX_EVENTS,
    STOP_TIMEOUT,
    RunWriter,
    _Noted,
    _noted,
)

logger = logging.getLogger(__name__)

__all__ = ["RunTracker", "track_runs", "tracks_runs"]


def _sent_by_goatbeat(request: Any, task_id: object) -> bool:
    """Whether a task request carries goatbeat's headers (as attributes, or in its
    ``headers``) and its task id is the key of the run they name: a report is written only
    onto that run."""
    schedule = getattr(request, SCHEDULE, None)
    occurrence = getattr(request, OCCURRENCE, None)
    if schedule is None or occurrence is None:
        headers = getattr(request, "headers", None)
        if isinstance(headers, Mapping):
            schedule = headers.get(SCHEDULE, schedule)
            occurrence = headers.get(OCCURRENCE, occurrence)
    return is_key_of(task_id, schedule, occurrence)


def _headers_sent_by_goatbeat(headers: Any, task_id: object) -> bool:
    """Whether a message's headers are goatbeat's, for the run whose key is ``task_id``."""
    return isinstance(headers, Mapping) and is_key_of(task_id, headers.get(SCHEDULE),
                                                      headers.get(OCCURRENCE))


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
        #: Deliveries sent again, checked against their rows in the main process.
        self.duplicates = DuplicateCheck(self._open_log, self._run_times,
                                         lambda: self._hostname or _default_hostname())
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
        self.duplicates.forked()

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
            raise ConfigurationError(
                [Problem("", "run tracking: the goatbeat configuration is invalid")])
        return config.open_store()

    def _run_times(self) -> RunTimes:
        times = self._times
        if times is None:
            config = self._load_config()
            times = config.settings.run_times if config is not None else RunTimes()
        return times

    def _heartbeat_seconds(self) -> float:
        return self._run_times().heartbeat_interval.total_seconds()

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
            if (task_id is None or not _sent_by_goatbeat(request, task_id)
                    or getattr(request, "is_eager", False)):
                return
            run = self._run_ids.next()
            now = self._monotonic()
            self._running[(task_id, threading.get_ident())] = (run, now)
            self._note((_STARTED, task_id, run, self._hostname or self._worker_of(request), now,
                        None, None, None, None, None))
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
            if state != celery_states.RETRY:
                self.duplicates.ended(task_id, now)
            if state == celery_states.RETRY:
                raised = _exception(retval)
                self._note((_RETRIED, task_id, run, worker, now, None, now - started,
                            error_summary(raised), started, _traceback(raised)))
                return
            outcome = _OUTCOMES.get(state or "", _FAILED)
            error = traceback = None
            if outcome != _SUCCEEDED:
                raised = _exception(retval)
                error = error_summary(raised) or (
                    f"ended in state {state}" if state else "ended without an outcome")
                traceback = _traceback(raised)
            self._note((_FINISHED, task_id, run, worker, now, outcome, now - started, error,
                        started, traceback))
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
            if (not _sent_by_goatbeat(request, task_id)
                    or getattr(request, "id", task_id) != task_id):
                return
            self._note(_noted(RunEventKind.FINISHED, task_id, None, self._worker_of(request),
                              self._monotonic(), RunOutcome.FAILED,
                              error=error_summary(exception) or "failed",
                              traceback=_traceback(exception)))
        except Exception as exc:
            _handler_failed("task_failure", exc)

    def _on_revoked(self, sender: Any = None, request: Any = None, terminated: bool = False,
                    signum: Any = None, expired: bool = False, **_: Any) -> None:
        try:
            task_id = getattr(request, "id", None)
            if not isinstance(task_id, str) or not _sent_by_goatbeat(request, task_id):
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
            if not isinstance(task_id, str) or not _headers_sent_by_goatbeat(headers, task_id):
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
            if not isinstance(id, str) or not _headers_sent_by_goatbeat(headers, id):
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
            if not self._disabled:
                # Before the consumer builds its strategies, which read each task's Request.
                install(self.app, self.duplicates)
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
    elif backend is Backend.MYSQL:
        import goatbeat_celery.store.mysql  # noqa: F401
    if backend is not Backend.MEMORY:
        migrations.head_revision()


def _exception(retval: Any) -> BaseException | str | None:
    if isinstance(retval, BaseException):
        return retval
    exception = getattr(retval, "exception", None)  # an ExceptionInfo
    if isinstance(exception, BaseException):
        return exception
    return None if retval is None else str(retval)


def _traceback(raised: BaseException | str | None) -> str | None:
    """The traceback recorded with a run's error: an exception's own, never a string's."""
    return traceback_text(raised) if isinstance(raised, BaseException) else None


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
