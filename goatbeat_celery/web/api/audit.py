"""A schedule's audit log over HTTP: who changed what, when and why."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery import display
from goatbeat_celery.core.types.audit import AuditEntry
from goatbeat_celery.core.types.errors import AuditEntryNotFound, ScheduleNotFound
from goatbeat_celery.core.types.tokens import ApiToken
from goatbeat_celery.web.api.answers import json_response
from goatbeat_celery.web.api.context import Api
from goatbeat_celery.web.api.guard import readable, writable
from goatbeat_celery.web.api.reading import call, query_int, reason
from goatbeat_celery.web.api.schedules import config_row_refused, schedule_response


async def audit(request: Request, api: Api, token: ApiToken) -> Response:
    """Its changes, newest first (who, why, each field before and after), also after it was
    deleted; ``next`` links to the older ones."""
    name = request.path_params["name"]
    readable(token, name, ScheduleNotFound(name))
    limit = query_int(request, "limit", 50)
    before = request.query_params.get("before_id")
    before_id = query_int(request, "before_id", 0, 2**62) if before else None
    found = await call(api.schedules.audit, name, limit=limit + 1, before_id=before_id)
    following = None
    if len(found) > limit:
        found = found[:limit]
        following = f"{request.url.path}?{urlencode({'limit': limit, 'before_id': found[-1].id})}"
    return json_response({"entries": [display.audit_json(e) for e in found],
                          "next": following})


async def revert(request: Request, api: Api, token: ApiToken) -> Response:
    """Undo the edit recorded as entry ``id``: the schedule's document after it; 422 for an
    entry that is not an edit, 409 when the schedule changed since in the entry's fields."""
    text = request.path_params["id"]
    if not (text.isascii() and text.isdigit() and len(text) <= 18):
        raise AuditEntryNotFound(0)
    identifier = int(text)
    entry: AuditEntry = await call(api.schedules.audit_entry, identifier)
    readable(token, entry.schedule_name, AuditEntryNotFound(identifier))
    writable(token, entry.schedule_name)
    config_row_refused(await call(api.schedules.get, entry.schedule_name))
    now = await call(api.schedules.now)  # read before the write: nothing fails after it
    schedule = await call(api.schedules.revert, identifier, reason=reason(request))
    return schedule_response(api, schedule, now)
