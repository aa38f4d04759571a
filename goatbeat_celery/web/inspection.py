"""What Celery's workers say of themselves through remote control (``app.control.inspect``):
who answers a ping within a bounded wait, what each runs and holds, the queues it consumes
and its pool; whom a revoke with terminate can stop.

Every function here waits on the broker synchronously: call it in the thread pool.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

logger = logging.getLogger(__name__)

#: Seconds the dashboard waits for workers to answer a broadcast.
INSPECT_TIMEOUT = 1.0

#: The pools whose running task ``revoke(terminate=True)`` can stop: prefork kills the child
#: process, eventlet and gevent kill the green thread. solo and threads cannot: a revoke only
#: keeps a task from starting there.
TERMINATING_POOLS = frozenset({"prefork", "eventlet", "gevent"})


@dataclass(frozen=True)
class TaskSeen:
    """A task a worker runs or holds: its id (a goatbeat run's key), name and, once started,
    its start as the worker's epoch seconds."""

    id: str
    name: str
    started: float | None = None

    @property
    def started_at(self) -> datetime | None:
        return None if self.started is None else datetime.fromtimestamp(self.started,
                                                                         timezone.utc)


@dataclass(frozen=True)
class WorkerState:
    """One worker that answered: its name, pool (``prefork``, ``solo``, ``threads``, …) and
    concurrency, the queues it consumes, the tasks it runs (``active``) and holds unstarted
    (``reserved``: prefetched, or waiting for their ETA)."""

    name: str
    pool: str | None = None
    concurrency: int | None = None
    queues: tuple[str, ...] = ()
    active: list[TaskSeen] = field(default_factory=list)
    reserved: list[TaskSeen] = field(default_factory=list)

    @property
    def terminates(self) -> bool:
        """Whether a revoke with terminate stops a task running here."""
        return self.pool in TERMINATING_POOLS


@dataclass(frozen=True)
class WorkersReport:
    """The workers that answered within ``timeout`` seconds (none: ``problem`` says why, or
    none answered)."""

    timeout: float
    workers: list[WorkerState]
    problem: str | None = None

    def consumers_of(self, queue: str) -> list[str]:
        return [worker.name for worker in self.workers if queue in worker.queues]

    def running(self, task_id: str) -> WorkerState | None:
        """The worker that reports ``task_id`` running, if one answered so."""
        return next((worker for worker in self.workers
                     if any(task.id == task_id for task in worker.active)), None)


def read_workers(app: Any, timeout: float = INSPECT_TIMEOUT, *,
                 queues_only: bool = False) -> WorkersReport:
    """Ping the workers, wait at most ``timeout`` seconds for answers, then ask the ones that
    answered (each later call ends as soon as they all have) what they consume and, unless
    ``queues_only``, what they run, hold and are."""
    try:
        answered = sorted(app.control.inspect(timeout=timeout).ping() or {})
        if not answered:
            return WorkersReport(timeout, [])
        inspect = app.control.inspect(timeout=timeout, destination=answered)
        queues = inspect.active_queues() or {}
        active = {} if queues_only else inspect.active() or {}
        reserved = {} if queues_only else inspect.reserved() or {}
        stats = {} if queues_only else inspect.stats() or {}
    # The broker may be down or refuse: the page says so instead of failing.
    except Exception as exc:  # noqa: BLE001
        logger.warning("inspecting the workers failed: %s", exc,
                       extra={"action": "inspect_workers"})
        return WorkersReport(timeout, [], f"the workers could not be asked "
                                          f"({type(exc).__name__}: {exc})")
    return WorkersReport(timeout, [
        _worker(name, queues.get(name), active.get(name), reserved.get(name), stats.get(name))
        for name in answered])


def _worker(name: str, queues: Any, active: Any, reserved: Any, stats: Any) -> WorkerState:
    pool = stats.get("pool") if isinstance(stats, Mapping) else None
    pool = pool if isinstance(pool, Mapping) else {}
    concurrency = pool.get("max-concurrency")
    return WorkerState(
        name=name, pool=pool_name(pool.get("implementation")),
        concurrency=concurrency if isinstance(concurrency, int) else None,
        queues=tuple(sorted(str(queue.get("name")) for queue in _listed(queues))),
        active=[_task(task) for task in _listed(active)],
        reserved=[_task(task) for task in _listed(reserved)])


def pool_name(implementation: object) -> str | None:
    """``prefork`` of ``celery.concurrency.prefork:TaskPool``; ``threads`` of its thread
    pool, as the worker's ``--pool`` option names it."""
    if not isinstance(implementation, str) or not implementation:
        return None
    module = implementation.split(":")[0].rsplit(".", 1)[-1]
    return {"thread": "threads"}.get(module, module)


def _listed(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(
        value, list) else []


def _task(task: Mapping[str, Any]) -> TaskSeen:
    started = task.get("time_start")
    return TaskSeen(id=str(task.get("id", "")), name=str(task.get("name", "")),
                    started=float(started) if isinstance(started, (int, float)) else None)
