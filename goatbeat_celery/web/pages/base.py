"""What every page of the dashboard shares: its context, rendering, links and redirects, the
CSRF and session plumbing, and the checks every request passes (:func:`guarded`).

Page modules import this one; this one imports no page.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlencode, urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, ImmutableMultiDict
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from goatbeat_celery.web import bodies, present
from goatbeat_celery.web.bulk_results import BulkResults
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
from goatbeat_celery.web.throttle import SignInThrottle

if TYPE_CHECKING:
    from goatbeat_celery.api import Schedules

#: Methods that change nothing: every other one is checked for its CSRF token.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

Handler = Callable[..., Awaitable[Response]]

#: Seconds between two reads of a page by its script (``static/live.js``), which replaces the
#: page's ``data-live`` regions with what the server renders now.
LIVE_EVERY = 5


@dataclass(frozen=True)
class Context:
    """What every handler is given beside its request: the API it reads and writes through,
    the dashboard's settings, and its rendering and signing."""

    schedules: Schedules
    settings: WebSettings
    lease_name: str
    templates: Jinja2Templates
    signer: Signer
    throttle: SignInThrottle = field(default_factory=SignInThrottle)
    #: What recent bulk actions did, for the page each redirects to.
    bulk_results: BulkResults = field(default_factory=BulkResults)
    #: The Celery app whose workers and broker the workers page asks (None: not known).
    celery_app: Any = None

    def cookie(self, name: str) -> str:
        return self.settings.cookie_name(name)


# -- links, cookies, rendering ------------------------------------------------------------------
def link(request: Request, route: str, /, **query: Any) -> str:
    """A link to ``route`` as a path (the mount point included), never naming a host: the
    request's ``Host`` is the client's to choose, so nothing built from it is sent back."""
    # Each route's path once per request: url_for walks every route, and the runs grid links
    # 1,000 runs (90 ms of its time). Routes take no path parameters, so the name is the key.
    paths: dict[str, str] = request.scope.setdefault("goatbeat.paths", {})
    path = paths.get(route)
    if path is None:
        path = paths[route] = urlsplit(str(request.url_for(route))).path
    kept = {k: v for k, v in query.items() if v not in (None, "")}
    return f"{path}?{urlencode(kept)}" if kept else path


def redirect(request: Request, route: str, /, **query: Any) -> Response:
    """See Other (303) to ``route``: the answer to a form that was taken."""
    return RedirectResponse(link(request, route, **query), status_code=303)


def cookie_path(request: Request, context: Context) -> str:
    # A __Host- cookie must be set for the whole host.
    if context.settings.secure_cookies:
        return "/"
    return str(request.scope.get("root_path") or "") + "/"


def session(request: Request, context: Context) -> str | None:
    return request.cookies.get(context.cookie(SESSION_COOKIE))


def csrf(request: Request, context: Context) -> str:
    """This browser's CSRF token: its cookie's when the server signed that for its session, a
    new one otherwise (set in the cookie by :func:`finish`)."""
    token = getattr(request.state, "csrf", None)
    if token is None:
        token = request.cookies.get(context.cookie(CSRF_COOKIE))
        if not context.signer.csrf_valid(token, session(request, context)):
            token = context.signer.new_csrf(session(request, context))
        request.state.csrf = token
    return cast(str, token)


def finish(request: Request, context: Context, response: Response) -> Response:
    """``response`` with the CSRF cookie this request issued and the security headers, as
    every answer of the dashboard carries them."""
    issued = getattr(request.state, "csrf", None)
    if issued is not None and request.cookies.get(context.cookie(CSRF_COOKIE)) != issued:
        response.set_cookie(context.cookie(CSRF_COOKIE), issued, httponly=True,
                            samesite="strict", path=cookie_path(request, context),
                            secure=context.settings.secure_cookies)
    for header, value in SECURITY_HEADERS.items():
        response.headers.setdefault(header, value)
    response.headers.setdefault("Cache-Control", "no-store")
    return response


def render(request: Request, context: Context, template: str, status_code: int = 200,
           **values: Any) -> Response:
    values.update(
        request=request, csrf_field=CSRF_FIELD, csrf_token=csrf(request, context),
        read_only=context.settings.read_only, link=lambda route, /, **q: link(request, route, **q),
        signed_in=(context.settings.token is not None
                   and getattr(request.state, "signed_in", False)),
        static=urlsplit(str(request.url_for("static", path="style.css"))).path,
        icon=urlsplit(str(request.url_for("static", path="favicon.svg"))).path,
        live_script=urlsplit(str(request.url_for("static", path="live.js"))).path,
        live_every=LIVE_EVERY,
        zones_script=urlsplit(str(request.url_for("static", path="zones.js"))).path,
    )
    return context.templates.TemplateResponse(request, template, values,
                                              status_code=status_code)


def refusal(request: Request, context: Context, status: int, title: str,
            message: str) -> Response:
    return render(request, context, "error.html", status_code=status, title=title,
                  message=message)


def notice(request: Request) -> str | None:
    """The line a redirect after a change asked its page to show (``?notice=``)."""
    return present.NOTICES.get(request.query_params.get("notice", ""))


