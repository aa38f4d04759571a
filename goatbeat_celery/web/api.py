"""The JSON API under ``/api/v1``, served beside the dashboard by the same application.

Every change goes through :class:`~goatbeat_celery.api.Schedules`, so the API refuses what the
CLI and the pages refuse, with the same problems (a field, a message, a hint), as
``application/problem+json``. A schedule's ``ETag`` is its definition's version
(``Schedule.spec_version``): runs, claims and pauses never move it, so ``If-Match`` guards an
edit against other edits only and is never refused because the schedule ran.

Who may call it: a bearer token from the token table (``celery -A proj goatbeat token
create``), with scopes (``read``, ``write``, ``run``) and an optional name prefix. Cookies are
never read here, so a browser's session on the dashboard is worth nothing to the API, and no
CSRF token is needed: a cross-site page cannot attach a bearer token. The ``Host`` check and
the refusal of state changes a browser marks as sent from another site are the dashboard's
(:mod:`~goatbeat_celery.web.security`).

Changes are recorded in the audit log as made by ``token:<name>``, with the reason given in
the ``X-Goatbeat-Reason`` header.

A token limited to a prefix answers a read of a name outside it with 404, exactly as for a
name that does not exist, so it cannot learn what other teams have; and refuses a write of
such a name with 403 before anything is looked up, since the refusal depends on the name
alone and reveals nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from goatbeat_celery import display, specs
from goatbeat_celery.core.rules.backfill import Backfill, BackfillPreview
from goatbeat_celery.core.rules.controls import MAX_PREVIEW, tag_filter_problems
from goatbeat_celery.core.rules.sync import config_row_refusal
from goatbeat_celery.core.types.errors import (
    BackfillNotFound,
    CalendarInUse,
    CalendarNotFound,
    ConfigurationError,
    GoatbeatError,
    ScheduleConflict,
    ScheduleNotFound,
)
from goatbeat_celery.core.types.listing import RunOrderCursor, ScheduleOrder
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSpec
from goatbeat_celery.core.types.tokens import ApiToken, Scope
from goatbeat_celery.tokens import Tokens
from goatbeat_celery.web import bodies, token_limits
from goatbeat_celery.web.api_answers import (
    API_PREFIX,
    HEADERS,
    location,
    path_refusal,
    problem_response,
    translated,
)
from goatbeat_celery.web.api_answers import json_response as _json
from goatbeat_celery.web.api_json import read_document
from goatbeat_celery.web.problem import ApiProblem
from goatbeat_celery.web.security import WebSettings, cross_site_refusal, host_refusal

if TYPE_CHECKING:
    from goatbeat_celery.api import Schedules

#: Schedules per page of a list unless ``limit`` says otherwise.
DEFAULT_LIMIT = 100
#: The most items one response lists (schedules, runs, backfills).
MAX_PAGE = 1000
#: The largest request body read (a schedule's definition is a few kilobytes).
MAX_BODY = 1024 * 1024
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
JSON_TYPES = frozenset({"application/json", "application/merge-patch+json"})
STATES = ("enabled", "paused", "set-aside")
#: The header a change's reason is given in (recorded in the audit log).
REASON_HEADER = "X-Goatbeat-Reason"
#: What a PUT may give: the keywords of ``Schedules.create`` besides the name.
TRIGGER_KEYS = ("every", "cron", "at", "timezone", "day_or")
DEFINITION_KEYS = frozenset({"task", "enabled", *TRIGGER_KEYS, *specs.SPEC_FIELDS})

Handler = Callable[[Request, "_Api", ApiToken], Awaitable[Response]]


@dataclass(frozen=True)
class _Api:
    schedules: Schedules
    settings: WebSettings
    tokens: Tokens


def api_routes(schedules: Schedules, settings: WebSettings) -> list[Route]:
    """The API's routes, to add to the dashboard's application (paths under
    :data:`API_PREFIX`)."""
    api = _Api(schedules=schedules, settings=settings, tokens=Tokens.of(schedules))

    def route(path: str, handler: Handler, methods: list[str], scope: Scope) -> Route:
        return Route(API_PREFIX + path, _guarded(api, handler, scope), methods=methods)

    # Sub-resources before the bare name: a name may hold "/", and "{name:path}" is greedy.
    named = "/schedules/{name:path}"
    return [
        Route(API_PREFIX + "/openapi.json", _openapi_endpoint(api), methods=["GET"]),
        route("/schedules", _list, ["GET"], Scope.READ),
        route(named + "/history", _history, ["GET"], Scope.READ),
        route(named + "/next", _next_runs, ["GET"], Scope.READ),
        route(named + "/audit", _audit, ["GET"], Scope.READ),
        route(named + "/pause", _pause, ["POST"], Scope.WRITE),
        route(named + "/resume", _resume, ["POST"], Scope.WRITE),
        route(named + "/run", _run_now, ["POST"], Scope.RUN),
        route(named + "/backfills", _schedule_backfills, ["GET"], Scope.READ),
        route(named + "/backfills", _backfill_start, ["POST"], Scope.RUN),
        route(named, _get, ["GET"], Scope.READ),
        route(named, _put, ["PUT"], Scope.WRITE),
        route(named, _patch, ["PATCH"], Scope.WRITE),
        route(named, _delete, ["DELETE"], Scope.WRITE),
        route("/backfills", _backfills, ["GET"], Scope.READ),
        route("/backfills/{id}", _backfill, ["GET"], Scope.READ),
        route("/backfills/{id}/cancel", _backfill_cancel, ["POST"], Scope.RUN),
        route("/calendars", _calendars, ["GET"], Scope.READ),
        route("/calendars/{name:path}", _calendar, ["GET"], Scope.READ),
        route("/calendars/{name:path}", _calendar_put, ["PUT"], Scope.WRITE),
        route("/calendars/{name:path}", _calendar_delete, ["DELETE"], Scope.WRITE),
    ]


# -- the checks every request passes ------------------------------------------------------------
def _guarded(api: _Api, handler: Handler, scope: Scope) -> Callable[[Request], Awaitable[Response]]:
    """``handler`` behind the API's checks, in this order: the ``Host`` the request names (400),
    a state change a browser marks as sent from another site (403), the bearer token (401),
    its scope (403), a read-only server (403); then goatbeat's errors as problems."""

    async def endpoint(request: Request) -> Response:
        try:
            misdirected = host_refusal(request.headers.get("host"), api.settings)
            if misdirected is not None:
                raise ApiProblem(400, "Misdirected request", misdirected)
            unreadable = path_refusal(request)
            if unreadable is not None:
                raise unreadable
            if request.method not in SAFE_METHODS:
                reason = cross_site_refusal(origin=request.headers.get("origin"),
                                            fetch_site=request.headers.get("sec-fetch-site"),
                                            host_header=request.headers.get("host"))
                if reason is not None:
                    raise ApiProblem(403, "Sent from another site",
                                     f"refused because {reason}; nothing was changed")
            token = await _token(api, request)
            if not token.allows(scope):
                raise ApiProblem(403, "Missing scope",
                                 f"token {token.name!r} has no {scope.value!r} scope; make a "
                                 f"token with --scope {scope.value}")
            if api.settings.read_only and scope is not Scope.READ:
                raise ApiProblem(403, "Read-only", "this server was started read-only; nothing "
                                 "was changed")
            # Every change this request makes is recorded as the token's.
            acting = dataclasses.replace(api, schedules=api.schedules.acting_as(token.actor))
            return await handler(request, acting, token)
        except ApiProblem as exc:
            return problem_response(exc)
        except GoatbeatError as exc:
            return problem_response(translated(exc))

    return endpoint


