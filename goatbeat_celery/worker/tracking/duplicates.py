"""Duplicate deliveries, suppressed on the worker when it tracks runs.

A run may reach the workers twice under its key: beat sends it again when it cannot know the
broker took it (a publish whose reply was lost, a failover), or when no worker started it in
time (a resend); a broker restored from its files delivers again what it had handed out. Celery
does not deduplicate task ids, so each copy would run.

Each goatbeat message says which send it is (header ``goatbeat_send``), and the broker says
whether it delivers a message again (``redelivered``). A delivery that is neither a first send
nor the broker's first delivery is checked, in the worker's main process before it goes to the
pool: against what the worker holds (another copy received or running here, or ended here in
the last seconds, which the database may not know yet), then against the run's row (one
indexed read), where :func:`~goatbeat_celery.core.rules.runs.duplicate_reason` says whether
the run ended or is running elsewhere with a live heartbeat. A duplicate is acknowledged and
not run, with a log line
(``action=duplicate_suppressed``), the :data:`~goatbeat_celery.signals.run_duplicate_suppressed`
signal and the counter ``goatbeat_duplicates_suppressed_total``. A first send is never checked,
so tracking adds no read to the common path.

What remains: a copy that reaches another worker (or, under the prefork pool, this one just
after the first ended) before the first attempt's start or end is written (the worker's writer
batches every 0.5 s) finds nothing and runs.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from celery.worker import state as worker_state
from celery.worker.request import Request
from celery.worker.state import task_ready

from goatbeat_celery import signals
from goatbeat_celery.core.protocols import RunLog
from goatbeat_celery.core.rules.runs import RunTimes, duplicate_reason
from goatbeat_celery.core.types.execution import is_key_of
from goatbeat_celery.headers import OCCURRENCE, SCHEDULE, SEND

logger = logging.getLogger(__name__)

__all__ = ["DuplicateCheck", "install"]

#: How many runs ended in this process are remembered, and for how long (seconds): longer
#: than the writer takes to write their ends, outages of the database aside.
ENDED_KEPT = 10_000
ENDED_FOR = 30.0
#: After a check the database failed, deliveries run unchecked this long (seconds).
UNCHECKED_AFTER_FAILURE = 5.0
#: The worker's counter of suppressed deliveries (``_total`` added by prometheus_client).
DUPLICATES_METRIC = "goatbeat_duplicates_suppressed"
#: Celery's own request class: a task that names another keeps it (and goes unchecked).
_CELERY_REQUEST = "celery.worker.request:Request"


class DuplicateCheck:
    """Judges deliveries sent again against their rows, through a RunLog of its own opened on
    first use (``open_log``), in the worker's main process."""

    def __init__(self, open_log: Callable[[], RunLog], times: Callable[[], RunTimes],
                 worker: Callable[[], str]) -> None:
        self._open_log = open_log
        self._times = times
        self._worker = worker
        self._log: RunLog | None = None
        self._lock = threading.Lock()
        self._counter = _counter()
        # Runs this process ended lately (key → monotonic instant): what the database learns
        # only with the writer's next batch.
        self._ended: dict[str, float] = {}
        self._ended_lock = threading.Lock()
        self._unchecked_until = 0.0

    def forked(self) -> None:
        """In a forked child: the parent's connections are not ours to use."""
        self._log = None
        self._lock = threading.Lock()
        self._ended = {}
        self._ended_lock = threading.Lock()

    def ended(self, task_id: str, at: float) -> None:
        """Note that a run ended in this process (a pool thread's task_postrun), kept until its
        report has surely been written: at most :data:`ENDED_KEPT` runs for
        :data:`ENDED_FOR` seconds."""
        with self._ended_lock:
            ended = self._ended
            ended[task_id] = at
            if len(ended) > ENDED_KEPT:
                for key in list(itertools.islice(ended, len(ended) - ENDED_KEPT)):
                    del ended[key]

    def _local_reason(self, task_id: str, request: Any, now: float) -> str | None:
        """Why a delivery is a duplicate by what this worker itself holds: another copy
        received or running here, or the run ended here moments ago."""
        for others, what in ((worker_state.active_requests, "running"),
                             (worker_state.reserved_requests, "received")):
            for other in list(others):
                if other is not request and getattr(other, "id", None) == task_id:
                    return f"another copy is {what} in this worker"
        with self._ended_lock:
            at = self._ended.get(task_id)
        if at is not None and now - at < ENDED_FOR:
            return "the run already ended in this worker"
        return None

    def reason(self, task_id: str, headers: Any, delivery_info: Any,
               request: Any = None) -> str | None:
        """Why this delivery must not run (None: run it). Never raises: a check that fails
        runs the task, as it would have run without tracking."""
        if not isinstance(headers, Mapping) or not is_key_of(task_id, headers.get(SCHEDULE),
                                                             headers.get(OCCURRENCE)):
            return None  # not a run goatbeat sent under this key
        send = headers.get(SEND)
        redelivered = isinstance(delivery_info, Mapping) \
            and bool(delivery_info.get("redelivered"))
        if not redelivered and not (isinstance(send, int) and send > 1):
            return None  # a first send, delivered once: the common path reads nothing
        now = time.monotonic()
        local = self._local_reason(task_id, request, now)
        if local is not None:
            return local
        if now < self._unchecked_until:
            return None  # the database failed a check moments ago: do not hold the consumer
        try:
            with self._lock:
                if self._log is None:
                    self._log = self._open_log()
                log = self._log
            store_now, found = log.read_runs([task_id])
            return duplicate_reason(found.get(task_id), now=store_now,
                                    live_for=self._times().run_lost_after,
                                    redelivered=redelivered)
        except Exception as exc:
            # The check runs on the worker's consumer thread: while the database fails, the
            # deliveries of the next seconds run unchecked rather than each waiting on it.
            self._unchecked_until = time.monotonic() + UNCHECKED_AFTER_FAILURE
            logger.warning("goatbeat: could not check whether %s already ran (%s); running it, "
                           "and the deliveries of the next %gs unchecked", task_id, exc,
                           UNCHECKED_AFTER_FAILURE, extra={"action": "duplicate_check_failed"})
            return None

    def suppressed(self, task_id: str, headers: Mapping[str, Any], reason: str) -> None:
        """Report a delivery acknowledged and not run."""
        schedule = headers.get(SCHEDULE)
        logger.info("goatbeat: delivery of %s acknowledged and not run: %s", task_id, reason,
                    extra={"action": "duplicate_suppressed", "key": task_id})
        if self._counter is not None:
            self._counter.inc()
        try:
            signals.run_duplicate_suppressed.send(
                sender=None, key=task_id, schedule_name=schedule, reason=reason,
                worker=self._worker())
        except Exception as exc:  # a receiver must not stop the worker's consumer
            logger.debug("goatbeat: run_duplicate_suppressed receiver failed: %r", exc)


