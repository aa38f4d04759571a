"""A schedule's audit log over HTTP: who changed what, when and why."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery import display
from goatbeat_celery.core.types.errors import ScheduleNotFound
from goatbeat_celery.core.types.tokens import ApiToken
from goatbeat_celery.web.api.answers import json_response
from goatbeat_celery.web.api.context import Api
from goatbeat_celery.web.api.guard import readable
from goatbeat_celery.web.api.reading import call, query_int


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