async def _token(api: _Api, request: Request) -> ApiToken:
    """The live token the request's ``Authorization: Bearer`` header gives; cookies, basic
    auth and the dashboard's own token are not read."""
    scheme, _, secret = (request.headers.get("authorization") or "").partition(" ")
    challenge = {"WWW-Authenticate": 'Bearer realm="goatbeat"'}
    if scheme.lower() != "bearer" or not secret.strip():
        raise ApiProblem(401, "Token required",
                         "give a token as 'Authorization: Bearer <secret>' (celery -A proj "
                         "goatbeat token create NAME --scope read)", headers=challenge)
    token = await run_in_threadpool(api.tokens.verify, secret.strip())
    if token is None:
        raise ApiProblem(401, "Unknown token", "this token is unknown or revoked",
                         headers=challenge)
    return token


def _readable(token: ApiToken, name: str, missing: GoatbeatError) -> None:
    """404, as for a name that does not exist, when ``name`` is outside the token's prefix."""
    if not token.covers(name):
        raise missing


def _writable(token: ApiToken, name: str) -> None:
    """403 when ``name`` is outside the token's prefix, judged on the name alone."""
    if not token.covers(name):
        raise ApiProblem(403, "Outside the token's prefix",
                         f"token {token.name!r} may change only names starting with "
                         f"{token.prefix!r}; nothing was changed")


