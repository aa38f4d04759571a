"""Exclusion calendars as resources, scoped by their own names as schedules are
(:mod:`~goatbeat_celery.web.api.token_limits`). A calendar's ``ETag`` is its version."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery import display
from goatbeat_celery.core.types.errors import (
    CalendarInUse,
    CalendarNotFound,
    ConfigurationError,
    ScheduleConflict,
)
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.tokens import ApiToken
from goatbeat_celery.web.api import token_limits
from goatbeat_celery.web.api.answers import HEADERS, json_response
from goatbeat_celery.web.api.context import Api
from goatbeat_celery.web.api.guard import readable, writable
from goatbeat_celery.web.api.reading import (
    body,
    call,
    compared,
    etag,
    expected_version,
    if_match,
    refuse_if_match_on_absent,
    text_problem,
)


async def list_calendars(request: Request, api: Api, token: ApiToken) -> Response:
    found = await call(api.schedules.list_calendars)
    return json_response({"calendars": [display.calendar_json(c) for c in found
                                        if token.covers(c.name)]})


async def get_calendar(request: Request, api: Api, token: ApiToken) -> Response:
    name = request.path_params["name"]
    readable(token, name, CalendarNotFound(name))
    found = await call(api.schedules.get_calendar, name)
    observing = await call(api.schedules.observing, name)
    return json_response({**display.calendar_json(found),
                          "observed_by": token_limits.shown_observers(token, observing)},
                         headers={"ETag": etag(found.version)})


def _put_calendar(api: Api, name: str, given: dict[str, Any], precondition: int | str | None
                  ) -> tuple[Any, bool, list[str]]:
    """The calendar written, whether it was created, and the schedules observing it, read
    before the write (none observe a new one: a schedule names existing calendars only)."""
    schedules = api.schedules
    keywords: dict[str, Any] = {key: () if given.get(key) is None else given[key]
                                for key in ("dates", "ranges")}
    keywords["description"] = given.get("description")
    try:
        current = schedules.get_calendar(name)
    except CalendarNotFound:
        current = None
    if current is None:
        refuse_if_match_on_absent("calendar", name, precondition)
        try:
            return schedules.create_calendar(name, **keywords), True, []
        except ScheduleConflict:
            current = schedules.get_calendar(name)
    expected = expected_version(current.version, precondition)
    observing = schedules.observing(name)
    return schedules.update_calendar(name, **keywords, expected_version=expected), False, observing


async def put_calendar(request: Request, api: Api, token: ApiToken) -> Response:
    """Create or replace a calendar: ``dates``, ``ranges`` and ``description`` (those left out
    are emptied). ``If-Match`` as for schedules, on the calendar's version."""
    name = request.path_params["name"]
    writable(token, name)
    precondition = if_match(request)
    given = await body(request)
    known = {"name", "dates", "ranges", "description"}
    problems = [Problem(key, "unknown field", "use: dates, ranges, description")
                for key in sorted(set(given) - known)]
    problems.extend(text_problem(given.get("description"), "description"))
    if given.get("name", name) != name:
        problems.append(Problem("name", "is not the name in the path",
                                "leave it out, or give the same"))
    if problems:
        raise ConfigurationError(problems, subject=f"calendar {name!r}")
    with compared(precondition):
        calendar, created, observing = await call(_put_calendar, api, name, given, precondition)
    return json_response({**display.calendar_json(calendar),
                          "observed_by": token_limits.shown_observers(token, observing)},
                         201 if created else 200, headers={"ETag": etag(calendar.version)})


async def delete_calendar(request: Request, api: Api, token: ApiToken) -> Response:
    """Remove a calendar; 409 naming the schedules that still observe it (those the token
    may see)."""
    name = request.path_params["name"]
    writable(token, name)
    try:
        await call(api.schedules.delete_calendar, name)
    except CalendarInUse as exc:  # its observers, told as far as the token may see them
        raise token_limits.calendar_in_use(token, exc) from exc
    return Response(status_code=204, headers=HEADERS)
