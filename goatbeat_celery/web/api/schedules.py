"""Schedules as resources: list, read, create or replace (PUT), change (PATCH), delete.

A schedule's ``ETag`` is its definition's version (``Schedule.version``): runs, claims and
pauses never move it, so ``If-Match`` guards an edit against other edits only and is never
refused because the schedule ran.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery import display, spec_input
from goatbeat_celery.core.rules.controls import tag_filter_problems
from goatbeat_celery.core.rules.sync import config_row_refusal
from goatbeat_celery.core.types.errors import ConfigurationError, ScheduleConflict, ScheduleNotFound
from goatbeat_celery.core.types.listing import RunOrderCursor, ScheduleOrder
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSpec
from goatbeat_celery.core.types.tokens import ApiToken
from goatbeat_celery.web.api import token_limits
from goatbeat_celery.web.api.answers import HEADERS, json_response, location
from goatbeat_celery.web.api.context import Api
from goatbeat_celery.web.api.guard import readable, writable
from goatbeat_celery.web.api.problem import ApiProblem
from goatbeat_celery.web.api.reading import (
    REASON_HEADER,
    body,
    call,
    compared,
    etag,
    expected_version,
    if_match,
    instant,
    query_int,
    reason,
    refuse_if_match_on_absent,
)

#: Schedules per page of a list unless ``limit`` says otherwise.
DEFAULT_LIMIT = 100
STATES = ("enabled", "paused", "set-aside")
#: What a PUT may give: the keywords of ``Schedules.create`` besides the name.
TRIGGER_KEYS = (*spec_input.TRIGGER_KEYWORDS, "timezone", "day_or")
DEFINITION_KEYS = frozenset({"task", "enabled", *TRIGGER_KEYS, *spec_input.SPEC_FIELDS})
#: Keys a client may send in a body that the API takes elsewhere, with where.
ELSEWHERE = {"reason": f"give it in the {REASON_HEADER} header",
             "expected_version": 'give it as If-Match: "N" (the ETag a GET returned)'}
#: What a PUT gives the fields it leaves out: a new schedule's values.
_SPEC_DEFAULTS = {f.name: (f.default_factory() if f.default_factory is not dataclasses.MISSING
                           else f.default)
                  for f in dataclasses.fields(ScheduleSpec) if f.name in spec_input.SPEC_FIELDS
                  and (f.default is not dataclasses.MISSING
                       or f.default_factory is not dataclasses.MISSING)}


def schedule_response(api: Api, schedule: Schedule, now: datetime, status: int = 200,
                      headers: Mapping[str, str] | None = None) -> Response:
    """The schedule's document, its ``ETag`` its definition's version."""
    document = display.schedule_json(schedule, api.schedules.config.settings, now)
    return json_response(document, status,
                         headers={"ETag": etag(schedule.version), **(headers or {})})


def _listed(api: Api, token: ApiToken, request: Request
            ) -> tuple[list[Schedule], bool, datetime]:
    query = request.query_params
    problems: list[Problem] = []
    limit = query_int(request, "limit", DEFAULT_LIMIT)
    state = query.get("state", "")
    if state and state not in STATES:
        problems.append(Problem("state", f"unknown state {state!r}",
                                f"use one of: {', '.join(STATES)}"))
    order_text = query.get("order") or ScheduleOrder.NAME.value
    last = query.get("after") or None
    after: str | RunOrderCursor | None = last
    if last is not None and order_text == ScheduleOrder.NEXT_RUN.value:
        run_at = instant(query.get("after_run") or None, "after_run", problems)
        after = RunOrderCursor(next_run_at=run_at, name=last)
    tags = query.getlist("tag")
    problems.extend(tag_filter_problems(tags, "tag"))
    if problems:
        raise ConfigurationError(problems, subject="list arguments")
    prefix = query.get("prefix") or None
    if token.prefix is not None:
        if prefix is None or token.prefix.startswith(prefix):
            prefix = token.prefix
        elif not prefix.startswith(token.prefix):
            return [], False, api.schedules.now()  # nothing this token may see
    filters: dict[str, Any] = {}
    if state == "enabled":
        filters.update(enabled=True, set_aside=False)
    elif state == "paused":
        filters["enabled"] = False
    elif state == "set-aside":
        filters["set_aside"] = True
    found = api.schedules.list(prefix=prefix, source=query.get("source") or None,
                               tags=tags, order=order_text, after=after,
                               limit=limit + 1, **filters)
    return found[:limit], len(found) > limit, api.schedules.now()


async def list_schedules(request: Request, api: Api, token: ApiToken) -> Response:
    """Keyset paging: ``next`` is the link to the page after this one (null on the last)."""
    found, more, now = await call(_listed, api, token, request)
    defaults = api.schedules.config.settings
    following = None
    if more and found:
        last = found[-1]
        query = {key: value for key, value in request.query_params.multi_items()
                 if key not in ("after", "after_run")}
        query["after"] = last.name
        if request.query_params.get("order") == ScheduleOrder.NEXT_RUN.value:
            query["after_run"] = display.iso(last.next_run_at) or ""
        following = f"{request.url.path}?{urlencode(query)}"
    return json_response({"schedules": [display.schedule_json(s, defaults, now) for s in found],
                          "next": following})


def _read(api: Api, name: str) -> tuple[Schedule, datetime]:
    return api.schedules.get(name), api.schedules.now()


async def get_schedule(request: Request, api: Api, token: ApiToken) -> Response:
    name = request.path_params["name"]
    readable(token, name, ScheduleNotFound(name))
    schedule, now = await call(_read, api, name)
    return schedule_response(api, schedule, now)


def config_row_refused(schedule: Schedule) -> None:
    """409 for a schedule that comes from the app's ``beat_schedule``: edited there only."""
    refusal = config_row_refusal(schedule)
    if refusal is not None:
        raise ApiProblem(409, "Defined in configuration", refusal)


