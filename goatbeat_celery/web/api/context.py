"""What every handler of the API is given: the schedules it acts on, the server's settings and
the token table, and the shape a handler has."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery.core.types.tokens import ApiToken
from goatbeat_celery.tokens import Tokens
from goatbeat_celery.web.security import WebSettings

if TYPE_CHECKING:
    from goatbeat_celery.api import Schedules


@dataclass(frozen=True)
class Api:
    """The API's state; ``schedules`` acts as the request's token once it is checked."""

    schedules: Schedules
    settings: WebSettings
    tokens: Tokens


#: A route's handler, called once the request passed every check, with the token it gave.
Handler = Callable[[Request, Api, ApiToken], Awaitable[Response]]
