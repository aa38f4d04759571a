"""How much of a request body any face reads: bounded before anything parses it.

A body is refused with 413 before a byte of it is read when its ``Content-Length`` is over the
limit, and cut off at the limit while it is read (:func:`read`) when it gives no length, is
chunked, or gives a length smaller than what it sends: a face holds at most ``limit`` bytes of
one request, then parses them, and no parser, temp file or ``json.loads`` ever sees more. The
refusal says ``Connection: close``, so the server drops the rest of the body instead of reading
it to find the next request.

Limits, per face: the sign-in form, the only body read before authentication, is small
(:data:`SIGN_IN_BODY`); the dashboard's forms and the JSON API take :data:`FORM_BODY` and the
API's own ``MAX_BODY``. A form is ``application/x-www-form-urlencoded`` only (no page uploads a
file): multipart, which would spool parts to disk, is refused with 415 before it is read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Protocol
from urllib.parse import parse_qsl

from starlette.datastructures import FormData, UploadFile
from starlette.requests import ClientDisconnect, Request

#: The sign-in form: a CSRF field and a token, read before the sender is known.
SIGN_IN_BODY = 16 * 1024
#: A dashboard form once signed in: a definition as large as the API takes (1 MiB of JSON),
#: percent-encoded (at most three bytes for one).
FORM_BODY = 3 * 1024 * 1024
#: The most fields a form is parsed into (the largest page form has a few dozen).
FORM_FIELDS = 1000
FORM_MEDIA = "application/x-www-form-urlencoded"
#: Sent with a refusal: the unread rest of the body is dropped with the connection.
CLOSE = {"Connection": "close"}


class BodyRefused(Exception):
    """A body that is not read: too large (413), of a kind the face does not take (415), or
    with an unreadable length (400). The dashboard renders it as its error page."""

    def __init__(self, status: int, title: str, detail: str, *,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.headers = dict(headers or {})


class Refusal(Protocol):
    """What a face raises to refuse a body (the API passes its problem exception)."""

    def __call__(self, status: int, title: str, detail: str, *,
                 headers: Mapping[str, str]) -> Exception: ...


def media_type(request: Request) -> str:
    """The ``Content-Type`` without its parameters, lower-cased ('' when none is given)."""
    return (request.headers.get("content-type") or "").split(";")[0].strip().lower()


async def read(request: Request, limit: int, *, refuse: Refusal = BodyRefused) -> bytes:
    """The whole body, at most ``limit`` bytes of it; ``refuse`` (413) as soon as it is
    known to be larger: from its ``Content-Length`` before reading, or from the bytes counted
    as they arrive."""
    declared = request.headers.get("content-length")
    if declared is not None:
        text = declared.strip()
        if not (text.isascii() and text.isdigit()):
            raise refuse(400, "Unreadable length", f"Content-Length {declared[:40]!r} is not "
                         "a number of bytes; nothing was read", headers=CLOSE)
        # More digits than any limit has is too large (and int() of thousands is refused).
        if len(text) > len(str(limit)) or int(text) > limit:
            raise _too_large(refuse, limit)
    received = bytearray()
    try:
        async with contextlib.aclosing(request.stream()) as stream:
            async for chunk in stream:
                if len(received) + len(chunk) > limit:
                    raise _too_large(refuse, limit)
                received += chunk
    except ClientDisconnect as exc:
        raise refuse(400, "Body cut short", "the connection closed before the body ended; "
                     "nothing was changed", headers=CLOSE) from exc
    return bytes(received)


def _too_large(refuse: Refusal, limit: int) -> Exception:
    return refuse(413, "Body too large", f"a request body here holds at most {limit} bytes; "
                  "nothing was read past that, nothing was changed", headers=CLOSE)


async def read_form(request: Request, limit: int, *, refuse: Refusal = BodyRefused) -> FormData:
    """A URL-encoded form of at most ``limit`` bytes and :data:`FORM_FIELDS` fields; a body of
    another type is refused (415) unread. An empty body with no type is an empty form."""
    media = media_type(request)
    if media not in (FORM_MEDIA, ""):
        raise refuse(415, "Form expected", f"a form is sent as {FORM_MEDIA}, not "
                     f"{media[:80]!r}; nothing was read", headers=CLOSE)
    raw = await read(request, limit, refuse=refuse)
    if not raw:
        return FormData()
    if not media:
        raise refuse(415, "Form expected", f"a form is sent as {FORM_MEDIA}; nothing was "
                     "changed", headers=CLOSE)
    try:
        # Decoded as Starlette decodes a form: bytes as Latin-1, percent-escapes as UTF-8.
        fields: list[tuple[str, str | UploadFile]] = list(parse_qsl(
            raw.decode("latin-1"), keep_blank_values=True, max_num_fields=FORM_FIELDS))
    except ValueError as exc:  # more fields than FORM_FIELDS
        raise refuse(413, "Too many fields", f"a form holds at most {FORM_FIELDS} fields; "
                     "nothing was changed", headers=CLOSE) from exc
    return FormData(fields)
