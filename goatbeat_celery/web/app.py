"""The dashboard: a Starlette application rendering Jinja pages (autoescaped) from the
:class:`~goatbeat_celery.api.Schedules` API.

Every read and write goes through ``Schedules``, its leases and the database's clock included,
never its store; the tables are never written here. Database calls are
synchronous: each request makes them in Starlette's thread pool.

This module makes the application and its routes; the pages are in
:mod:`goatbeat_celery.web.pages`, one module per concern.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from goatbeat_celery import __version__, display
from goatbeat_celery.core.links import doc
from goatbeat_celery.core.rules.shards import Shard, shard_lease_name
from goatbeat_celery.core.types.errors import ConfigurationError, GoatbeatError
from goatbeat_celery.web import present
from goatbeat_celery.web.api import answers as api_answers
from goatbeat_celery.web.api import api_routes
from goatbeat_celery.web.pages import (
    alert_actions,
    backfills,
    bulk,
    calendars,
    new,
    overview,
    reverts,
    run_search,
    runs,
    schedule,
    schedule_list,
    sign_in,
    workers,
)
from goatbeat_celery.web.pages.base import SAFE_METHODS, Context, Handler, guarded
from goatbeat_celery.web.pages.errors import RunNotShown, error_handler
from goatbeat_celery.web.pages.schedule_list import PAGE_SIZE
from goatbeat_celery.web.security import Signer, WebSettings
from goatbeat_celery.web.static import favicon, static_file

if TYPE_CHECKING:
    from goatbeat_celery.api import Schedules

__all__ = ["PAGE_SIZE", "SAFE_METHODS", "RunNotShown", "create_app"]

HERE = Path(__file__).parent


def create_app(schedules: Schedules, settings: WebSettings | None = None, *,
               close_on_shutdown: bool = False, celery_app: Any = None) -> Starlette:
    """The dashboard as an ASGI application over ``schedules``.

    Mount it inside another Starlette or FastAPI application (``Mount("/beat", app=...)``):
    links and cookies follow the mount path. The JSON API is served by the same application,
    under ``/api/v1`` (:mod:`goatbeat_celery.web.api`). ``settings`` guard it (token,
    read-only); with no token, serve it on loopback only. ``close_on_shutdown`` closes
    ``schedules`` when the application shuts down (the ``web`` command passes it; an embedding
    application that owns ``schedules`` leaves it False). ``celery_app``: the Celery app whose
    workers and broker the workers page asks, and through which a run is revoked (default:
    the app ``schedules`` was opened from by :meth:`~goatbeat_celery.api.Schedules.from_app`).
    """
    settings = settings or WebSettings()
    problems = settings.problems()
    if problems:
        raise ConfigurationError(problems, subject="goatbeat web")
    schedules = schedules.acting_as(settings.actor)
    context = Context(
        schedules=schedules, settings=settings,
        # With shards, shard 0's lease heads the overview: its leader does the global work.
        lease_name=shard_lease_name(schedules.config.settings.lease_name,
                                    Shard(0, schedules.config.settings.shards)),
        templates=Jinja2Templates(env=_environment()),
        signer=Signer(token=settings.token, lifetime=settings.session_lifetime),
        celery_app=celery_app if celery_app is not None else getattr(
            schedules.signatures, "app", None),
    )

    def route(path: str, handler: Handler, name: str, methods: list[str], *,
              public: bool = False, read_only_too: bool = False) -> Route:
        return Route(path, guarded(context, handler, public=public,
                                   read_only_too=read_only_too),
                     name=name, methods=methods)

    # Every page and action goes through guarded: none is served without its checks.
    routes = [
        route("/", overview.overview, "overview", ["GET"]),
        route("/schedules", schedule_list.schedule_list, "schedules", ["GET"]),
        route("/schedules/bulk", bulk.bulk_action, "bulk", ["POST"]),
        route("/schedule", schedule.schedule_page, "schedule", ["GET"]),
        route("/schedule/pause", schedule.pause, "pause", ["POST"]),
        route("/schedule/resume", schedule.resume, "resume", ["POST"]),
        route("/schedule/run", schedule.run_now, "run_now", ["POST"]),
        route("/schedule/edit", schedule.edit, "edit", ["POST"]),
        route("/schedule/delete", schedule.delete_page, "delete_confirm", ["GET"]),
        route("/schedule/delete", schedule.delete, "delete", ["POST"]),
        route("/alert/ack", alert_actions.acknowledge, "alert_ack", ["POST"]),
        route("/alert/silence", alert_actions.silence, "alert_silence", ["POST"]),
        route("/run", runs.run_page, "run", ["GET"]),
        route("/runs", run_search.run_list, "runs", ["GET"]),
        route("/runs/grid", run_search.run_grid, "run_grid", ["GET"]),
        route("/run/revoke", workers.revoke, "revoke", ["POST"]),
        route("/workers", workers.workers_page, "workers", ["GET"]),
        route("/backfill/new", backfills.backfill_form, "backfill_new", ["GET"]),
        route("/backfill/new", backfills.backfill_start, "backfill_start", ["POST"]),
        route("/backfill", backfills.backfill_page, "backfill", ["GET"]),
        route("/backfill/cancel", backfills.backfill_cancel, "backfill_cancel", ["POST"]),
        route("/backfill/rerun", backfills.backfill_rerun, "backfill_rerun", ["POST"]),
        route("/audit/revert", reverts.revert_page, "revert_confirm", ["GET"]),
        route("/audit/revert", reverts.revert, "revert", ["POST"]),
        route("/backfills", backfills.backfill_list, "backfills", ["GET"]),
        route("/calendars", calendars.calendar_list, "calendars", ["GET"]),
        route("/calendar", calendars.calendar_page, "calendar", ["GET"]),
        route("/calendars", calendars.calendar_create, "calendar_create", ["POST"]),
        route("/calendar/edit", calendars.calendar_edit, "calendar_edit", ["POST"]),
        route("/calendar/delete", calendars.calendar_delete_page, "calendar_delete_confirm",
              ["GET"]),
        route("/calendar/delete", calendars.calendar_delete, "calendar_delete", ["POST"]),
        route("/fleet", overview.fleet, "fleet", ["GET"]),
        route("/new", new.new_page, "new", ["GET"]),
        route("/new", new.create, "create", ["POST"]),
        route("/login", sign_in.login, "login", ["GET", "POST"], public=True,
              read_only_too=True),
        route("/logout", sign_in.logout, "logout", ["POST"], read_only_too=True),
        route("/static/{path:path}", static_file, "static", ["GET"], public=True),
        route("/favicon.ico", favicon, "favicon", ["GET"], public=True),
        *api_routes(schedules, settings),  # the JSON API: bearer tokens, never cookies
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if close_on_shutdown:
            schedules.close()

    # The API answers goatbeat's errors itself (as problems); the pages' reach this handler.
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={
        **api_answers.EXCEPTION_HANDLERS, GoatbeatError: error_handler(context)})
    app.state.goatbeat = context
    return app


def _environment() -> jinja2.Environment:
    """The templates' environment: autoescaped, strict about undefined names, with the
    helpers the pages' templates call."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    environment.globals.update(
        when=display.when, describe_trigger=display.describe_trigger, zone_of=display.zone_of,
        state_text=display.state_text, next_run_text=display.next_run_text,
        compact_json=display.compact_json, human_seconds=display.human_seconds, doc=doc,
        lateness=display.lateness, run_status=display.run_status, version=__version__,
        ago=present.ago, after=present.after, local_time=present.local_time, pill=present.pill,
        short_key=present.short_key, key_time=present.key_time, instant=present.instant,
        backfill_of=present.backfill_of, seconds_text=present.seconds_text,
        state_pill=present.state_pill, audit_changes=display.audit_changes_text,
        audit_change_parts=functools.partial(display.audit_change_parts,
                                             value_text=display.change_value_text),
        change_value=display.change_value_text,
        outcomes_text=display.outcomes_text,
        audit_action=display.audit_action, tone=present.tone,
    )
    environment.filters["breakable"] = present.breakable
    environment.filters["whole_instants"] = present.whole_instants
    return environment
