"""What an operator does to a schedule besides editing it: pause, resume, run now."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery import display
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.tokens import ApiToken
from goatbeat_celery.web.api.answers import json_response
from goatbeat_celery.web.api.context import Api
from goatbeat_celery.web.api.guard import writable
from goatbeat_celery.web.api.reading import body, call, instant, reason
from goatbeat_celery.web.api.schedules import schedule_response


async def pause(request: Request, api: Api, token: ApiToken) -> Response:
    """Pause; ``note`` says why, ``until`` (an instant) ends the pause by itself."""
    name = request.path_params["name"]
    writable(token, name)
    given = await body(request, optional=True)
    problems = [Problem(key, "unknown field", "use: note, until")
                for key in sorted(set(given) - {"note", "until"})]
    until = instant(given.get("until"), "until", problems)
    if problems:
        raise ConfigurationError(problems, subject=f"pause of {name!r}")
    now = await call(api.schedules.now)  # read before the write: nothing fails after it
    schedule = await call(api.schedules.pause, name, note=given.get("note"), until=until,
                          reason=reason(request))
    return schedule_response(api, schedule, now)


async def resume(request: Request, api: Api, token: ApiToken) -> Response:
    name = request.path_params["name"]
    writable(token, name)
    now = await call(api.schedules.now)  # read before the write: nothing fails after it
    schedule = await call(api.schedules.resume, name, reason=reason(request))
    return schedule_response(api, schedule, now)


async def run_now(request: Request, api: Api, token: ApiToken) -> Response:
    """An extra run under its own key; 202: the leader sends it within a second or so."""
    name = request.path_params["name"]
    writable(token, name)
    execution = await call(api.schedules.run_now, name, reason=reason(request))
    return json_response(display.execution_json(execution), 202)
