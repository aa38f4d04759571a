"""Signing in with the dashboard's token (``/login``, throttled by client address) and out
(``/logout``, revoking the session on the server)."""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from goatbeat_celery.web.pages.base import (
    Context,
    cookie_path,
    link,
    redirect,
    refusal,
    render,
    session,
    text,
)
from goatbeat_celery.web.security import SESSION_COOKIE, same_secret
from goatbeat_celery.web.throttle import client_key


async def login(request: Request, context: Context, form: FormData | None = None) -> Response:
    token = context.settings.token
    target = request.query_params.get("next", "")
    # Only a path of this application: never an address elsewhere.
    if not target.startswith("/") or target.startswith("//"):
        target = ""
    error, client = None, client_key(request.client and request.client.host)
    if form is not None:
        wait = context.throttle.wait(client)
        if wait is not None:
            response = refusal(request, context, 429, "Too many attempts", "Too many wrong "
                               f"tokens from this address: try again in {wait} s.")
            response.headers["Retry-After"] = str(wait)
            return response
        if token is not None and same_secret(text(form, "token"), token):
            context.throttle.succeeded(client)
            response = RedirectResponse(target or link(request, "overview"), status_code=303)
            response.set_cookie(context.cookie(SESSION_COOKIE), context.signer.new_session(),
                                max_age=int(context.settings.session_lifetime.total_seconds()),
                                httponly=True, samesite="strict",
                                path=cookie_path(request, context),
                                secure=context.settings.secure_cookies)
            return response
        context.throttle.failed(client)
        error = "That is not the token this dashboard was started with."
    return render(request, context, "login.html", status_code=401 if error else 200,
                  error=error, next=target, needs_token=token is not None)


async def logout(request: Request, context: Context, form: FormData) -> Response:
    # Revoked on the server: a copy of the cookie kept elsewhere stops working too.
    context.signer.revoke(session(request, context))
    response = redirect(request, "login")
    response.delete_cookie(context.cookie(SESSION_COOKIE), path=cookie_path(request, context),
                           secure=context.settings.secure_cookies, httponly=True,
                           samesite="strict")
    return response
