"""How the JSON API answers: documents as ``application/json``, refusals as
``application/problem+json`` (RFC 9457), and the one table from goatbeat's errors' kinds to
statuses.

Every answer under ``/api/`` is one of these, also where no route of the API is reached: a path
no route serves (404), a method a route does not take (405), a path that is not UTF-8 or holds
a line break. A problem repeats what the client sent (an unknown key, a value), which may be
text no UTF-8 encoder takes (a lone surrogate from a ``\\ud800`` escape): its body is written in
ASCII, with JSON escapes, so that building it never fails.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote_to_bytes

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from goatbeat_celery.core.types.errors import ConfigurationError, ErrorKind, GoatbeatError
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.store.url import mask_url
from goatbeat_celery.web.api.problem import ApiProblem

logger = logging.getLogger(__name__)

#: Where the API is mounted inside the dashboard's application.
API_PREFIX = "/api/v1"
HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
}
PROBLEM_TYPE = "application/problem+json"

#: goatbeat's errors by kind → (status, title); a kind not here (``FAILED``) answers 500.
ANSWERS: dict[ErrorKind, tuple[int, str]] = {
    ErrorKind.INVALID: (422, "Invalid input"),
    ErrorKind.NOT_FOUND: (404, "Not found"),
    ErrorKind.CONFLICT: (409, "Conflict"),
    ErrorKind.UNAVAILABLE: (503, "Database unavailable"),
}


class _AsciiJSON(JSONResponse):
    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False,
                          separators=(",", ":")).encode("ascii")


def problem_response(exc: ApiProblem) -> Response:
    body: dict[str, Any] = {**exc.members, "type": "about:blank", "title": exc.title,
                            "status": exc.status, "detail": exc.detail}
    if exc.problems:
        body["problems"] = [{"field": p.field, "message": p.message_as(), "hint": p.hint_as()}
                            for p in exc.problems]
    return _with_headers(_AsciiJSON(body, status_code=exc.status, media_type=PROBLEM_TYPE,
                                    headers=exc.headers))


def json_response(body: Any, status: int = 200, *,
                  headers: Mapping[str, str] | None = None) -> Response:
    return _with_headers(JSONResponse(body, status_code=status, headers=dict(headers or {})))


def _with_headers(response: Response) -> Response:
    for header, value in HEADERS.items():
        response.headers.setdefault(header, value)
    return response


def translated(exc: GoatbeatError) -> ApiProblem:
    """The problem answering ``exc``, by its kind in :data:`ANSWERS`; 500, logged, for a
    failure of no kind there."""
    answer = ANSWERS.get(exc.kind)
    if answer is None:
        logger.error("API request failed: %s", mask_url(str(exc)), extra={"action": "api_error"})
        return ApiProblem(500, "goatbeat error", mask_url(str(exc)))
    status, title = answer
    if isinstance(exc, ConfigurationError):  # its problems, each naming its field
        return ApiProblem(status, title, f"invalid {exc.subject}; nothing was changed",
                          exc.details)
    return ApiProblem(status, title, mask_url(str(exc)))


def path_refusal(request: Request) -> ApiProblem | None:
    """Why the request's path names nothing, before any route reads it: bytes that are not
    UTF-8 once percent-decoded (a server would read them as U+FFFD, another name than the
    client's), or a line break (no name holds one, and a route's pattern does not match
    across it, so the route chosen would not be the one the path names)."""
    raw = request.scope.get("raw_path")
    if isinstance(raw, bytes):
        try:
            unquote_to_bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            return ApiProblem(400, "Unreadable path", "the path is not UTF-8 once "
                              "percent-decoded; nothing was changed", (Problem(
                                  "path", "holds bytes that are not UTF-8",
                                  "percent-encode the name's UTF-8 bytes"),))
    if "\n" in request.scope["path"]:
        return ApiProblem(404, "Not found", "no resource has this path; nothing was changed", (
            Problem("path", "holds a line break (U+000A), which no name holds",
                    "use printable characters only"),))
    return None


def location(request: Request) -> str:
    """The request's own path as a ``Location`` header holds it: percent-encoded (a name may
    hold any character; a header only Latin-1, and here ASCII)."""
    return quote(str(request.scope["path"]), safe="/")


def _in_api(request: Request) -> bool:
    path, root = str(request.scope["path"]), str(request.scope.get("root_path") or "")
    within = path[len(root):] if root and path.startswith(root) else path
    return within == API_PREFIX or within.startswith(API_PREFIX + "/")


async def http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no route, a method a route does not take): a problem under
    the API, the plain text Starlette gives elsewhere."""
    assert isinstance(exc, HTTPException)
    if not _in_api(request):
        if exc.status_code in {204, 304}:
            return Response(status_code=exc.status_code, headers=exc.headers)
        return PlainTextResponse(exc.detail, status_code=exc.status_code, headers=exc.headers)
    detail = {404: "no resource of the API has this path",
              405: f"this path takes {(exc.headers or {}).get('Allow', 'other methods')}"}
    return problem_response(ApiProblem(exc.status_code, exc.detail,
                                       detail.get(exc.status_code, exc.detail),
                                       headers=exc.headers))


async def server_error(request: Request, exc: Exception) -> Response:
    """An error no check foresaw, under the API answered as a problem (the client learns it
    failed in the format it reads); the server logs it, as Starlette raises it on."""
    if not _in_api(request):
        return PlainTextResponse("Internal Server Error", status_code=500)
    return problem_response(ApiProblem(500, "Internal error", "the request could not be "
                                       "answered; it is in the server's log"))


#: The application's handlers for the refusals and failures no route answers.
EXCEPTION_HANDLERS = {HTTPException: http_exception, Exception: server_error}
