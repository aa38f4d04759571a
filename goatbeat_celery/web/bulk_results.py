"""What a bulk action of the schedules list did, kept a short while so that the page the
action redirects to (``/schedules?bulk=<id>``) can show it: the post answers See Other, and a
reload reads the outcome again instead of acting again.

The outcome stays in this process's memory, under a random id that names nothing and grants
nothing: it is shown only to the session that took the action, for :data:`KEPT` seconds, and
at most :data:`HELD` outcomes are kept (the oldest forgotten first). An id this process does
not hold (expired, or taken by another replica behind a load balancer) shows a line saying so;
the audit log keeps what was done either way.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from goatbeat_celery.api.bulk import BulkResult

__all__ = ["HELD", "KEPT", "BulkResults"]

#: Seconds an outcome can be read again after its action.
KEPT = 600.0
#: Outcomes held at once.
HELD = 200


@dataclass
class BulkResults:
    """The outcomes of recent bulk actions, by id, each readable by the session that took it."""

    kept: float = KEPT
    held: int = HELD
    clock: Callable[[], float] = time.monotonic
    _found: OrderedDict[str, tuple[float, str | None, BulkResult]] = field(
        default_factory=OrderedDict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def keep(self, result: BulkResult, owner: str | None) -> str:
        """Keep ``result`` for ``owner`` (the session cookie, None without sign-in); its id."""
        key = secrets.token_urlsafe(12)
        with self._lock:
            self._forget_expired()
            self._found[key] = (self.clock() + self.kept, owner, result)
            while len(self._found) > self.held:
                self._found.popitem(last=False)
        return key

    def get(self, key: str, owner: str | None) -> BulkResult | None:
        """The outcome kept under ``key`` for ``owner``; None when expired, forgotten, never
        kept here, or kept for another session."""
        with self._lock:
            self._forget_expired()
            found = self._found.get(key)
        if found is None or not _same(found[1], owner):
            return None
        return found[2]

    def _forget_expired(self) -> None:
        now = self.clock()
        while self._found:
            oldest = next(iter(self._found.values()))
            if oldest[0] > now:
                break
            self._found.popitem(last=False)


def _same(kept: str | None, asked: str | None) -> bool:
    if kept is None or asked is None:
        return kept is asked
    return secrets.compare_digest(kept, asked)