async def _body(request: Request, *, optional: bool = False) -> dict[str, Any]:
    """The request's JSON object; 415, 413 or 400 for anything else, 422 naming each field
    that holds what no field may (:func:`~goatbeat_celery.web.api_json.read_document`)."""
    raw = await bodies.read(request, MAX_BODY, refuse=ApiProblem)
    if not raw and optional:
        return {}
    media = bodies.media_type(request)
    if media not in JSON_TYPES:
        raise ApiProblem(415, "JSON expected",
                         "send the body as JSON with 'Content-Type: application/json'")
    return read_document(raw)


def _call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Awaitable[Any]:
    return run_in_threadpool(functools.partial(function, *args, **kwargs))


def _reason(request: Request) -> str | None:
    """The reason the audit log records with the change: the ``X-Goatbeat-Reason`` header
    (UTF-8; checked by ``Schedules``, as every face's)."""
    given = request.headers.get(REASON_HEADER)
    if given is None:
        return None
    try:
        return given.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return given


def _etag(version: int) -> str:
    return f'"{version}"'


def _if_match(request: Request) -> int | None | str:
    """``If-Match``: the definition version it names, ``"*"``, or None when absent; 412 for
    a value that is no version of ours (a list, a weak tag): it cannot match."""
    given = request.headers.get("if-match")
    if given is None:
        return None
    text = given.strip()
    if text == "*":
        return "*"
    found = re.fullmatch(r'"(\d{1,18})"', text)
    if found is None:
        raise ApiProblem(412, "Precondition failed",
                         f"If-Match {given!r} names no version of this resource; give the "
                         'ETag a GET returned, such as "3"')
    return int(found.group(1))


def _conflict(exc: ScheduleConflict, guarded: bool) -> ApiProblem:
    """A lost compare-and-set: 412 when the client named the version it read (If-Match),
    409 when it did not (another edit came between this request's own read and write)."""
    if guarded:
        return ApiProblem(412, "Precondition failed", str(exc))
    return ApiProblem(409, "Conflict", str(exc))


def _refuse_if_match_on_absent(kind: str, name: str, precondition: int | str | None) -> None:
    """If-Match on a resource that does not exist cannot match: 412 (a PUT without it
    creates)."""
    if precondition is not None:
        raise ApiProblem(412, "Precondition failed",
                         f"no {kind} named {name!r}: If-Match needs one to exist")


def _expected_version(current: int, precondition: int | str | None) -> int:
    """The version a write compares with: the one If-Match names, else the one just read
    (no If-Match, or ``*``)."""
    expected = current if precondition in (None, "*") else precondition
    assert isinstance(expected, int)
    return expected


def _schedule_response(api: _Api, schedule: Schedule, now: datetime, status: int = 200,
                       headers: Mapping[str, str] | None = None) -> Response:
    document = display.schedule_json(schedule, api.schedules.config.settings, now)
    return _json(document, status,
                 headers={"ETag": _etag(schedule.spec_version), **(headers or {})})


def _text_problem(value: Any, label: str) -> list[Problem]:
    return [] if value is None or isinstance(value, str) else [
        Problem(label, f"expected text, got {type(value).__name__}")]


