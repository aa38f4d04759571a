"""How the dashboard answers goatbeat's errors: one table from an error's kind to the page
answering it, served by the application's handler of :class:`GoatbeatError`.

A page's handler catches an error itself only where its page says more than this table would
(a form shown again with the problem under its field, a confirmation saying why it refused).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery.core.types.errors import (
    AuditEntryNotFound,
    BackfillNotFound,
    CalendarNotFound,
    ErrorKind,
    GoatbeatError,
    ScheduleNotFound,
    StoreTimeout,
)
from goatbeat_celery.store.url import mask_url
from goatbeat_celery.web.pages.base import Context, finish, refusal


class RunNotShown(GoatbeatError):
    """No execution has this key (pruned, or never claimed)."""

    kind = ErrorKind.NOT_FOUND

    def __init__(self, key: str) -> None:
        super().__init__(f"no run has the key {key!r}: it was never claimed, or was pruned "
                         "since (goatbeat_history_retention)")


@dataclass(frozen=True)
class Answer:
    """The page answering an error of one kind: its status and title; its message is the
    error's text, with any database password masked."""

    status: int
    title: str


#: goatbeat's errors by kind → the page answering them.
ANSWERS: Mapping[ErrorKind, Answer] = {
    ErrorKind.INVALID: Answer(422, "Invalid input"),
    ErrorKind.NOT_FOUND: Answer(404, "Not found"),
    ErrorKind.CONFLICT: Answer(409, "Conflict"),
    ErrorKind.UNAVAILABLE: Answer(503, "Database unavailable"),
    ErrorKind.FAILED: Answer(500, "goatbeat error"),
}
#: Titles more precise than their kind's: the page of a missing thing names what is missing;
#: a statement cancelled at its timeout came from a database that answered.
TITLES: Mapping[type[GoatbeatError], str] = {
    StoreTimeout: "Too much to read: ask for less (a time range, a narrower search)",
    ScheduleNotFound: "No such schedule",
    BackfillNotFound: "No such backfill",
    AuditEntryNotFound: "No such audit entry",
    CalendarNotFound: "No such calendar",
    RunNotShown: "No such run",
}


def error_page(request: Request, context: Context, exc: GoatbeatError) -> Response:
    """The page answering ``exc``, by its kind (:data:`ANSWERS`)."""
    answer = ANSWERS[exc.kind]
    title = next((title for kind, title in TITLES.items() if isinstance(exc, kind)),
                  answer.title)
    return finish(request, context,
                  refusal(request, context, answer.status, title, mask_url(str(exc))))


def error_handler(context: Context) -> Callable[[Request, Exception], Awaitable[Response]]:
    """The application's handler of :class:`GoatbeatError`: every error a page's handler does
    not answer itself reaches it, with the request past all of
    :func:`~goatbeat_celery.web.pages.base.guarded`'s checks."""

    async def handle(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, GoatbeatError)
        return error_page(request, context, exc)

    return handle
