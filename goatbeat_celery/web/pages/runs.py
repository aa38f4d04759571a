"""A run's page (``/run?key=``): one execution, found by its idempotency key."""

from __future__ import annotations

from datetime import datetime

from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery import display
from goatbeat_celery.core.types.errors import ScheduleNotFound
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.web.pages import workers
from goatbeat_celery.web.pages.base import Context, call, notice, render
from goatbeat_celery.web.pages.errors import RunNotShown


def _read_run(context: Context, key: str) -> tuple[Execution, Schedule | None, datetime]:
    found = context.schedules.executions_by_key([key])
    if key not in found:
        raise RunNotShown(key)
    execution = found[key]
    try:
        schedule: Schedule | None = context.schedules.get(execution.schedule_name)
    except ScheduleNotFound:
        schedule = None  # removed since: its history stays
    return execution, schedule, context.schedules.now()


async def run_page(request: Request, context: Context) -> Response:
    key = request.query_params.get("key", "")
    execution, schedule, now = await call(_read_run, context, key)
    zone = (context.schedules.default_timezone if schedule is None
            else display.zone_of(schedule.spec.trigger) or context.schedules.default_timezone)
    queue = await call(workers.read_run_queue, context, execution, schedule)
    return render(request, context, "run.html", e=execution, s=schedule, now=now, zone=zone,
                  status=display.run_status(execution), late=display.lateness(execution),
                  queue=queue, notice=notice(request))