def _instant(value: Any, label: str, problems: list[Problem]) -> datetime | None:
    """An instant from ISO-8601 text with an offset; None (problem appended) otherwise."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            found = datetime.fromisoformat(value)
        except ValueError:
            found = None
        if found is not None and found.utcoffset() is not None:
            return found
    problems.append(Problem(label, f"cannot read {value!r} as an instant",
                            "give ISO-8601 text with an offset, such as "
                            "'2030-01-01T09:00:00+01:00'"))
    return None


def _query_int(request: Request, key: str, default: int, most: int = MAX_PAGE) -> int:
    text = request.query_params.get(key)
    if text is None or text == "":
        return default
    if not (text.isascii() and text.isdigit() and len(text) <= 18 and 1 <= int(text) <= most):
        raise ApiProblem(422, "Invalid input", f"invalid {key}", (
            Problem(key, f"expected a whole number from 1 to {most}, got {text!r}"),))
    return int(text)


def _query_bool(request: Request, key: str) -> bool | None:
    text = request.query_params.get(key)
    if text is None or text == "":
        return None
    if text in ("true", "false"):
        return text == "true"
    raise ApiProblem(422, "Invalid input", f"invalid {key}", (
        Problem(key, f"expected true or false, got {text!r}"),))


# -- the OpenAPI document -----------------------------------------------------------------------
def _openapi_endpoint(api: _Api) -> Callable[[Request], Awaitable[Response]]:
    async def openapi(request: Request) -> Response:
        """The API's description; public (it holds no data), behind the ``Host`` check."""
        from goatbeat_celery.web.openapi import document

        misdirected = host_refusal(request.headers.get("host"), api.settings)
        if misdirected is not None:
            return problem_response(ApiProblem(400, "Misdirected request", misdirected))
        root = str(request.scope.get("root_path") or "")
        return _json(document(server=root + API_PREFIX))

    return openapi


# -- schedules ----------------------------------------------------------------------------------
def _listed(api: _Api, token: ApiToken, request: Request
            ) -> tuple[list[Schedule], bool, datetime]:
    query = request.query_params
    problems: list[Problem] = []
    limit = _query_int(request, "limit", DEFAULT_LIMIT)
    state = query.get("state", "")
    if state and state not in STATES:
        problems.append(Problem("state", f"unknown state {state!r}",
                                f"use one of: {', '.join(STATES)}"))
    order_text = query.get("order") or ScheduleOrder.NAME.value
    last = query.get("after") or None
    after: str | RunOrderCursor | None = last
    if last is not None and order_text == ScheduleOrder.NEXT_RUN.value:
        run_at = _instant(query.get("after_run") or None, "after_run", problems)
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
            return [], False, api.schedules.store.now()  # nothing this token may see
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
    return found[:limit], len(found) > limit, api.schedules.store.now()


async def _list(request: Request, api: _Api, token: ApiToken) -> Response:
    """Keyset paging: ``next`` is the link to the page after this one (null on the last)."""
    found, more, now = await _call(_listed, api, token, request)
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
    return _json({"schedules": [display.schedule_json(s, defaults, now) for s in found],
                  "next": following})


def _read(api: _Api, name: str) -> tuple[Schedule, datetime]:
    return api.schedules.get(name), api.schedules.store.now()


async def _get(request: Request, api: _Api, token: ApiToken) -> Response:
    name = request.path_params["name"]
    _readable(token, name, ScheduleNotFound(name))
    schedule, now = await _call(_read, api, name)
    return _schedule_response(api, schedule, now)


def _config_row_refusal(schedule: Schedule) -> None:
    refusal = config_row_refusal(schedule)
    if refusal is not None:
        raise ApiProblem(409, "Defined in configuration", refusal)


