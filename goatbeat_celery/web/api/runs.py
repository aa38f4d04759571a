"""A schedule's runs: those it made (history), and those it will make (next)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery import display
from goatbeat_celery.core.rules.controls import MAX_PREVIEW
from goatbeat_celery.core.types.errors import ScheduleNotFound
from goatbeat_celery.core.types.tokens import ApiToken
from goatbeat_celery.web.api.answers import json_response
from goatbeat_celery.web.api.context import Api
from goatbeat_celery.web.api.guard import readable
from goatbeat_celery.web.api.reading import call, query_int


async def history(request: Request, api: Api, token: ApiToken) -> Response:
    name = request.path_params["name"]
    readable(token, name, ScheduleNotFound(name))
    limit = query_int(request, "limit", 20)
    runs = await call(api.schedules.history, name, limit=limit)
    return json_response({"runs": [display.execution_json(e) for e in runs]})


async def next_runs(request: Request, api: Api, token: ApiToken) -> Response:
    name = request.path_params["name"]
    readable(token, name, ScheduleNotFound(name))
    count = query_int(request, "count", 5, MAX_PREVIEW)
    runs = await call(api.schedules.next_runs, name, count)
    return json_response({"next_runs": [display.iso(at) for at in runs]})
