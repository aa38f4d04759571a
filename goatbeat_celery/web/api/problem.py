"""The API's refusal: an exception each handler may raise, answered as
``application/problem+json`` (RFC 9457) by :mod:`goatbeat_celery.web.api`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from goatbeat_celery.core.types.problems import Problem


class ApiProblem(Exception):
    """A refusal, answered as ``application/problem+json`` with ``status``; ``members``: the
    extension members (RFC 9457 §3.2) its body carries besides the standard ones."""

    def __init__(self, status: int, title: str, detail: str,
                 problems: tuple[Problem, ...] = (), headers: Mapping[str, str] | None = None,
                 members: Mapping[str, Any] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.problems = problems
        self.headers = dict(headers or {})
        self.members = dict(members or {})


__all__ = ["ApiProblem"]