def _definition(given: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The keywords of ``Schedules.create`` a PUT gives; 422 naming every key it does not
    take, and a ``name`` other than the path's."""
    problems = _unknown_keys(given)
    if "task" not in given:
        problems.append(Problem("task", "is required", "give the task's name: a PUT gives the "
                                "whole definition (PATCH changes some fields)"))
    if "name" in given and given["name"] != name:
        problems.append(Problem("name", f"{given['name']!r} is not the name in the path "
                                f"({name!r})", "leave it out, or give the same"))
    if problems:
        raise ApiProblem(422, "Invalid input", "the definition cannot be read; nothing was "
                         "changed", tuple(problems))
    return {key: value for key, value in given.items() if key != "name"}


def _unknown_keys(given: Mapping[str, Any]) -> list[Problem]:
    """A problem for each key of a PUT or PATCH body that is no field of a definition."""
    return [Problem(key, "unknown field", ELSEWHERE.get(key) or "use: "
                    + ", ".join(sorted(DEFINITION_KEYS)))
            for key in sorted(set(given) - DEFINITION_KEYS - {"name"})]


def _put_schedule(api: Api, name: str, given: dict[str, Any], precondition: int | str | None,
                  create_only: bool, why: str | None) -> tuple[Schedule, bool, datetime]:
    """Create ``name`` from ``given``, or replace its whole definition: fields left out take
    the values a new schedule would have (``enabled`` alone is kept, as pause and resume set
    it). Returns the schedule, whether it was created, and the store's now (read before the
    write, as everything the answer needs: nothing can fail once the write is made)."""
    schedules = api.schedules
    try:
        current: Schedule | None = schedules.get(name)
    except ScheduleNotFound:
        current = None
    now = schedules.now()
    if current is None:
        refuse_if_match_on_absent("schedule", name, precondition)
        keywords = dict(given)
        task = keywords.pop("task", None)
        try:
            created = schedules.create(name, task, **keywords, reason=why)
            return created, True, now
        except ScheduleConflict:
            # Made by another request since this one looked: answered as a PUT over it,
            # which If-None-Match refuses and a plain PUT replaces.
            current = schedules.get(name)
    if create_only:
        raise ApiProblem(412, "Precondition failed", f"a schedule named {name!r} exists "
                         "(If-None-Match: *)")
    config_row_refused(current)
    cron = given.get("cron")
    # A whole definition: a zone left out is the app's, not the replaced trigger's.
    zoned = cron is not None or given.get("rrule") is not None
    keywords = {**{k: dict(v) if isinstance(v, dict) else v for k, v in _SPEC_DEFAULTS.items()},
                **{k: v for k, v in given.items() if k in spec_input.SPEC_FIELDS}}
    expected = expected_version(current.version, precondition)
    updated = schedules.update(
        name, every=given.get("every"), cron=cron, at=given.get("at"),
        rrule=given.get("rrule"), solar=given.get("solar"),
        timezone=given.get("timezone", schedules.default_timezone if zoned else None),
        day_or=given.get("day_or", True if cron is not None else None),
        enabled=given.get("enabled"), expected_version=expected, reason=why, **keywords)
    return updated, False, now


async def put_schedule(request: Request, api: Api, token: ApiToken) -> Response:
    """Create or replace, idempotently: the same body twice leaves one schedule at one
    version. ``If-Match: "N"`` replaces only version N (412 otherwise), ``If-Match: *`` only
    an existing schedule, ``If-None-Match: *`` only creates."""
    name = request.path_params["name"]
    writable(token, name)
    precondition = if_match(request)
    create_only = (request.headers.get("if-none-match") or "").strip() == "*"
    given = _definition(await body(request), name)
    await call(token_limits.refuse_beyond_token, api.schedules, token, name, given)
    created_at = {"Location": location(request)}  # built before the write: it cannot fail after
    with compared(precondition):
        schedule, created, now = await call(_put_schedule, api, name, given, precondition,
                                            create_only, reason(request))
    if created:
        return schedule_response(api, schedule, now, 201, created_at)
    return schedule_response(api, schedule, now)


def _patch_schedule(api: Api, name: str, given: dict[str, Any],
                    precondition: int | str | None, why: str | None
                    ) -> tuple[Schedule, datetime]:
    schedules = api.schedules
    current = schedules.get(name)
    config_row_refused(current)
    expected = expected_version(current.version, precondition)
    changes = dict(given)
    triggers = {key: changes.pop(key, None) for key in TRIGGER_KEYS}
    now = schedules.now()  # read before the write, as in _put_schedule
    updated = schedules.update(name, **triggers, enabled=changes.pop("enabled", None),
                               expected_version=expected, reason=why, **changes)
    return updated, now


async def patch_schedule(request: Request, api: Api, token: ApiToken) -> Response:
    """Change the fields given (null: unset one that may be unset); the others stay."""
    name = request.path_params["name"]
    writable(token, name)
    precondition = if_match(request)
    given = await body(request)
    problems = _unknown_keys(given)
    if "name" in given:
        problems.append(Problem("name", "cannot be changed", "create a schedule under the new "
                                "name and delete this one"))
    if problems:
        raise ApiProblem(422, "Invalid input", "nothing was changed", tuple(problems))
    await call(token_limits.refuse_beyond_token, api.schedules, token, name, given)
    with compared(precondition):
        schedule, now = await call(_patch_schedule, api, name, given, precondition,
                                   reason(request))
    return schedule_response(api, schedule, now)


async def delete_schedule(request: Request, api: Api, token: ApiToken) -> Response:
    """Remove a schedule; its runs stay as history. Unconditional: If-Match is refused (428
    would promise a check the removal does not make atomically)."""
    name = request.path_params["name"]
    writable(token, name)
    if request.headers.get("if-match") is not None:
        raise ApiProblem(400, "If-Match not taken", "a removal does not compare versions; "
                         "send DELETE without If-Match")
    current = await call(api.schedules.get, name)
    config_row_refused(current)
    await call(api.schedules.delete, name, reason=reason(request))
    return Response(status_code=204, headers=HEADERS)
