"""The dashboard: a Starlette application rendering Jinja pages (autoescaped) from the
:class:`~goatbeat_celery.api.Schedules` API and the store's lease inspection.

Every read and write goes through ``Schedules`` (and its store's read methods, as the
``status`` command reads them); the tables are never written here. Database calls are
synchronous: each request makes them in Starlette's thread pool.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlencode, urlsplit

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, ImmutableMultiDict
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from goatbeat_celery import __version__, display
from goatbeat_celery.core.links import doc
from goatbeat_celery.core.protocols import LeaseManager
from goatbeat_celery.core.rules.alerts import Alert
from goatbeat_celery.core.rules.backfill import Backfill, BackfillMode
from goatbeat_celery.core.rules.calendars import resolve
from goatbeat_celery.core.rules.controls import upcoming_runs
from goatbeat_celery.core.rules.misfire import first_occurrence
from goatbeat_celery.core.rules.shards import Replica, Shard, shard_lease_name, sharding_prefix
from goatbeat_celery.core.rules.sync import config_row_refusal
from goatbeat_celery.core.types.audit import AuditEntry
from goatbeat_celery.core.types.errors import (
    BackfillNotFound,
    CalendarInUse,
    CalendarNotFound,
    ConfigurationError,
    GoatbeatError,
    ScheduleConflict,
    ScheduleNotFound,
    StoreUnavailable,
)
from goatbeat_celery.core.types.execution import Execution, idempotency_key
from goatbeat_celery.core.types.lease import LeaseInfo
from goatbeat_celery.core.types.listing import RunOrderCursor, ScheduleCounts, ScheduleOrder
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSource
from goatbeat_celery.store.url import mask_url
from goatbeat_celery.web import api_answers, bodies, forms, present
from goatbeat_celery.web.api import api_routes
from goatbeat_celery.web.chart import Chart, lateness_chart
from goatbeat_celery.web.security import (
    CSRF_COOKIE,
    CSRF_FIELD,
    SECURITY_HEADERS,
    SESSION_COOKIE,
    Signer,
    WebSettings,
    authenticated,
    cross_site_refusal,
    host_refusal,
    same_secret,
)
from goatbeat_celery.web.static import static_file
from goatbeat_celery.web.throttle import SignInThrottle, client_key

if TYPE_CHECKING:
    from goatbeat_celery.api import Schedules

HERE = Path(__file__).parent
#: Schedules per page of the list.
PAGE_SIZE = 50
#: Executions read for the overview's chart, newest first.
CHART_EXECUTIONS = 500
#: Alerts the overview lists (open ones) and a schedule's page (open, then the last resolved).
ALERTS_SHOWN = 20
HISTORY_SHOWN = 50
#: The newest changes of a schedule its page shows (``celery goatbeat audit NAME`` pages on).
AUDIT_SHOWN = 20
#: Runs read for a schedule's page: its runtime percentiles and its filter by outcome look at
#: these (the newest), the table shows the first HISTORY_SHOWN that pass the filter.
RUNS_READ = 500
NEXT_RUNS_SHOWN = 5
STATES = ("enabled", "paused", "set-aside")
#: Methods that change nothing: every other one is checked for its CSRF token.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

Handler = Callable[..., Awaitable[Response]]


@dataclass(frozen=True)
class _Context:
    schedules: Schedules
    settings: WebSettings
    lease_name: str
    templates: Jinja2Templates
    signer: Signer
    throttle: SignInThrottle = field(default_factory=SignInThrottle)

    def cookie(self, name: str) -> str:
        return self.settings.cookie_name(name)


def create_app(schedules: Schedules, settings: WebSettings | None = None, *,
               close_on_shutdown: bool = False) -> Starlette:
    """The dashboard as an ASGI application over ``schedules``.

    Mount it inside another Starlette or FastAPI application (``Mount("/beat", app=...)``):
    links and cookies follow the mount path. The JSON API is served by the same application,
    under ``/api/v1`` (:mod:`goatbeat_celery.web.api`). ``settings`` guard it (token,
    read-only); with no token, serve it on loopback only. ``close_on_shutdown`` closes
    ``schedules`` when the application shuts down (the ``web`` command passes it; an embedding
    application that owns ``schedules`` leaves it False).
    """
    settings = settings or WebSettings()
    problems = settings.problems()
    if problems:
        raise ConfigurationError(problems, subject="goatbeat web")
    schedules = schedules.acting_as(settings.actor)
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    environment.globals.update(
        when=display.when, describe_trigger=display.describe_trigger, zone_of=display.zone_of,
        state_text=display.state_text, next_run_text=display.next_run_text,
        compact_json=display.compact_json, human_seconds=display.human_seconds, doc=doc,
        lateness=display.lateness, run_status=display.run_status, version=__version__,
        ago=present.ago, after=present.after, pill=present.pill, short_key=present.short_key,
        backfill_of=present.backfill_of, seconds_text=present.seconds_text,
        state_pill=present.state_pill, audit_changes=display.audit_changes_text,
        audit_action=display.audit_action,
    )
    environment.filters["breakable"] = present.breakable
    context = _Context(
        schedules=schedules, settings=settings,
        # With shards, shard 0's lease heads the overview: its leader does the global work.
        lease_name=shard_lease_name(schedules.config.settings.lease_name,
                                    Shard(0, schedules.config.settings.shards)),
        templates=Jinja2Templates(env=environment),
        signer=Signer(token=settings.token, lifetime=settings.session_lifetime),
    )

    def route(path: str, handler: Handler, name: str, methods: list[str], *,
              public: bool = False, read_only_too: bool = False) -> Route:
        return Route(path, _guarded(context, handler, public=public,
                                    read_only_too=read_only_too),
                     name=name, methods=methods)

    # Every page and action goes through _guarded: none is served without its checks.
    routes = [
        route("/", _overview, "overview", ["GET"]),
        route("/schedules", _schedule_list, "schedules", ["GET"]),
        route("/schedule", _schedule_page, "schedule", ["GET"]),
        route("/schedule/pause", _pause, "pause", ["POST"]),
        route("/schedule/resume", _resume, "resume", ["POST"]),
        route("/schedule/run", _run_now, "run_now", ["POST"]),
        route("/schedule/edit", _edit, "edit", ["POST"]),
        route("/schedule/delete", _delete_page, "delete_confirm", ["GET"]),
        route("/schedule/delete", _delete, "delete", ["POST"]),
        route("/run", _run_page, "run", ["GET"]),
        route("/backfill/new", _backfill_form, "backfill_new", ["GET"]),
        route("/backfill/new", _backfill_start, "backfill_start", ["POST"]),
        route("/backfill", _backfill_page, "backfill", ["GET"]),
        route("/backfill/cancel", _backfill_cancel, "backfill_cancel", ["POST"]),
        route("/backfills", _backfill_list, "backfills", ["GET"]),
        route("/calendars", _calendar_list, "calendars", ["GET"]),
        route("/calendar", _calendar_page, "calendar", ["GET"]),
        route("/calendars", _calendar_create, "calendar_create", ["POST"]),
        route("/calendar/edit", _calendar_edit, "calendar_edit", ["POST"]),
        route("/calendar/delete", _calendar_delete_page, "calendar_delete_confirm", ["GET"]),
        route("/calendar/delete", _calendar_delete, "calendar_delete", ["POST"]),
        route("/fleet", _fleet, "fleet", ["GET"]),
        route("/new", _new_page, "new", ["GET"]),
        route("/new", _create, "create", ["POST"]),
        route("/login", _login, "login", ["GET", "POST"], public=True, read_only_too=True),
        route("/logout", _logout, "logout", ["POST"], read_only_too=True),
        route("/static/{path:path}", static_file, "static", ["GET"], public=True),
        *api_routes(schedules, settings),  # the JSON API: bearer tokens, never cookies
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if close_on_shutdown:
            schedules.close()

    app = Starlette(routes=routes, lifespan=lifespan,
                    exception_handlers=api_answers.EXCEPTION_HANDLERS)  # problems under /api/
    app.state.goatbeat = context
    return app


# -- plumbing ---------------------------------------------------------------------------------
def _link(request: Request, route: str, /, **query: Any) -> str:
    """A link to ``route`` as a path (the mount point included), never naming a host: the
    request's ``Host`` is the client's to choose, so nothing built from it is sent back."""
    path = urlsplit(str(request.url_for(route))).path
    kept = {k: v for k, v in query.items() if v not in (None, "")}
    return f"{path}?{urlencode(kept)}" if kept else path


def _cookie_path(request: Request, context: _Context) -> str:
    # A __Host- cookie must be set for the whole host.
    if context.settings.secure_cookies:
        return "/"
    return str(request.scope.get("root_path") or "") + "/"


def _session(request: Request, context: _Context) -> str | None:
    return request.cookies.get(context.cookie(SESSION_COOKIE))


def _csrf(request: Request, context: _Context) -> str:
    """This browser's CSRF token: its cookie's when the server signed that for its session, a
    new one otherwise (set in the cookie by :func:`_finish`)."""
    token = getattr(request.state, "csrf", None)
    if token is None:
        token = request.cookies.get(context.cookie(CSRF_COOKIE))
        if not context.signer.csrf_valid(token, _session(request, context)):
            token = context.signer.new_csrf(_session(request, context))
        request.state.csrf = token
    return cast(str, token)


def _finish(request: Request, context: _Context, response: Response) -> Response:
    issued = getattr(request.state, "csrf", None)
    if issued is not None and request.cookies.get(context.cookie(CSRF_COOKIE)) != issued:
        response.set_cookie(context.cookie(CSRF_COOKIE), issued, httponly=True,
                            samesite="strict", path=_cookie_path(request, context),
                            secure=context.settings.secure_cookies)
    for header, value in SECURITY_HEADERS.items():
        response.headers.setdefault(header, value)
    response.headers.setdefault("Cache-Control", "no-store")
    return response


def _render(request: Request, context: _Context, template: str, status_code: int = 200,
            **values: Any) -> Response:
    values.update(
        request=request, csrf_field=CSRF_FIELD, csrf_token=_csrf(request, context),
        read_only=context.settings.read_only, link=lambda route, /, **q: _link(request, route, **q),
        signed_in=(context.settings.token is not None
                   and getattr(request.state, "signed_in", False)),
        static=urlsplit(str(request.url_for("static", path="style.css"))).path,
    )
    return context.templates.TemplateResponse(request, template, values,
                                              status_code=status_code)


def _refusal(request: Request, context: _Context, status: int, title: str,
             message: str) -> Response:
    return _render(request, context, "error.html", status_code=status, title=title,
                   message=message)


def _guarded(context: _Context, handler: Handler, *, public: bool = False,
             read_only_too: bool = False) -> Callable[[Request], Awaitable[Response]]:
    """``handler`` behind the dashboard's checks, in this order, then the cookies and security
    headers every response carries:

    1. the name the request is addressed to (:func:`~goatbeat_celery.web.security.host_refusal`,
       400), before anything else: a rebound name gets nothing, not even a cookie;
    2. authentication, unless ``public`` (the sign-in page);
    3. for every state-changing request (any method but GET, HEAD and OPTIONS): a browser must
       send it from this dashboard's own pages (:func:`~goatbeat_celery.web.security.
       cross_site_refusal`), the CSRF token of its form must match its cookie and be one the
       server signed (:func:`_csrf_refusal`), and a read-only dashboard refuses it unless
       ``read_only_too`` (signing in and out);
    4. no field or query parameter may hold a NUL character (400), which no name, task or
       filter can contain and the database would refuse.

    A state-changing handler is called with the form read here, bounded before it is parsed
    (:mod:`~goatbeat_celery.web.bodies`); a safe one without it.
    """

    async def endpoint(request: Request) -> Response:
        settings = context.settings
        misdirected = host_refusal(request.headers.get("host"), settings)
        if misdirected is not None:
            return _finish(request, context, PlainTextResponse(misdirected, status_code=400))
        signed_in = authenticated(
            settings.token, authorization=request.headers.get("authorization"),
            session_valid=context.signer.session_valid(_session(request, context)))
        request.state.signed_in = signed_in
        if not signed_in and not public:
            if request.method in SAFE_METHODS:
                here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                target = _link(request, "login", next=here)
                return _finish(request, context, RedirectResponse(target, status_code=303))
            return _finish(request, context, _refusal(
                request, context, 401, "Sign in first",
                "This dashboard needs its token; sign in and try again."))
        try:
            if request.method in SAFE_METHODS:
                response = (_bad_text_refusal(request, context, request.query_params)
                            or await handler(request, context))
            else:
                form = await bodies.read_form(
                    request, bodies.SIGN_IN_BODY if public else bodies.FORM_BODY)
                refused = (_cross_site(request, context) or _csrf_refusal(request, context, form)
                           or _bad_text_refusal(request, context, request.query_params)
                           or _bad_text_refusal(request, context, form))
                if refused is None and settings.read_only and not read_only_too:
                    refused = _refusal(
                        request, context, 403, "Read-only",
                        "This dashboard was started read-only; nothing was changed.")
                response = refused or await handler(request, context, form)
        except bodies.BodyRefused as exc:
            response = _refusal(request, context, exc.status, exc.title, exc.detail)
            response.headers.update(exc.headers)
        except ScheduleNotFound as exc:
            response = _refusal(request, context, 404, "No such schedule", str(exc))
        except StoreUnavailable as exc:
            response = _refusal(request, context, 503, "Database unavailable",
                                mask_url(str(exc)))
        except GoatbeatError as exc:
            response = _refusal(request, context, 500, "goatbeat error", mask_url(str(exc)))
        return _finish(request, context, response)

    return endpoint


def _cross_site(request: Request, context: _Context) -> Response | None:
    reason = cross_site_refusal(origin=request.headers.get("origin"),
                                fetch_site=request.headers.get("sec-fetch-site"),
                                host_header=request.headers.get("host"))
    if reason is None:
        return None
    return _refusal(request, context, 403, "Sent from another site",
                    f"This request was refused because {reason}. Nothing was changed; use "
                    "the dashboard's own pages.")


def _csrf_refusal(request: Request, context: _Context, form: FormData) -> Response | None:
    """The one CSRF check (signed double submit): the form's token must be the one in this
    browser's cookie, which another site can neither read nor send (``SameSite=Strict``), and
    one the server signed for this browser's session, so that a cookie planted by another
    service on the same host is worth nothing. Every state-changing request passes here
    before its handler reads or writes anything."""
    cookie = request.cookies.get(context.cookie(CSRF_COOKIE))
    if same_secret(_text(form, CSRF_FIELD), cookie) and \
            context.signer.csrf_valid(cookie, _session(request, context)):
        return None
    return _refusal(request, context, 403, "Form expired",
                    "The form's security token is missing or does not match this browser's; "
                    "reload the page and submit it again. Nothing was changed.")


def _bad_text_refusal(request: Request, context: _Context,
                      fields: ImmutableMultiDict[str, Any]) -> Response | None:
    bad = sorted({name for name, value in fields.multi_items()
                  if "\x00" in name or (isinstance(value, str) and "\x00" in value)})
    if not bad:
        return None
    return _refusal(request, context, 400, "Unreadable request",
                    f"{', '.join(bad)}: holds a NUL character, which "
                    "no schedule name, task, filter or value may contain. Nothing was changed.")


def _count(text: str) -> int:
    """A page number or version from a link or a form: plain ASCII digits, at most 18 (what a
    64-bit column holds); anything else counts as 0 (the first page, or no version)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else 0


def _text(form: FormData | Mapping[str, Any], name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


def _call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Awaitable[Any]:
    return run_in_threadpool(function, *args, **kwargs)


def _lease_manager(schedules: Schedules) -> LeaseManager:
    # open_store returns one object that is both the schedule store and the lease manager.
    return cast(LeaseManager, schedules.store)


# -- pages ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Overview:
    lease: LeaseInfo | None
    now: datetime
    pending: Execution | None
    set_aside: list[Schedule]
    counts: ScheduleCounts
    chart: Chart
    #: With shards, every lease row of the sharding; None with one shard.
    sharding: list[LeaseInfo] | None = None
    #: The live replicas leading nothing.
    standbys: list[Replica] = field(default_factory=list)
    #: The open alerts (at most ALERTS_SHOWN + 1, to know there are more).
    alerts: list[Alert] = field(default_factory=list)


def _read_overview(context: _Context) -> _Overview:
    schedules = context.schedules
    store = schedules.store
    info = _lease_manager(schedules).inspect(context.lease_name)
    now = store.now()

    counts = store.count_schedules()
    set_aside = store.list_schedules(set_aside=True, limit=display.SET_ASIDE_SHOWN + 1)
    recent = store.executions(limit=CHART_EXECUTIONS)
    settings = schedules.config.settings
    # The member rows of every replica, and with several shards the shards' rows.
    rows = _lease_manager(schedules).list_leases(sharding_prefix(settings.lease_name))
    return _Overview(info, now, store.oldest_pending(), set_aside, counts,
                     lateness_chart(recent, now, limit=CHART_EXECUTIONS),
                     None if settings.shards == 1 else rows,
                     display.standby_replicas(rows, info, settings),
                     schedules.alerts(open_only=True, limit=ALERTS_SHOWN + 1))


async def _overview(request: Request, context: _Context) -> Response:
    data = await _call(_read_overview, context)
    info = data.lease
    settings = context.schedules.config.settings
    return _render(
        request, context, "overview.html", data=data, lease_name=context.lease_name,
        lease=info, held=info is not None and info.held,
        renewal=display.lease_health_parts(info, settings),
        silent=info is not None and info.silent(settings.lease_ttl,
                                                settings.lease_renew_interval),
        database=mask_url(context.schedules.config.database_url),
        shown=display.SET_ASIDE_SHOWN, zone=context.schedules.default_timezone,
        alerts_shown=ALERTS_SHOWN, alerts_note=display.untracked_rules_note(settings),
        standbys=display.standbys_line(data.standbys, data.now),
        shards=(None if data.sharding is None
                else display.shard_holders(data.sharding, settings)),
        members=(None if data.sharding is None
                 else display.shard_members_line(data.sharding, settings)),
        pending_lag=(None if data.pending is None
                     else display.human_seconds((data.now - data.pending.due_at).total_seconds())),
    )


def _list_page(context: _Context, prefix: str, source: ScheduleSource | None, state: str,
               tag: str, order: ScheduleOrder, after: str | RunOrderCursor | None,
               ) -> tuple[list[Schedule], bool]:
    """One page of schedules in ``order``, after the last one of the previous page (keyset
    paging: as fast on the last page as on the first)."""
    filters: dict[str, Any] = {"prefix": prefix or None, "source": source,
                               "tags": (tag,) if tag else ()}
    if state == "enabled":
        filters.update(paused=False, set_aside=False)
    elif state == "paused":
        filters["paused"] = True
    elif state == "set-aside":
        filters["set_aside"] = True
    found = context.schedules.store.list_schedules(limit=PAGE_SIZE + 1, order=order,
                                                   after=after, **filters)
    return found[:PAGE_SIZE], len(found) > PAGE_SIZE


def _last_runs(context: _Context, found: list[Schedule]) -> dict[str, Execution]:
    """The execution of each schedule's last occurrence, by schedule name: one read by key for
    the whole page (a run now is not an occurrence, so it is not the one shown)."""
    keys = {idempotency_key(s.name, s.last_occurrence_at): s.name for s in found
            if s.last_occurrence_at is not None}
    if not keys:
        return {}
    runs = context.schedules.store.executions_by_key(list(keys))
    return {keys[key]: run for key, run in runs.items()}


def _cursor(order: ScheduleOrder, query: Mapping[str, str]) -> str | RunOrderCursor | None:
    """Where the previous page ended, from the link to this one (none when unreadable)."""
    name = query.get("after", "")
    if not name:
        return None
    if order is ScheduleOrder.NAME:
        return name
    at = query.get("after_run", "")
    try:
        instant = datetime.fromisoformat(at) if at else None
    except ValueError:
        return None
    if instant is not None and instant.tzinfo is None:
        return None  # the links this page makes carry an offset: this one was not made here
    return RunOrderCursor(next_run_at=instant, name=name)


def _next_link(request: Request, filters: Mapping[str, str], order: ScheduleOrder,
               last: Schedule, page: int) -> str:
    cursor: dict[str, str] = {"after": last.name}
    if order is ScheduleOrder.NEXT_RUN:
        cursor["after_run"] = "" if last.next_run_at is None else last.next_run_at.isoformat()
    return _link(request, "schedules", **filters, **cursor, page=page + 1)


async def _schedule_list(request: Request, context: _Context) -> Response:
    query = request.query_params
    prefix = query.get("q", "")
    source_text = query.get("source", "")
    source = ScheduleSource(source_text) if source_text in ("config", "api") else None
    state = query.get("state", "")
    state = state if state in STATES else ""
    order = (ScheduleOrder.NEXT_RUN if query.get("sort") == ScheduleOrder.NEXT_RUN.value
             else ScheduleOrder.NAME)
    after = _cursor(order, query)
    page = _count(query.get("page", "")) if after else 0
    tag = query.get("tag", "").strip()
    found, more = await _call(_list_page, context, prefix, source, state, tag, order, after)
    last_runs = await _call(_last_runs, context, found)
    # The state of a pause with an end depends on the time: judged by the database clock.
    now = await _call(context.schedules.store.now)
    filters = {"q": prefix, "source": source.value if source else "", "state": state,
               "tag": tag, "sort": order.value}
    return _render(
        request, context, "schedules.html", found=found, filters=filters, states=STATES,
        first=_link(request, "schedules", **filters) if after else None,
        next=(_next_link(request, filters, order, found[-1], page) if more and found
              else None),
        page=page, page_size=PAGE_SIZE, now=now, last_runs=last_runs,
        default_zone=context.schedules.default_timezone,
    )


@dataclass(frozen=True)
class _Detail:
    schedule: Schedule
    history: list[Execution]
    now: datetime
    upcoming: list[datetime]
    upcoming_problem: str | None
    chart: Chart
    #: The runs read (at most RUNS_READ, newest first) before the filter by outcome.
    read: int = 0
    #: How many of those runs are in each state (run_status), for the filter.
    outcomes: dict[str, int] = field(default_factory=dict)
    #: p50, p90, p99 and max runtime of the runs read that report one.
    runtimes: list[tuple[str, str]] = field(default_factory=list)
    measured: int = 0
    backfills: list[Backfill] = field(default_factory=list)
    #: Its open alerts, and the last few resolved.
    alerts: list[Alert] = field(default_factory=list)
    audit: list[AuditEntry] = field(default_factory=list)


def _upcoming(context: _Context, schedule: Schedule) -> tuple[list[datetime], str | None]:
    """The next runs, as ``celery goatbeat next`` lists them (core.rules.controls.upcoming_runs:
    after the offset, within the bounds and a pause with an end, within ``max_runs``, none on
    a date its calendars exclude)."""
    if not schedule.spec.enabled or schedule.next_occurrence_at is None or schedule.damage:
        return [], None
    try:
        trigger = context.schedules.triggers.build(schedule.spec.trigger)
        shift = schedule.spec.effective_offset()
        calendars = schedule.spec.calendars
        exclusions = (resolve(schedule.spec, context.schedules.store.find_calendars(calendars))
                      if calendars else None)
        runs = upcoming_runs(schedule,
                             lambda instant: first_occurrence(trigger, instant, shift),
                             NEXT_RUNS_SHOWN, delay=schedule.spec.delay(),
                             exclusions=exclusions)
    # A schedule is a failure domain: a trigger only beat can build is shown without its runs.
    except Exception as exc:  # noqa: BLE001
        return [], f"cannot compute ({type(exc).__name__}: {exc})"
    return runs, None


def _read_detail(context: _Context, name: str, outcome: str = "") -> _Detail:
    schedule = context.schedules.get(name)
    read = context.schedules.history(name, limit=RUNS_READ)
    now = context.schedules.store.now()
    runs, problem = _upcoming(context, schedule)
    outcomes: dict[str, int] = {}
    for execution in read:
        status = display.run_status(execution)
        outcomes[status] = outcomes.get(status, 0) + 1
    shown = [e for e in read if not outcome or display.run_status(e) == outcome]
    runtimes = [e.runtime.total_seconds() for e in read if e.runtime is not None]
    backfills = context.schedules.backfills(name=name, limit=10)
    alerts = context.schedules.alerts(name=name, limit=ALERTS_SHOWN)
    return _Detail(schedule, shown[:HISTORY_SHOWN], now, runs, problem,
                   lateness_chart(read, now, limit=RUNS_READ), read=len(read),
                   outcomes=outcomes, runtimes=present.percentiles(runtimes),
                   measured=len(runtimes), backfills=backfills, alerts=alerts,
                   audit=context.schedules.audit(name, limit=AUDIT_SHOWN))


def _read_only_reason(schedule: Schedule) -> str | None:
    refusal = config_row_refusal(schedule)  # the rule every face applies
    return None if refusal is None else refusal[0].upper() + refusal[1:] + "."


async def _schedule_page(request: Request, context: _Context, *,
                         state: forms.FormState | None = None,
                         status_code: int = 200) -> Response:
    name = request.query_params.get("name", "")
    outcome = request.query_params.get("outcome", "")
    outcome = outcome if outcome in display.RUN_STATUSES else ""
    if state is not None:
        name = state.values["name"]
    detail = await _call(_read_detail, context, name, outcome)
    schedule = detail.schedule
    if state is None:
        state = forms.FormState(forms.stored_values(schedule, context.schedules.default_timezone))
    notice = present.NOTICES.get(request.query_params.get("notice", ""))
    return _render(
        request, context, "schedule.html", status_code=status_code, s=schedule,
        detail=detail, form=state, notice=notice, locked=_read_only_reason(schedule),
        fields=display.schedule_fields(schedule, context.schedules.config.settings, detail.now),
        **_form_choices(context),
        outcome=outcome, statuses=display.RUN_STATUSES,
        zone=display.zone_of(schedule.spec.trigger) or context.schedules.default_timezone,
        # The definition as this page shows it, sent back with an edit: a refusal because it
        # changed since can then say what changed.
        read=json.dumps(forms.stored_values(schedule, context.schedules.default_timezone)),
    )


def _back_to(request: Request, name: str, notice: str) -> Response:
    return RedirectResponse(_link(request, "schedule", name=name, notice=notice),
                            status_code=303)


async def _action(request: Request, context: _Context, form: FormData,
                  method: Callable[[str], Any], notice: str) -> Response:
    name = _text(form, "name")
    try:
        await _call(method, name)
    except (ConfigurationError, ScheduleConflict) as exc:
        state = forms.FormState(forms.stored_values(
            await _call(context.schedules.get, name), context.schedules.default_timezone))
        state.add_refusal(exc)
        request.scope["query_string"] = urlencode({"name": name}).encode()
        return await _schedule_page(request, context, state=state, status_code=422)
    return _back_to(request, name, notice)


async def _pause(request: Request, context: _Context, form: FormData) -> Response:
    return await _action(request, context, form, context.schedules.pause, "paused")


async def _resume(request: Request, context: _Context, form: FormData) -> Response:
    return await _action(request, context, form, context.schedules.resume, "resumed")


async def _run_now(request: Request, context: _Context, form: FormData) -> Response:
    return await _action(request, context, form, context.schedules.run_now, "queued")


async def _edit(request: Request, context: _Context, form: FormData) -> Response:
    name = _text(form, "name")
    current = await _call(context.schedules.get, name)
    state = forms.FormState({**forms.stored_values(current, context.schedules.default_timezone),
                             **forms.typed_values(form), "name": name})
    locked = _read_only_reason(current)
    if locked:
        state.add(forms.GENERAL, locked)
        return await _schedule_page(request, context, state=state, status_code=422)
    trigger = forms.trigger_keywords(state, context.schedules.default_timezone)
    call = forms.call_keywords(state)
    policies = forms.policy_keywords(state, context.schedules.default_timezone)
    version = _text(form, "version")
    if not state.errors:
        try:
            await _call(functools.partial(
                context.schedules.update, name, **trigger, **call, **policies,
                expected_version=_count(version) if version else None,
                reason=_text(form, "reason") or None))
        except ScheduleConflict as exc:
            changed = display.changed_since_read(name, forms.read_values(form), forms.stored_values(
                await _call(context.schedules.get, name), context.schedules.default_timezone))
            if changed is None:
                state.add_refusal(exc)
            else:
                state.add(forms.GENERAL, changed)
        except ConfigurationError as exc:
            state.add_refusal(exc)
    if state.errors:
        return await _schedule_page(request, context, state=state, status_code=422)
    return _back_to(request, name, "saved")


async def _delete_page(request: Request, context: _Context) -> Response:
    """The confirmation a removal asks for: what goes, what stays, and the button that does
    it (a form posted with its CSRF token)."""
    name = request.query_params.get("name", "")
    schedule = await _call(context.schedules.get, name)
    return _render(request, context, "delete.html", s=schedule,
                   locked=_read_only_reason(schedule))


async def _delete(request: Request, context: _Context, form: FormData) -> Response:
    name = _text(form, "name")
    current = await _call(context.schedules.get, name)
    locked = _read_only_reason(current)
    if locked:
        state = forms.FormState(forms.stored_values(current, context.schedules.default_timezone))
        state.add(forms.GENERAL, locked)
        return await _schedule_page(request, context, state=state, status_code=422)
    if _text(form, "confirm") != "remove":
        # Only the confirmation page's button removes: any other post is asked to confirm.
        return RedirectResponse(_link(request, "delete_confirm", name=name), status_code=303)
    try:
        await _call(functools.partial(context.schedules.delete, name,
                                      reason=_text(form, "reason") or None))
    except ConfigurationError as exc:
        state = forms.FormState(forms.stored_values(current, context.schedules.default_timezone))
        state.add_refusal(exc)
        return await _schedule_page(request, context, state=state, status_code=422)
    return RedirectResponse(_link(request, "schedules", notice="removed"), status_code=303)


async def _new_page(request: Request, context: _Context, *,
                    state: forms.FormState | None = None, status_code: int = 200) -> Response:
    if context.settings.read_only:
        return _refusal(request, context, 403, "Read-only",
                        "This dashboard was started read-only: it shows no forms and creates "
                        "nothing.")
    if state is None:
        state = forms.FormState(_blank_values(context))
    return _render(request, context, "new.html", status_code=status_code, form=state,
                   **_form_choices(context))


def _form_choices(context: _Context) -> dict[str, Any]:
    """What the schedule form's template needs beside its values: the choices of its lists and
    its plain fields, hinted with the settings standing in for them."""
    return {"kinds": forms.KINDS, "misfires": forms.MISFIRE_CHOICES,
            "overlaps": forms.OVERLAP_CHOICES, "modes": forms.MODE_CHOICES,
            "plain": forms.plain_groups(context.schedules.config.settings)}


def _blank_values(context: _Context) -> dict[str, str]:
    return {**dict.fromkeys(forms.FIELDS, ""), "kind": "every",
            "timezone": context.schedules.default_timezone, "args": "[]", "kwargs": "{}",
            "options": "{}", "mode": "fixed_rate"}


async def _create(request: Request, context: _Context, form: FormData) -> Response:
    state = forms.FormState({**_blank_values(context), **forms.typed_values(form)})
    values = state.values
    trigger = forms.trigger_keywords(state, context.schedules.default_timezone)
    call = forms.call_keywords(state)
    policies = {key: value for key, value in
                forms.policy_keywords(state, context.schedules.default_timezone).items()
                if value not in (None, [])}
    if not state.errors:
        try:
            await _call(functools.partial(
                context.schedules.create, values["name"], values["task"], **trigger, **call,
                **policies, enabled=form.get("paused") is None))
        except ConfigurationError as exc:
            state.add_problems(exc.details)
        except ScheduleConflict as exc:
            state.add("name", str(exc))
    if state.errors:
        return await _new_page(request, context, state=state, status_code=422)
    return _back_to(request, values["name"], "created")


def _read_run(context: _Context, key: str) -> tuple[Execution, Schedule | None, datetime]:
    found = context.schedules.store.executions_by_key([key])
    if key not in found:
        raise RunNotShown(key)
    execution = found[key]
    try:
        schedule: Schedule | None = context.schedules.get(execution.schedule_name)
    except ScheduleNotFound:
        schedule = None  # removed since: its history stays
    return execution, schedule, context.schedules.store.now()


class RunNotShown(GoatbeatError):
    """No execution has this key (pruned, or never claimed)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"no run has the key {key!r}: it was never claimed, or was pruned "
                         "since (goatbeat_history_retention)")


async def _run_page(request: Request, context: _Context) -> Response:
    key = request.query_params.get("key", "")
    try:
        execution, schedule, now = await _call(_read_run, context, key)
    except RunNotShown as exc:
        return _refusal(request, context, 404, "No such run", str(exc))
    zone = (context.schedules.default_timezone if schedule is None
            else display.zone_of(schedule.spec.trigger) or context.schedules.default_timezone)
    return _render(request, context, "run.html", e=execution, s=schedule, now=now, zone=zone,
                   status=display.run_status(execution), late=display.lateness(execution))


@dataclass(frozen=True)
class _Fleet:
    lease: LeaseInfo | None
    now: datetime
    #: Every lease row of the sharding prefix: the shards' and the replicas' member rows.
    members: list[LeaseInfo]
    standbys: list[Replica]


def _read_fleet(context: _Context) -> _Fleet:
    """The lease rows only: the fleet page reads nothing of the schedules."""
    settings = context.schedules.config.settings
    leases = _lease_manager(context.schedules)
    info = leases.inspect(context.lease_name)
    rows = leases.list_leases(sharding_prefix(settings.lease_name))
    return _Fleet(info, context.schedules.store.now(), rows,
                  display.standby_replicas(rows, info, settings))


async def _fleet(request: Request, context: _Context) -> Response:
    data = await _call(_read_fleet, context)
    settings = context.schedules.config.settings
    by_name = {row.name: row for row in data.members}
    if data.lease is not None:
        by_name[data.lease.name] = data.lease
    shards = []
    for k in range(settings.shards):
        name = shard_lease_name(settings.lease_name, Shard(k, settings.shards))
        shards.append((k, name, by_name.get(name)))
    names = {name for _k, name, _row in shards}
    replicas = sorted((row for row in data.members
                       if row.name not in names and row.holder is not None),
                      key=lambda row: row.holder or "")
    leaders = {row.holder for _k, _n, row in shards if row is not None and row.held}
    return _render(
        request, context, "fleet.html", now=data.now, shards=shards, replicas=replicas,
        leaders=leaders, standbys={r.holder for r in data.standbys},
        ttl=settings.lease_ttl, renew=settings.lease_renew_interval,
        zone=context.schedules.default_timezone,
    )


# -- backfills -------------------------------------------------------------------------------
BACKFILL_FIELDS = ("name", "start", "end", "mode", "newest_first")
PREVIEW_SHOWN = 200


async def _backfill_form(request: Request, context: _Context, *,
                         state: forms.FormState | None = None, preview: Any = None,
                         status_code: int = 200) -> Response:
    name = request.query_params.get("name", "") if state is None else state.values["name"]
    schedule = await _call(context.schedules.get, name)
    zone = display.zone_of(schedule.spec.trigger) or context.schedules.default_timezone
    if state is None:
        state = forms.FormState({"name": name, "start": "", "end": "", "mode": "missing",
                                 "newest_first": "", "timezone": zone})
    return _render(request, context, "backfill_new.html", status_code=status_code, s=schedule,
                   form=state, preview=preview, zone=zone, shown=PREVIEW_SHOWN,
                   modes=[mode.value for mode in BackfillMode])


def _backfill_keywords(state: forms.FormState) -> dict[str, Any] | None:
    values = state.values
    zone = values.get("timezone") or "UTC"
    start = forms.read_instant(values.get("start", ""), zone, state, "start")
    end = forms.read_instant(values.get("end", ""), zone, state, "end")
    if start is None or end is None:
        return None
    return {"start": start, "end": end, "mode": values.get("mode", ""),
            "newest_first": values.get("newest_first") == "on"}


async def _backfill_start(request: Request, context: _Context, form: FormData) -> Response:
    """Preview (a dry run, nothing stored) unless the form is the preview's confirmation."""
    name = _text(form, "name")
    schedule = await _call(context.schedules.get, name)
    zone = display.zone_of(schedule.spec.trigger) or context.schedules.default_timezone
    state = forms.FormState({"name": name, "timezone": zone,
                             **{key: _text(form, key).strip() for key in BACKFILL_FIELDS[1:]}})
    keywords = _backfill_keywords(state)
    confirmed = _text(form, "confirm") == "start"
    preview = None
    if keywords is not None:
        try:
            if confirmed:
                backfill = await _call(context.schedules.backfill, name, **keywords)
                return RedirectResponse(_link(request, "backfill", id=backfill.id,
                                              notice="backfill"), status_code=303)
            preview = await _call(functools.partial(context.schedules.backfill, name,
                                                    **keywords, dry_run=True))
        except ConfigurationError as exc:
            for problem in exc.details:
                state.add(problem.root if problem.root in BACKFILL_FIELDS else forms.GENERAL,
                          problem.text)
    return await _backfill_form(request, context, state=state, preview=preview,
                                status_code=422 if state.errors else 200)


def _backfill_id(text: str) -> int:
    return _count(text)


async def _backfill_page(request: Request, context: _Context) -> Response:
    identifier = _backfill_id(request.query_params.get("id", ""))
    try:
        backfill = await _call(context.schedules.get_backfill, identifier)
    except BackfillNotFound as exc:
        return _refusal(request, context, 404, "No such backfill", str(exc))
    now = await _call(context.schedules.store.now)
    return _render(request, context, "backfill.html", b=backfill, now=now,
                   zone=context.schedules.default_timezone,
                   notice=present.NOTICES.get(request.query_params.get("notice", "")))


async def _backfill_cancel(request: Request, context: _Context, form: FormData) -> Response:
    identifier = _backfill_id(_text(form, "id"))
    try:
        await _call(context.schedules.cancel_backfill, identifier)
    except BackfillNotFound as exc:
        return _refusal(request, context, 404, "No such backfill", str(exc))
    return RedirectResponse(_link(request, "backfill", id=identifier, notice="cancelled"),
                            status_code=303)


async def _backfill_list(request: Request, context: _Context) -> Response:
    found = await _call(functools.partial(context.schedules.backfills, limit=100))
    now = await _call(context.schedules.store.now)
    return _render(request, context, "backfills.html", found=found, now=now,
                   zone=context.schedules.default_timezone)


# -- calendars --------------------------------------------------------------------------------
async def _calendar_list(request: Request, context: _Context, *,
                         state: forms.FormState | None = None,
                         status_code: int = 200) -> Response:
    found = await _call(context.schedules.list_calendars)
    now = await _call(context.schedules.store.now)
    return _render(request, context, "calendars.html", status_code=status_code, found=found,
                   entries=display.calendar_entries, now=now,
                   zone=context.schedules.default_timezone,
                   notice=present.NOTICES.get(request.query_params.get("notice", "")),
                   form=state or forms.FormState(dict.fromkeys(forms.CALENDAR_FIELDS, "")))


async def _calendar_create(request: Request, context: _Context, form: FormData) -> Response:
    state = forms.FormState({key: _text(form, key).strip() for key in forms.CALENDAR_FIELDS})
    name = state.values["name"]
    try:
        await _call(functools.partial(context.schedules.create_calendar, name,
                                      **forms.calendar_keywords(state)))
    except ConfigurationError as exc:
        forms.add_calendar_problems(state, exc.details)
    except ScheduleConflict as exc:  # the name is taken
        state.add("name", str(exc))
    if state.errors:
        return await _calendar_list(request, context, state=state, status_code=422)
    return RedirectResponse(_link(request, "calendar", name=name, notice="calendar"),
                            status_code=303)


async def _calendar_page(request: Request, context: _Context, *,
                         state: forms.FormState | None = None,
                         status_code: int = 200) -> Response:
    name = request.query_params.get("name", "") if state is None else state.values["name"]
    try:
        calendar = await _call(context.schedules.get_calendar, name)
        observing = await _call(context.schedules.observing, name)
    except CalendarNotFound as exc:
        return _refusal(request, context, 404, "No such calendar", str(exc))
    entries = display.calendar_entries(calendar)
    now = await _call(context.schedules.store.now)
    return _render(request, context, "calendar.html", status_code=status_code, c=calendar,
                   observing=observing, entries=entries, now=now,
                   zone=context.schedules.default_timezone,
                   notice=present.NOTICES.get(request.query_params.get("notice", "")),
                   form=state or forms.FormState(forms.calendar_values(
                       entries, calendar.description, calendar.name)))


async def _calendar_edit(request: Request, context: _Context, form: FormData) -> Response:
    state = forms.FormState({key: _text(form, key).strip() for key in forms.CALENDAR_FIELDS})
    name = state.values["name"]
    version = _text(form, "version")
    try:
        await _call(functools.partial(
            context.schedules.update_calendar, name, **forms.calendar_keywords(state),
            expected_version=_count(version) if version else None))
    except CalendarNotFound as exc:
        return _refusal(request, context, 404, "No such calendar", str(exc))
    except ConfigurationError as exc:
        forms.add_calendar_problems(state, exc.details)
    except ScheduleConflict as exc:  # changed since the page was read
        state.add(forms.GENERAL, str(exc))
    if state.errors:
        request.scope["query_string"] = urlencode({"name": name}).encode()
        return await _calendar_page(request, context, state=state, status_code=422)
    return RedirectResponse(_link(request, "calendar", name=name, notice="calendar"),
                            status_code=303)


async def _calendar_delete_page(request: Request, context: _Context, *,
                                name: str | None = None, refused: str | None = None,
                                status_code: int = 200) -> Response:
    """The confirmation a calendar's removal asks for; while schedules observe it, the reason
    it would be refused (the API's) instead of the button."""
    name = request.query_params.get("name", "") if name is None else name
    try:
        calendar = await _call(context.schedules.get_calendar, name)
        observing = await _call(context.schedules.observing, name)
    except CalendarNotFound as exc:
        return _refusal(request, context, 404, "No such calendar", str(exc))
    if refused is None and observing:
        refused = str(CalendarInUse(name, observing))
    return _render(request, context, "calendar_delete.html", status_code=status_code,
                   c=calendar, observing=observing, refused=refused)


async def _calendar_delete(request: Request, context: _Context, form: FormData) -> Response:
    name = _text(form, "name")
    if _text(form, "confirm") != "remove":
        # Only the confirmation page's button removes: any other post is asked to confirm.
        return RedirectResponse(_link(request, "calendar_delete_confirm", name=name),
                                status_code=303)
    try:
        await _call(context.schedules.delete_calendar, name)
    except CalendarNotFound as exc:
        return _refusal(request, context, 404, "No such calendar", str(exc))
    except CalendarInUse as exc:  # a schedule took it up since the page was read
        return await _calendar_delete_page(request, context, name=name, refused=str(exc),
                                           status_code=409)
    return RedirectResponse(_link(request, "calendars", notice="calendar-removed"),
                            status_code=303)


# -- signing in -------------------------------------------------------------------------------
async def _login(request: Request, context: _Context,
                 form: FormData | None = None) -> Response:
    token = context.settings.token
    target = request.query_params.get("next", "")
    # Only a path of this application: never an address elsewhere.
    if not target.startswith("/") or target.startswith("//"):
        target = ""
    error, client = None, client_key(request.client and request.client.host)
    if form is not None:
        wait = context.throttle.wait(client)
        if wait is not None:
            response = _refusal(request, context, 429, "Too many attempts", "Too many wrong "
                                f"tokens from this address: try again in {wait} s.")
            response.headers["Retry-After"] = str(wait)
            return response
        if token is not None and same_secret(_text(form, "token"), token):
            context.throttle.succeeded(client)
            response = RedirectResponse(target or _link(request, "overview"), status_code=303)
            response.set_cookie(context.cookie(SESSION_COOKIE), context.signer.new_session(),
                                max_age=int(context.settings.session_lifetime.total_seconds()),
                                httponly=True, samesite="strict",
                                path=_cookie_path(request, context),
                                secure=context.settings.secure_cookies)
            return response
        context.throttle.failed(client)
        error = "That is not the token this dashboard was started with."
    return _render(request, context, "login.html", status_code=401 if error else 200,
                   error=error, next=target, needs_token=token is not None)


async def _logout(request: Request, context: _Context, form: FormData) -> Response:
    # Revoked on the server: a copy of the cookie kept elsewhere stops working too.
    context.signer.revoke(_session(request, context))
    response = RedirectResponse(_link(request, "login"), status_code=303)
    response.delete_cookie(context.cookie(SESSION_COOKIE), path=_cookie_path(request, context),
                           secure=context.settings.secure_cookies, httponly=True,
                           samesite="strict")
    return response