def request_class(check: DuplicateCheck) -> type[Request]:
    """Celery's request class, checking each delivery sent again with ``check`` before it
    goes to the pool."""

    class GoatbeatRequest(Request):  # type: ignore[misc]  # celery is untyped
        _goatbeat_judged = False

        def revoked(self) -> bool:
            # Called by execute_using_pool before the pool gets the task; True makes the
            # worker drop it quietly (TaskRevokedError is caught there).
            if super().revoked():
                return True
            if self._goatbeat_judged:
                return False
            self._goatbeat_judged = True
            headers = getattr(self.message, "headers", None)
            reason = check.reason(self.id, headers, self.delivery_info, self)
            if reason is None or not isinstance(headers, Mapping):
                return False
            task_ready(self)
            self.acknowledge()
            self._already_revoked = True
            check.suppressed(self.id, headers, reason)
            return True

    return GoatbeatRequest


def install(app: Any, check: DuplicateCheck) -> int:
    """Give each task of ``app`` that uses Celery's own request class the checking one;
    returns how many. Run in the worker's main process once the tasks are imported, before
    the consumer builds its strategies (``worker_init``)."""
    cls = request_class(check)
    installed = 0
    for task in app.tasks.values():
        current = getattr(task, "Request", None)
        if current == _CELERY_REQUEST or current is Request:
            task.Request = cls
            installed += 1
    return installed


def _counter() -> Any:
    """The Prometheus counter, when prometheus_client is installed (the ``metrics`` extra):
    in the default registry, which the worker's own exporter, if any, serves."""
    try:
        import prometheus_client
    except ImportError:
        return None
    try:
        return prometheus_client.Counter(
            DUPLICATES_METRIC,
            "Deliveries of goatbeat runs acknowledged and not run: the run had ended or was "
            "running elsewhere (run tracking)")
    except ValueError:  # registered already, by another tracker of this process
        from prometheus_client import REGISTRY

        return REGISTRY._names_to_collectors.get(f"{DUPLICATES_METRIC}_total")
