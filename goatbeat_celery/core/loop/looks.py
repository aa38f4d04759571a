"""What the leader's last full look at the store found, and whether a change was heard since.

A full look reads everything a leader acts on (ends to settle, claims to send, due schedules,
backfills). :class:`LookLedger` is what the loop remembers of the last one, so that a wake with
no news may start from the store's short answer of what waits
(:mod:`~goatbeat_celery.core.loop.quiet_wakes`).
"""

from __future__ import annotations

from datetime import datetime

#: A periodic look (pruning, lost runs) or a run due this soon is taken with the wake at hand
#: rather than with a wake of its own a moment later.
TIMER_SLACK = 0.5


def due_by(next_due_at: datetime | None, now: datetime) -> bool:
    """Whether a run known to be due at ``next_due_at`` is due at ``now``, or so nearly that
    this wake should take it."""
    return next_due_at is not None and (next_due_at - now).total_seconds() <= TIMER_SLACK


class LookLedger:
    """The leader's record of its full looks.

    Contract:

    * ``changes_heard`` is True at first (nothing was looked at) and after :meth:`heard`;
      :meth:`begin` clears it, so that what is heard during a look calls for the next one.
    * ``looks_begun`` counts :meth:`begin` calls: an alert cycle begun after a look's claims
      has seen them all (:mod:`~goatbeat_celery.core.loop.alerts`).
    * :meth:`finished` records the fencing token the look was made under
      (``looked_under_token``) and ``next_due_at``, the earliest due instant known, which a
      quiet wake's answer also updates.
    * :meth:`unchanged_under` is True only when nothing was heard since a look made under
      ``token``.
    """

    def __init__(self) -> None:
        self.changes_heard = True
        self.looked_under_token: int | None = None
        self.next_due_at: datetime | None = None
        self.looks_begun = 0

    def heard(self) -> None:
        """A change was heard (or made) that the next wake must look at in full."""
        self.changes_heard = True

    def begin(self) -> None:
        self.changes_heard = False
        self.looks_begun += 1

    def finished(self, token: int | None, next_due_at: datetime | None) -> None:
        if token is not None:
            self.looked_under_token = token
        self.next_due_at = next_due_at

    def unchanged_under(self, token: int | None) -> bool:
        return (not self.changes_heard and token is not None
                and self.looked_under_token == token)
