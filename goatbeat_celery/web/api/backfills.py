"""Backfills: past occurrences run on demand, listed, read and cancelled by id.

A backfill is known by its id alone, so one of a schedule outside the token's prefix is
answered as absent (404).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery import display
from goatbeat_celery.core.rules.backfill import Backfill, BackfillPreview
from goatbeat_celery.core.types.errors import (
    BackfillNotFound,
    ConfigurationError,
    ScheduleNotFound,
)
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.tokens import ApiToken
from goatbeat_celery.web.api.answers import API_PREFIX, json_response
from goatbeat_celery.web.api.context import Api
from goatbeat_celery.web.api.guard import readable, writable
from goatbeat_celery.web.api.reading import body, call, instant, query_bool, query_int, reason

#: What a request to start a backfill may give.
START_KEYS = frozenset({"start", "end", "mode", "newest_first", "per_tick", "dry_run"})


def _backfill_id(request: Request) -> int:
    text = request.path_params["id"]
    if not (text.isascii() and text.isdigit() and len(text) <= 18):
        raise BackfillNotFound(0)
    return int(text)


async def list_backfills(request: Request, api: Api, token: ApiToken) -> Response:
    """Newest first; with a prefix token, those of its schedules among the newest ``limit``."""
    schedule = request.query_params.get("schedule") or None
    if schedule is not None and not token.covers(schedule):
        return json_response({"backfills": []})
    found = await call(api.schedules.backfills, name=schedule,
                       active=query_bool(request, "active"),
                       limit=query_int(request, "limit", 100))
    return json_response({"backfills": [display.backfill_json(b) for b in found
                                        if token.covers(b.schedule_name)]})


async def schedule_backfills(request: Request, api: Api, token: ApiToken) -> Response:
    name = request.path_params["name"]
    readable(token, name, ScheduleNotFound(name))
    await call(api.schedules.get, name)  # 404 for a name that is not a schedule
    found = await call(api.schedules.backfills, name=name,
                       limit=query_int(request, "limit", 100))
    return json_response({"backfills": [display.backfill_json(b) for b in found]})


async def get_backfill(request: Request, api: Api, token: ApiToken) -> Response:
    """The backfill, its progress and ``outcomes``: what became of its occurrences."""
    identifier = _backfill_id(request)
    found: Backfill = await call(api.schedules.get_backfill, identifier)
    readable(token, found.schedule_name, BackfillNotFound(identifier))
    if found.damage:  # its outcomes cannot be judged: the row as it reads, with its damage
        return json_response({**display.backfill_json(found), "outcomes": None})
    outcomes = await call(api.schedules.backfill_outcomes, identifier)
    return json_response({**display.backfill_json(outcomes.backfill),
                          "outcomes": display.backfill_outcomes_json(outcomes)})


async def rerun_failed(request: Request, api: Api, token: ApiToken) -> Response:
    """Run again the occurrences whose latest run failed, under new keys (201); 409 when
    none failed."""
    identifier = _backfill_id(request)
    found: Backfill = await call(api.schedules.get_backfill, identifier)
    readable(token, found.schedule_name, BackfillNotFound(identifier))
    writable(token, found.schedule_name)
    rerun = await call(api.schedules.rerun_failed, identifier, reason=reason(request))
    return json_response(display.rerun_json(rerun), 201,
                         headers={"Location": f"{API_PREFIX}/backfills/{identifier}"})


async def start_backfill(request: Request, api: Api, token: ApiToken) -> Response:
    """Run the past occurrences in ``[start, end]`` that ``mode`` selects; ``dry_run`` stores
    nothing and answers what would run (200), a stored backfill answers 201."""
    name = request.path_params["name"]
    writable(token, name)
    given = await body(request)
    problems = [Problem(key, "unknown field", "use: " + ", ".join(sorted(START_KEYS)))
                for key in sorted(set(given) - START_KEYS)]
    start = instant(given.get("start"), "start", problems)
    end = instant(given.get("end"), "end", problems)
    for key in ("start", "end"):
        if given.get(key) is None:
            problems.append(Problem(key, "is required", "give ISO-8601 text with an offset"))
    for key in ("newest_first", "dry_run"):
        if not isinstance(given.get(key, False), bool):
            problems.append(Problem(key, "expected true or false"))
    if problems:
        raise ConfigurationError(problems, subject="backfill")
    assert start is not None and end is not None
    result = await call(api.schedules.backfill, name, start, end,
                        mode=given.get("mode", "missing"),
                        newest_first=given.get("newest_first", False),
                        per_tick=given.get("per_tick"), dry_run=given.get("dry_run", False),
                        reason=reason(request))
    if isinstance(result, BackfillPreview):
        return json_response(display.backfill_preview_json(result))
    return json_response(display.backfill_json(result), 201,
                         headers={"Location": f"{API_PREFIX}/backfills/{result.id}"})


async def cancel_backfill(request: Request, api: Api, token: ApiToken) -> Response:
    identifier = _backfill_id(request)
    found: Backfill = await call(api.schedules.get_backfill, identifier)
    readable(token, found.schedule_name, BackfillNotFound(identifier))
    cancelled = await call(api.schedules.cancel_backfill, identifier, reason=reason(request))
    return json_response(display.backfill_json(cancelled))
