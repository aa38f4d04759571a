"""Quiet wakes: the leader waits on the store, and a wake that heard nothing asks only what waits.

On a store that wakes the leader on every change it must act on (PostgreSQL's NOTIFY), a wake
with no news need not read everything: the store's one-round-trip answer of what waits
(:class:`~goatbeat_celery.core.types.claims.Waiting`) says whether a full look would find work.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from goatbeat_celery.core.loop.leadership import STORE_RETRY
from goatbeat_celery.core.loop.looks import LookLedger, due_by
from goatbeat_celery.core.loop.store_clock import StoreClock
from goatbeat_celery.core.protocols import ScheduleStore
from goatbeat_celery.core.types.claims import Waiting

logger = logging.getLogger(__name__)


class QuietWakes:
    """The leader's waits on the store, and what a wake with no news may skip.

    Contract:

    * :meth:`wait` sleeps up to ``seconds`` on the store and returns True when a change was
      heard; the ledger then hears it and ``on_heard`` is called. It never raises: a failing
      wait is logged and slept out (at most ``STORE_RETRY``), and counts as nothing heard.
    * :meth:`may_start_quiet` is True only on a store that wakes the leader on every change,
      when nothing was heard since a full look made under ``token``. The answer covers all a
      full look reads, so a row written by hand without notifying is found at the next wake
      too. A wake for a due schedule starts from it as well: the look then reads the ends to
      settle and the claims to resend only when the answer says some wait (each a read or a
      transaction before the first claim: a third of a lone occurrence's lateness).
    * :meth:`ask` makes one round trip for what waits, and records its clock and next due
      instant; :func:`nothing_waits` says whether that answer leaves nothing to look at.
    """

    def __init__(self, *, store: ScheduleStore, looks: LookLedger, clock: StoreClock,
                 on_heard: Callable[[], None]) -> None:
        self.store = store
        self.looks = looks
        self.clock = clock
        self._on_heard = on_heard

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking early on a store notification (edit, release)."""
        if seconds <= 0:
            return False
        try:
            woken = self.store.wait(seconds)
        except Exception as exc:  # a StoreError, or anything else: never end the loop here
            logger.warning("store wait failed: %s", exc, extra={"action": "store_error"})
            time.sleep(min(seconds, STORE_RETRY))
            return False
        if woken:
            self.looks.heard()
            self._on_heard()
        return woken

    def may_start_quiet(self, token: int | None) -> bool:
        return self.store.wakes_on_every_change and self.looks.unchanged_under(token)

    def ask(self) -> Waiting:
        """The store's answer to what waits (one round trip at most: PostgreSQL's renewal
        brings it along)."""
        waiting = self.store.waiting()
        self.clock.read(waiting.now)
        self.looks.next_due_at = waiting.next_due_at
        return waiting


def nothing_waits(waiting: Waiting) -> bool:
    """Whether ``waiting`` leaves a full look nothing to do: no run due, no end to settle, no
    claim to send, no active backfill."""
    return not (waiting.unsettled or waiting.claimed or waiting.backfills
                or due_by(waiting.next_due_at, waiting.now))
