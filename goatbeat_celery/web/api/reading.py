"""What a request gives a handler of the API: its JSON body, query parameters, the reason
header, ``If-Match``; and the small answers every resource shares (an ETag, a lost
compare-and-set)."""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from goatbeat_celery.core.types.errors import ErrorKind, GoatbeatError
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.web import bodies
from goatbeat_celery.web.api.documents import read_document
from goatbeat_celery.web.api.problem import ApiProblem

#: The most items one response lists (schedules, runs, backfills).
MAX_PAGE = 1000
#: The largest request body read (a schedule's definition is a few kilobytes).
MAX_BODY = 1024 * 1024
JSON_TYPES = frozenset({"application/json", "application/merge-patch+json"})
#: The header a change's reason is given in (recorded in the audit log).
REASON_HEADER = "X-Goatbeat-Reason"


async def body(request: Request, *, optional: bool = False) -> dict[str, Any]:
    """The request's JSON object; 415, 413 or 400 for anything else, 422 naming each field
    that holds what no field may (:func:`~goatbeat_celery.web.api.documents.read_document`)."""
    raw = await bodies.read(request, MAX_BODY, refuse=ApiProblem)
    if not raw and optional:
        return {}
    media = bodies.media_type(request)
    if media not in JSON_TYPES:
        raise ApiProblem(415, "JSON expected",
                         "send the body as JSON with 'Content-Type: application/json'")
    return read_document(raw)


def call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Awaitable[Any]:
    """``function(*args, **kwargs)`` in a worker thread: the store's calls block."""
    return run_in_threadpool(functools.partial(function, *args, **kwargs))


def reason(request: Request) -> str | None:
    """The reason the audit log records with the change: the ``X-Goatbeat-Reason`` header
    (UTF-8; checked by ``Schedules``, as every face's)."""
    given = request.headers.get(REASON_HEADER)
    if given is None:
        return None
    try:
        return given.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return given


def etag(version: int) -> str:
    return f'"{version}"'


def if_match(request: Request) -> int | None | str:
    """``If-Match``: the definition version it names, ``"*"``, or None when absent; 412 for
    a value that is no version of ours (a list, a weak tag): it cannot match."""
    given = request.headers.get("if-match")
    if given is None:
        return None
    text = given.strip()
    if text == "*":
        return "*"
    found = re.fullmatch(r'"(\d{1,18})"', text)
    if found is None:
        raise ApiProblem(412, "Precondition failed",
                         f"If-Match {given!r} names no version of this resource; give the "
                         'ETag a GET returned, such as "3"')
    return int(found.group(1))


@contextmanager
def compared(precondition: int | str | None) -> Iterator[None]:
    """A lost compare-and-set inside: 412 when the client named the version it read
    (If-Match); otherwise the conflict's own answer, 409 (another edit came between this
    request's own read and write)."""
    try:
        yield
    except GoatbeatError as exc:
        if exc.kind is ErrorKind.CONFLICT and precondition is not None:
            raise ApiProblem(412, "Precondition failed", str(exc)) from exc
        raise


def refuse_if_match_on_absent(kind: str, name: str, precondition: int | str | None) -> None:
    """If-Match on a resource that does not exist cannot match: 412 (a PUT without it
    creates)."""
    if precondition is not None:
        raise ApiProblem(412, "Precondition failed",
                         f"no {kind} named {name!r}: If-Match needs one to exist")


def expected_version(current: int, precondition: int | str | None) -> int:
    """The version a write compares with: the one If-Match names, else the one just read
    (no If-Match, or ``*``)."""
    expected = current if precondition in (None, "*") else precondition
    assert isinstance(expected, int)
    return expected


def text_problem(value: Any, label: str) -> list[Problem]:
    return [] if value is None or isinstance(value, str) else [
        Problem(label, f"expected text, got {type(value).__name__}")]


def instant(value: Any, label: str, problems: list[Problem]) -> datetime | None:
    """An instant from ISO-8601 text with an offset; None (problem appended) otherwise."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            found = datetime.fromisoformat(value)
        except ValueError:
            found = None
        if found is not None and found.utcoffset() is not None:
            return found
    problems.append(Problem(label, f"cannot read {value!r} as an instant",
                            "give ISO-8601 text with an offset, such as "
                            "'2030-01-01T09:00:00+01:00'"))
    return None


def query_int(request: Request, key: str, default: int, most: int = MAX_PAGE) -> int:
    text = request.query_params.get(key)
    if text is None or text == "":
        return default
    if not (text.isascii() and text.isdigit() and len(text) <= 18 and 1 <= int(text) <= most):
        raise ApiProblem(422, "Invalid input", f"invalid {key}", (
            Problem(key, f"expected a whole number from 1 to {most}, got {text!r}"),))
    return int(text)


def query_bool(request: Request, key: str) -> bool | None:
    text = request.query_params.get(key)
    if text is None or text == "":
        return None
    if text in ("true", "false"):
        return text == "true"
    raise ApiProblem(422, "Invalid input", f"invalid {key}", (
        Problem(key, f"expected true or false, got {text!r}"),))
