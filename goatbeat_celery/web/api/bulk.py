"""Bulk controls: pause, resume or run now the schedules named, or every schedule carrying a
tag (``POST /bulk/pause``, ``/bulk/resume``, ``/bulk/run``), the reason in the
``X-Goatbeat-Reason`` header recorded for each. The answer lists each schedule done or refused,
with why: ``200`` when one was done. When every schedule was refused nothing changed, and the
answer is a problem carrying the same lists: ``409`` when one was refused for its state
(already paused, not paused, set aside), else ``403`` when one was outside the token's prefix,
else ``404`` (none exists). A call refused whole (no selection, an unknown tag, a bad
``until``) is a 422 naming every field, with nothing changed."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery.api.bulk import BulkAction, Refusal
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.tokens import ApiToken
from goatbeat_celery.web.api.answers import json_response
from goatbeat_celery.web.api.context import Api
from goatbeat_celery.web.api.problem import ApiProblem
from goatbeat_celery.web.api.reading import body, call, instant, reason

#: The keys a body may give, by action.
KEYS: dict[BulkAction, tuple[str, ...]] = {
    "pause": ("names", "tag", "until", "note"), "resume": ("names", "tag"),
    "run_now": ("names", "tag")}
#: The answer when every schedule was refused, by why (``BulkResult.refused_whole``).
REFUSED_WHOLE: dict[Refusal, tuple[int, str]] = {
    "conflict": (409, "Conflict"), "outside": (403, "Outside the token's prefix"),
    "not_found": (404, "Not found")}


async def _bulk(request: Request, api: Api, token: ApiToken, action: BulkAction) -> Response:
    given = await body(request)
    allowed = KEYS[action]
    problems = [Problem(key, "unknown field", f"use: {', '.join(allowed)}")
                for key in sorted(set(given) - set(allowed))]
    names: Any = given.get("names")
    if names is not None and (not isinstance(names, list)
                              or not all(isinstance(name, str) for name in names)):
        problems.append(Problem("names", "expected a list of schedule names"))
        names = None
    tag = given.get("tag")
    if tag is not None and not isinstance(tag, str):
        problems.append(Problem("tag", "expected a tag (text)"))
        tag = None
    until = instant(given.get("until"), "until", problems)
    note = given.get("note")
    if note is not None and not isinstance(note, str):
        problems.append(Problem("note", "expected text"))
        note = None
    if problems:
        raise ConfigurationError(problems, subject="bulk action")
    # A token limited to a prefix selects by tag within it, and is refused the names outside.
    result = await call(api.schedules.bulk, action, names, tag=tag, until=until, note=note,
                        reason=reason(request), within=token.prefix)
    refused = result.refused_whole
    if refused is not None:
        status, title = REFUSED_WHOLE[refused]
        raise ApiProblem(status, title, f"every schedule was refused ({len(result.refused)}); "
                         "nothing was changed", members=result.as_json())
    return json_response(result.as_json())


async def pause(request: Request, api: Api, token: ApiToken) -> Response:
    """Pause each: ``until`` (an instant) ends each pause by itself, ``note`` is shown."""
    return await _bulk(request, api, token, "pause")


async def resume(request: Request, api: Api, token: ApiToken) -> Response:
    return await _bulk(request, api, token, "resume")


async def run_now(request: Request, api: Api, token: ApiToken) -> Response:
    return await _bulk(request, api, token, "run_now")
