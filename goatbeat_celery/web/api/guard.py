"""The checks every request of the API passes before its handler runs, and the refusals of a
name outside the token's prefix.

A token limited to a prefix answers a read of a name outside it with 404, exactly as for a
name that does not exist, so it cannot learn what other teams have; and refuses a write of
such a name with 403 before anything is looked up, since the refusal depends on the name
alone and reveals nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery.core.types.errors import GoatbeatError
from goatbeat_celery.core.types.tokens import ApiToken, Scope
from goatbeat_celery.web.api.answers import path_refusal, problem_response, translated
from goatbeat_celery.web.api.context import Api, Handler
from goatbeat_celery.web.api.problem import ApiProblem
from goatbeat_celery.web.security import cross_site_refusal, host_refusal

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def guarded(api: Api, handler: Handler, scope: Scope) -> Callable[[Request], Awaitable[Response]]:
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


async def _token(api: Api, request: Request) -> ApiToken:
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


def readable(token: ApiToken, name: str, missing: GoatbeatError) -> None:
    """404, as for a name that does not exist, when ``name`` is outside the token's prefix."""
    if not token.covers(name):
        raise missing


def writable(token: ApiToken, name: str) -> None:
    """403 when ``name`` is outside the token's prefix, judged on the name alone."""
    if not token.covers(name):
        raise ApiProblem(403, "Outside the token's prefix",
                         f"token {token.name!r} may change only names starting with "
                         f"{token.prefix!r}; nothing was changed")
