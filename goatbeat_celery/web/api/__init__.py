"""The JSON API under ``/api/v1``, served beside the dashboard by the same application.

Every change goes through :class:`~goatbeat_celery.api.Schedules`, so the API refuses what the
CLI and the pages refuse, with the same problems (a field, a message, a hint), as
``application/problem+json``. A schedule's ``ETag`` is its definition's version
(``Schedule.version``): runs, claims and pauses never move it, so ``If-Match`` guards an
edit against other edits only and is never refused because the schedule ran.

Who may call it: a bearer token from the token table (``celery -A proj goatbeat token
create``), with scopes (``read``, ``write``, ``run``) and an optional name prefix. Cookies are
never read here, so a browser's session on the dashboard is worth nothing to the API, and no
CSRF token is needed: a cross-site page cannot attach a bearer token. The ``Host`` check and
the refusal of state changes a browser marks as sent from another site are the dashboard's
(:mod:`~goatbeat_celery.web.security`).

Changes are recorded in the audit log as made by ``token:<name>``, with the reason given in
the ``X-Goatbeat-Reason`` header.

A token limited to a prefix answers a read of a name outside it with 404 and refuses a write of
it with 403 (:mod:`~goatbeat_celery.web.api.guard`).

One module per resource: :mod:`.schedules`, :mod:`.controls` (pause, resume, run now),
:mod:`.bulk` (the same over many schedules), :mod:`.alerts` (list, acknowledge, silence),
:mod:`.runs`, :mod:`.audit`, :mod:`.backfills`, :mod:`.calendars`; what they share reads
requests (:mod:`.reading`) and writes answers (:mod:`.answers`, one table from an error's
kind to a status).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from goatbeat_celery.core.types.tokens import Scope
from goatbeat_celery.tokens import Tokens
from goatbeat_celery.web.api import alerts, audit, backfills, bulk, calendars, controls, runs
from goatbeat_celery.web.api import schedules as schedule_routes
from goatbeat_celery.web.api.answers import API_PREFIX, json_response, problem_response
from goatbeat_celery.web.api.context import Api, Handler
from goatbeat_celery.web.api.guard import guarded
from goatbeat_celery.web.api.problem import ApiProblem
from goatbeat_celery.web.api.reading import MAX_BODY, MAX_PAGE, REASON_HEADER
from goatbeat_celery.web.security import WebSettings, host_refusal

if TYPE_CHECKING:
    from goatbeat_celery.api import Schedules


def api_routes(schedules: Schedules, settings: WebSettings) -> list[Route]:
    """The API's routes, to add to the dashboard's application (paths under
    :data:`API_PREFIX`)."""
    api = Api(schedules=schedules, settings=settings, tokens=Tokens.of(schedules))

    def route(path: str, handler: Handler, methods: list[str], scope: Scope) -> Route:
        return Route(API_PREFIX + path, guarded(api, handler, scope), methods=methods)

    # Sub-resources before the bare name: a name may hold "/", and "{name:path}" is greedy.
    named = "/schedules/{name:path}"
    return [
        Route(API_PREFIX + "/openapi.json", _openapi_endpoint(api), methods=["GET"]),
        route("/schedules", schedule_routes.list_schedules, ["GET"], Scope.READ),
        route("/bulk/pause", bulk.pause, ["POST"], Scope.WRITE),
        route("/bulk/resume", bulk.resume, ["POST"], Scope.WRITE),
        route("/bulk/run", bulk.run_now, ["POST"], Scope.RUN),
        route(named + "/history", runs.history, ["GET"], Scope.READ),
        route(named + "/next", runs.next_runs, ["GET"], Scope.READ),
        route(named + "/audit", audit.audit, ["GET"], Scope.READ),
        route(named + "/pause", controls.pause, ["POST"], Scope.WRITE),
        route(named + "/resume", controls.resume, ["POST"], Scope.WRITE),
        route(named + "/run", controls.run_now, ["POST"], Scope.RUN),
        route(named + "/backfills", backfills.schedule_backfills, ["GET"], Scope.READ),
        route(named + "/backfills", backfills.start_backfill, ["POST"], Scope.RUN),
        route(named, schedule_routes.get_schedule, ["GET"], Scope.READ),
        route(named, schedule_routes.put_schedule, ["PUT"], Scope.WRITE),
        route(named, schedule_routes.patch_schedule, ["PATCH"], Scope.WRITE),
        route(named, schedule_routes.delete_schedule, ["DELETE"], Scope.WRITE),
        route("/backfills", backfills.list_backfills, ["GET"], Scope.READ),
        route("/backfills/{id}", backfills.get_backfill, ["GET"], Scope.READ),
        route("/backfills/{id}/cancel", backfills.cancel_backfill, ["POST"], Scope.RUN),
        route("/backfills/{id}/rerun-failed", backfills.rerun_failed, ["POST"], Scope.RUN),
        route("/audit/{id}/revert", audit.revert, ["POST"], Scope.WRITE),
        route("/alerts", alerts.list_alerts, ["GET"], Scope.READ),
        route("/alerts/{id}/ack", alerts.acknowledge, ["POST"], Scope.WRITE),
        route("/alerts/{id}/silence", alerts.silence, ["POST"], Scope.WRITE),
        route("/calendars", calendars.list_calendars, ["GET"], Scope.READ),
        route("/calendars/{name:path}", calendars.get_calendar, ["GET"], Scope.READ),
        route("/calendars/{name:path}", calendars.put_calendar, ["PUT"], Scope.WRITE),
        route("/calendars/{name:path}", calendars.delete_calendar, ["DELETE"], Scope.WRITE),
    ]


def _openapi_endpoint(api: Api) -> Callable[[Request], Awaitable[Response]]:
    async def openapi(request: Request) -> Response:
        """The API's description; public (it holds no data), behind the ``Host`` check."""
        from goatbeat_celery.web.openapi import document

        misdirected = host_refusal(request.headers.get("host"), api.settings)
        if misdirected is not None:
            return problem_response(ApiProblem(400, "Misdirected request", misdirected))
        root = str(request.scope.get("root_path") or "")
        return json_response(document(server=root + API_PREFIX))

    return openapi


__all__ = ["API_PREFIX", "MAX_BODY", "MAX_PAGE", "REASON_HEADER", "ApiProblem", "api_routes"]
