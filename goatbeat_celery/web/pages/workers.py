"""Workers and queues (``/workers``): what Celery's workers answer through remote control and
what the broker says of each queue the app routes to; for a run's page, where a run sent and
never started waits, and whether anyone consumes it; and the revoke a run's page posts.

Workers are asked with a bounded wait (:data:`~goatbeat_celery.web.inspection.
INSPECT_TIMEOUT`) in the thread pool, as the database is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.web import inspection, queues
from goatbeat_celery.web.pages.base import Context, call, redirect, refusal, render, text
from goatbeat_celery.web.pages.errors import RunNotShown

#: The schedules read to know which queues the app routes to.
SCHEDULES_READ = 1000
NO_APP = ("This dashboard was given no Celery app, so it cannot ask workers or the broker: "
          "serve it with celery goatbeat web, or pass celery_app to create_app.")


@dataclass(frozen=True)
class QueueRow:
    """One queue on the workers page: the broker's word, the workers that said they consume
    it, and how many schedules are routed to it."""

    state: queues.QueueState
    workers: list[str]
    schedules: int


@dataclass(frozen=True)
class _Seen:
    now: datetime
    workers: inspection.WorkersReport
    broker: queues.BrokerReport
    rows: list[QueueRow] = field(default_factory=list)


def _read(context: Context, app: Any) -> _Seen:
    now = context.schedules.now()
    workers = inspection.read_workers(app)
    routed: dict[str, int] = {}
    for schedule in context.schedules.list(limit=SCHEDULES_READ):
        # A rotated schedule sends to each of its queues in turn.
        for name in schedule.spec.rotate or (
                queues.route_of(app, schedule.spec.task, schedule.spec.options).queue,):
            routed[name] = routed.get(name, 0) + 1
    consumed = [queue for worker in workers.workers for queue in worker.queues]
    names = sorted({*queues.known_queues(app, (), consumed), *routed})
    broker = queues.read_queues(app, names)
    rows = [QueueRow(broker.of(name) or queues.QueueState(name, None, None, broker.problem),
                     workers.consumers_of(name), routed.get(name, 0)) for name in names]
    return _Seen(now, workers, broker, rows)


async def workers_page(request: Request, context: Context) -> Response:
    app = context.celery_app
    if app is None:
        return render(request, context, "workers.html", seen=None, no_app=NO_APP)
    seen = await call(_read, context, app)
    return render(request, context, "workers.html", seen=seen, no_app=None,
                  terminating=sorted(inspection.TERMINATING_POOLS))


@dataclass(frozen=True)
class RunQueue:
    """Where a run sent and never started waits: its route, the queue's state by the
    broker, and the workers that said they consume it (``workers`` None: not asked)."""

    route: queues.Route
    state: queues.QueueState | None
    broker_problem: str | None
    workers: inspection.WorkersReport


def _waiting(execution: Execution) -> bool:
    """Sent, and no start recorded (nor an end)."""
    return (execution.state is ExecutionState.SUBMITTED and execution.run_state is None
            and execution.started_at is None)


def read_run_queue(context: Context, execution: Execution,
                   schedule: Schedule | None) -> RunQueue | None:
    """For a run sent and never started whose schedule still exists, where it waits; None
    for any other run (or without a Celery app). Synchronous: call it in the thread pool."""
    app = context.celery_app
    if app is None or schedule is None or not _waiting(execution):
        return None
    # A rotated schedule's run went to the queue recorded with it.
    route = (queues.Route(queue=execution.cluster) if execution.cluster
             else queues.route_of(app, schedule.spec.task, schedule.spec.options))
    broker = queues.read_queues(app, [route.queue])
    workers = inspection.read_workers(app, queues_only=True)
    return RunQueue(route, broker.of(route.queue), broker.problem, workers)


async def revoke(request: Request, context: Context, form: FormData) -> Response:
    """Revoke the run ``key`` (``terminate``: and stop it if it runs, where the pool can),
    recorded in its schedule's audit log; back to its page saying so."""
    key = text(form, "key")
    app = context.celery_app
    if app is None:
        return refusal(request, context, 409, "No Celery app", NO_APP + " Nothing was sent.")
    terminate = text(form, "terminate") == "1"
    found = await call(context.schedules.executions_by_key, [key])
    if key not in found:
        raise RunNotShown(key)
    await call(context.schedules.revoke, key, app, terminate=terminate,
               reason=text(form, "reason") or None)
    return redirect(request, "run", key=key, notice="terminated" if terminate else "revoked")
