"""One check's result, as ``check`` reports it: the checks of :mod:`~goatbeat_celery.cli.checks`
and :mod:`~goatbeat_celery.cli.access` both return these."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = ["Check", "Outcome"]


class Outcome(str, enum.Enum):
    OK = "ok"
    #: Works, with a limit the operator should know about (not a failure).
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True, kw_only=True)
class Check:
    """One check's result; ``detail`` says what was found, or what is wrong and how to fix it."""

    name: str
    outcome: Outcome
    detail: str

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.outcome in (Outcome.OK, Outcome.WARN),
                "status": self.outcome.value, "detail": self.detail}