def _definition(body: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The keywords of ``Schedules.create`` a PUT gives; 422 naming every key it does not
    take, and a ``name`` other than the path's."""
    problems = _unknown_keys(body)
    if "task" not in body:
        problems.append(Problem("task", "is required", "give the task's name: a PUT gives the "
                                "whole definition (PATCH changes some fields)"))
    if "name" in body and body["name"] != name:
        problems.append(Problem("name", f"{body['name']!r} is not the name in the path "
                                f"({name!r})", "leave it out, or give the same"))
    if problems:
        raise ApiProblem(422, "Invalid input", "the definition cannot be read; nothing was "
                         "changed", tuple(problems))
    return {key: value for key, value in body.items() if key != "name"}


#: Keys a client may send in a body that the API takes elsewhere, with where.
ELSEWHERE = {"reason": f"give it in the {REASON_HEADER} header",
             "expected_version": 'give it as If-Match: "N" (the ETag a GET returned)'}


def _unknown_keys(body: Mapping[str, Any]) -> list[Problem]:
    """A problem for each key of a PUT or PATCH body that is no field of a definition."""
    return [Problem(key, "unknown field", ELSEWHERE.get(key) or "use: "
                    + ", ".join(sorted(DEFINITION_KEYS)))
            for key in sorted(set(body) - DEFINITION_KEYS - {"name"})]


#: What a PUT gives the fields it leaves out: a new schedule's values.
_SPEC_DEFAULTS = {f.name: (f.default_factory() if f.default_factory is not dataclasses.MISSING
                           else f.default)
                  for f in dataclasses.fields(ScheduleSpec) if f.name in specs.SPEC_FIELDS
                  and (f.default is not dataclasses.MISSING
                       or f.default_factory is not dataclasses.MISSING)}


def _put_schedule(api: _Api, name: str, given: dict[str, Any], precondition: int | str | None,
                  create_only: bool, reason: str | None) -> tuple[Schedule, bool, datetime]:
    """Create ``name`` from ``given``, or replace its whole definition: fields left out take
    the values a new schedule would have (``enabled`` alone is kept, as pause and resume set
    it). Returns the schedule, whether it was created, and the store's now (read before the
    write, as everything the answer needs: nothing can fail once the write is made)."""
    schedules = api.schedules
    try:
        current: Schedule | None = schedules.get(name)
    except ScheduleNotFound:
        current = None
    now = schedules.store.now()
    if current is None:
        _refuse_if_match_on_absent("schedule", name, precondition)
        keywords = dict(given)
        task = keywords.pop("task", None)
        try:
            created = schedules.create(name, task, **keywords, reason=reason)
            return created, True, now
        except ScheduleConflict:
            # Made by another request since this one looked: answered as a PUT over it,
            # which If-None-Match refuses and a plain PUT replaces.
            current = schedules.get(name)
    if create_only:
        raise ApiProblem(412, "Precondition failed", f"a schedule named {name!r} exists "
                         "(If-None-Match: *)")
    _config_row_refusal(current)
    cron = given.get("cron")
    keywords = {**{k: dict(v) if isinstance(v, dict) else v for k, v in _SPEC_DEFAULTS.items()},
                **{k: v for k, v in given.items() if k in specs.SPEC_FIELDS}}
    expected = _expected_version(current.spec_version, precondition)
    updated = schedules.update(
        name, every=given.get("every"), cron=cron, at=given.get("at"),
        timezone=given.get("timezone", schedules.default_timezone if cron is not None else None),
        day_or=given.get("day_or", True if cron is not None else None),
        enabled=given.get("enabled"), expected_version=expected, reason=reason, **keywords)
    return updated, False, now


async def _put(request: Request, api: _Api, token: ApiToken) -> Response:
    """Create or replace, idempotently: the same body twice leaves one schedule at one
    version. ``If-Match: "N"`` replaces only version N (412 otherwise), ``If-Match: *`` only
    an existing schedule, ``If-None-Match: *`` only creates."""
    name = request.path_params["name"]
    _writable(token, name)
    precondition = _if_match(request)
    create_only = (request.headers.get("if-none-match") or "").strip() == "*"
    given = _definition(await _body(request), name)
    await _call(token_limits.refuse_beyond_token, api.schedules, token, name, given)
    created_at = {"Location": location(request)}  # built before the write: it cannot fail after
    try:
        schedule, created, now = await _call(_put_schedule, api, name, given, precondition,
                                             create_only, _reason(request))
    except ScheduleConflict as exc:
        raise _conflict(exc, precondition is not None) from exc
    if created:
        return _schedule_response(api, schedule, now, 201, created_at)
    return _schedule_response(api, schedule, now)


def _patch_schedule(api: _Api, name: str, given: dict[str, Any],
                    precondition: int | str | None, reason: str | None
                    ) -> tuple[Schedule, datetime]:
    schedules = api.schedules
    current = schedules.get(name)
    _config_row_refusal(current)
    expected = _expected_version(current.spec_version, precondition)
    changes = dict(given)
    triggers = {key: changes.pop(key, None) for key in TRIGGER_KEYS}
    now = schedules.store.now()  # read before the write, as in _put_schedule
    updated = schedules.update(name, **triggers, enabled=changes.pop("enabled", None),
                               expected_version=expected, reason=reason, **changes)
    return updated, now


async def _patch(request: Request, api: _Api, token: ApiToken) -> Response:
    """Change the fields given (null: unset one that may be unset); the others stay."""
    name = request.path_params["name"]
    _writable(token, name)
    precondition = _if_match(request)
    given = await _body(request)
    problems = _unknown_keys(given)
    if "name" in given:
        problems.append(Problem("name", "cannot be changed", "create a schedule under the new "
                                "name and delete this one"))
    if problems:
        raise ApiProblem(422, "Invalid input", "nothing was changed", tuple(problems))
    await _call(token_limits.refuse_beyond_token, api.schedules, token, name, given)
    try:
        schedule, now = await _call(_patch_schedule, api, name, given, precondition,
                                    _reason(request))
    except ScheduleConflict as exc:
        raise _conflict(exc, precondition is not None) from exc
    return _schedule_response(api, schedule, now)


async def _delete(request: Request, api: _Api, token: ApiToken) -> Response:
    """Remove a schedule; its runs stay as history. Unconditional: If-Match is refused (428
    would promise a check the removal does not make atomically)."""
    name = request.path_params["name"]
    _writable(token, name)
    if request.headers.get("if-match") is not None:
        raise ApiProblem(400, "If-Match not taken", "a removal does not compare versions; "
                         "send DELETE without If-Match")
    current = await _call(api.schedules.get, name)
    _config_row_refusal(current)
    await _call(api.schedules.delete, name, reason=_reason(request))
    return Response(status_code=204, headers=HEADERS)


async def _pause(request: Request, api: _Api, token: ApiToken) -> Response:
    """Pause; ``note`` says why, ``until`` (an instant) ends the pause by itself."""
    name = request.path_params["name"]
    _writable(token, name)
    body = await _body(request, optional=True)
    problems = [Problem(key, "unknown field", "use: note, until")
                for key in sorted(set(body) - {"note", "until"})]
    until = _instant(body.get("until"), "until", problems)
    if problems:
        raise ConfigurationError(problems, subject=f"pause of {name!r}")
    now = await _call(api.schedules.store.now)  # read before the write, as in _put_schedule
    schedule = await _call(api.schedules.pause, name, note=body.get("note"), until=until,
                           reason=_reason(request))
    return _schedule_response(api, schedule, now)


async def _resume(request: Request, api: _Api, token: ApiToken) -> Response:
    name = request.path_params["name"]
    _writable(token, name)
    now = await _call(api.schedules.store.now)  # read before the write, as in _put_schedule
    schedule = await _call(api.schedules.resume, name, reason=_reason(request))
    return _schedule_response(api, schedule, now)


async def _run_now(request: Request, api: _Api, token: ApiToken) -> Response:
    """An extra run under its own key; 202: the leader sends it within a second or so."""
    name = request.path_params["name"]
    _writable(token, name)
    execution = await _call(api.schedules.run_now, name, reason=_reason(request))
    return _json(display.execution_json(execution), 202)


async def _history(request: Request, api: _Api, token: ApiToken) -> Response:
    name = request.path_params["name"]
    _readable(token, name, ScheduleNotFound(name))
    limit = _query_int(request, "limit", 20)
    runs = await _call(api.schedules.history, name, limit=limit)
    return _json({"runs": [display.execution_json(e) for e in runs]})


async def _next_runs(request: Request, api: _Api, token: ApiToken) -> Response:
    name = request.path_params["name"]
    _readable(token, name, ScheduleNotFound(name))
    count = _query_int(request, "count", 5, MAX_PREVIEW)
    runs = await _call(api.schedules.next_runs, name, count)
    return _json({"next_runs": [display.iso(at) for at in runs]})


async def _audit(request: Request, api: _Api, token: ApiToken) -> Response:
    """Its changes, newest first (who, why, each field before and after), also after it was
    deleted; ``next`` links to the older ones."""
    name = request.path_params["name"]
    _readable(token, name, ScheduleNotFound(name))
    limit = _query_int(request, "limit", 50)
    before = request.query_params.get("before_id")
    before_id = _query_int(request, "before_id", 0, 2**62) if before else None
    found = await _call(api.schedules.audit, name, limit=limit + 1, before_id=before_id)
    following = None
    if len(found) > limit:
        found = found[:limit]
        following = f"{request.url.path}?{urlencode({'limit': limit, 'before_id': found[-1].id})}"
    return _json({"entries": [display.audit_json(e) for e in found], "next": following})


# -- backfills ----------------------------------------------------------------------------------
def _backfill_id(request: Request) -> int:
    text = request.path_params["id"]
    if not (text.isascii() and text.isdigit() and len(text) <= 18):
        raise BackfillNotFound(0)
    return int(text)


async def _backfills(request: Request, api: _Api, token: ApiToken) -> Response:
    """Newest first; with a prefix token, those of its schedules among the newest ``limit``."""
    schedule = request.query_params.get("schedule") or None
    if schedule is not None and not token.covers(schedule):
        return _json({"backfills": []})
    found = await _call(api.schedules.backfills, name=schedule,
                        active=_query_bool(request, "active"),
                        limit=_query_int(request, "limit", 100))
    return _json({"backfills": [display.backfill_json(b) for b in found
                                if token.covers(b.schedule_name)]})


async def _schedule_backfills(request: Request, api: _Api, token: ApiToken) -> Response:
    name = request.path_params["name"]
    _readable(token, name, ScheduleNotFound(name))
    await _call(api.schedules.get, name)  # 404 for a name that is not a schedule
    found = await _call(api.schedules.backfills, name=name,
                        limit=_query_int(request, "limit", 100))
    return _json({"backfills": [display.backfill_json(b) for b in found]})


async def _backfill(request: Request, api: _Api, token: ApiToken) -> Response:
    identifier = _backfill_id(request)
    found: Backfill = await _call(api.schedules.get_backfill, identifier)
    _readable(token, found.schedule_name, BackfillNotFound(identifier))
    return _json(display.backfill_json(found))


async def _backfill_start(request: Request, api: _Api, token: ApiToken) -> Response:
    """Run the past occurrences in ``[start, end]`` that ``mode`` selects; ``dry_run`` stores
    nothing and answers what would run (200), a stored backfill answers 201."""
    name = request.path_params["name"]
    _writable(token, name)
    body = await _body(request)
    known = {"start", "end", "mode", "newest_first", "per_tick", "dry_run"}
    problems = [Problem(key, "unknown field", "use: " + ", ".join(sorted(known)))
                for key in sorted(set(body) - known)]
    start = _instant(body.get("start"), "start", problems)
    end = _instant(body.get("end"), "end", problems)
    for key in ("start", "end"):
        if body.get(key) is None:
            problems.append(Problem(key, "is required", "give ISO-8601 text with an offset"))
    for key in ("newest_first", "dry_run"):
        if not isinstance(body.get(key, False), bool):
            problems.append(Problem(key, "expected true or false"))
    if problems:
        raise ConfigurationError(problems, subject="backfill")
    assert start is not None and end is not None
    result = await _call(api.schedules.backfill, name, start, end,
                         mode=body.get("mode", "missing"),
                         newest_first=body.get("newest_first", False),
                         per_tick=body.get("per_tick"), dry_run=body.get("dry_run", False),
                         reason=_reason(request))
    if isinstance(result, BackfillPreview):
        return _json(display.backfill_preview_json(result))
    return _json(display.backfill_json(result), 201,
                 headers={"Location": f"{API_PREFIX}/backfills/{result.id}"})


async def _backfill_cancel(request: Request, api: _Api, token: ApiToken) -> Response:
    identifier = _backfill_id(request)
    found: Backfill = await _call(api.schedules.get_backfill, identifier)
    # Known by its id only: one of another prefix is answered as absent.
    _readable(token, found.schedule_name, BackfillNotFound(identifier))
    cancelled = await _call(api.schedules.cancel_backfill, identifier,
                            reason=_reason(request))
    return _json(display.backfill_json(cancelled))


# -- calendars ----------------------------------------------------------------------------------
async def _calendars(request: Request, api: _Api, token: ApiToken) -> Response:
    found = await _call(api.schedules.list_calendars)
    return _json({"calendars": [display.calendar_json(c) for c in found
                                if token.covers(c.name)]})


async def _calendar(request: Request, api: _Api, token: ApiToken) -> Response:
    name = request.path_params["name"]
    _readable(token, name, CalendarNotFound(name))
    found = await _call(api.schedules.get_calendar, name)
    observing = await _call(api.schedules.observing, name)
    return _json({**display.calendar_json(found),
                  "observed_by": token_limits.shown_observers(token, observing)},
                 headers={"ETag": _etag(found.version)})


def _put_calendar(api: _Api, name: str, body: dict[str, Any], precondition: int | str | None
                  ) -> tuple[Any, bool, list[str]]:
    """The calendar written, whether it was created, and the schedules observing it, read
    before the write (none observe a new one: a schedule names existing calendars only)."""
    schedules = api.schedules
    keywords: dict[str, Any] = {key: () if body.get(key) is None else body[key]
                                for key in ("dates", "ranges")}
    keywords["description"] = body.get("description")
    try:
        current = schedules.get_calendar(name)
    except CalendarNotFound:
        current = None
    if current is None:
        _refuse_if_match_on_absent("calendar", name, precondition)
        try:
            return schedules.create_calendar(name, **keywords), True, []
        except ScheduleConflict:
            current = schedules.get_calendar(name)
    expected = _expected_version(current.version, precondition)
    observing = schedules.observing(name)
    return schedules.update_calendar(name, **keywords, expected_version=expected), False, observing


async def _calendar_put(request: Request, api: _Api, token: ApiToken) -> Response:
    """Create or replace a calendar: ``dates``, ``ranges`` and ``description`` (those left out
    are emptied). ``If-Match`` as for schedules, on the calendar's version."""
    name = request.path_params["name"]
    _writable(token, name)
    precondition = _if_match(request)
    body = await _body(request)
    known = {"name", "dates", "ranges", "description"}
    problems = [Problem(key, "unknown field", "use: dates, ranges, description")
                for key in sorted(set(body) - known)]
    problems.extend(_text_problem(body.get("description"), "description"))
    if body.get("name", name) != name:
        problems.append(Problem("name", "is not the name in the path",
                                "leave it out, or give the same"))
    if problems:
        raise ConfigurationError(problems, subject=f"calendar {name!r}")
    try:
        calendar, created, observing = await _call(_put_calendar, api, name, body, precondition)
    except ScheduleConflict as exc:
        raise _conflict(exc, precondition is not None) from exc
    return _json({**display.calendar_json(calendar),
                  "observed_by": token_limits.shown_observers(token, observing)},
                 201 if created else 200, headers={"ETag": _etag(calendar.version)})


async def _calendar_delete(request: Request, api: _Api, token: ApiToken) -> Response:
    """Remove a calendar; 409 naming the schedules that still observe it (those the token
    may see)."""
    name = request.path_params["name"]
    _writable(token, name)
    try:
        await _call(api.schedules.delete_calendar, name)
    except CalendarInUse as exc:
        raise token_limits.calendar_in_use(token, exc) from exc
    return Response(status_code=204, headers=HEADERS)