# -- reading requests -------------------------------------------------------------------------
def count(text: str) -> int:
    """A page number or version from a link or a form: plain ASCII digits, at most 18 (what a
    64-bit column holds); anything else counts as 0 (the first page, or no version)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else 0


def text(form: FormData | Mapping[str, Any], name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


def call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Awaitable[Any]:
    """``function`` run in the thread pool: every database call is synchronous."""
    return run_in_threadpool(function, *args, **kwargs)


# -- the checks every request passes ------------------------------------------------------------
def guarded(context: Context, handler: Handler, *, public: bool = False,
            read_only_too: bool = False) -> Callable[[Request], Awaitable[Response]]:
    """``handler`` behind the dashboard's checks, in this order, then the cookies and security
    headers every response carries:

    1. the name the request is addressed to (:func:`~goatbeat_celery.web.security.host_refusal`,
       400), before anything else: a rebound name gets nothing, not even a cookie;
    2. authentication, unless ``public`` (the sign-in page);
    3. for every state-changing request (any method but GET, HEAD and OPTIONS): a browser must
       send it from this dashboard's own pages (:func:`~goatbeat_celery.web.security.
       cross_site_refusal`), the CSRF token of its form must match its cookie and be one the
       server signed (:func:`csrf_refusal`), and a read-only dashboard refuses it unless
       ``read_only_too`` (signing in and out);
    4. no field or query parameter may hold a NUL character (400), which no name, task or
       filter can contain and the database would refuse.

    A state-changing handler is called with the form read here, bounded before it is parsed
    (:mod:`~goatbeat_celery.web.bodies`); a safe one without it. goatbeat's errors raised by
    the handler are answered by :func:`~goatbeat_celery.web.pages.errors.error_handler`.
    """

    async def endpoint(request: Request) -> Response:
        settings = context.settings
        misdirected = host_refusal(request.headers.get("host"), settings)
        if misdirected is not None:
            return finish(request, context, PlainTextResponse(misdirected, status_code=400))
        signed_in = authenticated(
            settings.token, authorization=request.headers.get("authorization"),
            session_valid=context.signer.session_valid(session(request, context)))
        request.state.signed_in = signed_in
        if not signed_in and not public:
            if request.method in SAFE_METHODS:
                here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return finish(request, context, redirect(request, "login", next=here))
            return finish(request, context, refusal(
                request, context, 401, "Sign in first",
                "This dashboard needs its token; sign in and try again."))
        try:
            if request.method in SAFE_METHODS:
                response = (bad_text_refusal(request, context, request.query_params)
                            or await handler(request, context))
            else:
                form = await bodies.read_form(
                    request, bodies.SIGN_IN_BODY if public else bodies.FORM_BODY)
                refused = (cross_site(request, context) or csrf_refusal(request, context, form)
                           or bad_text_refusal(request, context, request.query_params)
                           or bad_text_refusal(request, context, form))
                if refused is None and settings.read_only and not read_only_too:
                    refused = refusal(
                        request, context, 403, "Read-only",
                        "This dashboard was started read-only; nothing was changed.")
                response = refused or await handler(request, context, form)
        except bodies.BodyRefused as exc:
            response = refusal(request, context, exc.status, exc.title, exc.detail)
            response.headers.update(exc.headers)
        return finish(request, context, response)

    return endpoint


def cross_site(request: Request, context: Context) -> Response | None:
    reason = cross_site_refusal(origin=request.headers.get("origin"),
                                fetch_site=request.headers.get("sec-fetch-site"),
                                host_header=request.headers.get("host"))
    if reason is None:
        return None
    return refusal(request, context, 403, "Sent from another site",
                   f"This request was refused because {reason}. Nothing was changed; use "
                   "the dashboard's own pages.")


def csrf_refusal(request: Request, context: Context, form: FormData) -> Response | None:
    """The one CSRF check (signed double submit): the form's token must be the one in this
    browser's cookie, which another site can neither read nor send (``SameSite=Strict``), and
    one the server signed for this browser's session, so that a cookie planted by another
    service on the same host is worth nothing. Every state-changing request passes here
    before its handler reads or writes anything."""
    cookie = request.cookies.get(context.cookie(CSRF_COOKIE))
    if same_secret(text(form, CSRF_FIELD), cookie) and \
            context.signer.csrf_valid(cookie, session(request, context)):
        return None
    return refusal(request, context, 403, "Form expired",
                   "The form's security token is missing or does not match this browser's; "
                   "reload the page and submit it again. Nothing was changed.")


def bad_text_refusal(request: Request, context: Context,
                     fields: ImmutableMultiDict[str, Any]) -> Response | None:
    bad = sorted({name for name, value in fields.multi_items()
                  if "\x00" in name or (isinstance(value, str) and "\x00" in value)})
    if not bad:
        return None
    return refusal(request, context, 400, "Unreadable request",
                   f"{', '.join(bad)}: holds a NUL character, which "
                   "no schedule name, task, filter or value may contain. Nothing was changed.")
