"""Reading ahead of a due instant: the leader reads and plans what falls due a moment before it
does, and at the instant only claims and sends.

A leader that sleeps until a known due instant would otherwise spend, once woken, a round trip
asking what waits, another reading the due rows, and the planning of each, before the claim
that precedes the first message: at a few runs a second, most of their lateness. Woken
:data:`READ_AHEAD` before the instant instead, it reads the rows due by then (the store's
``until``), plans them at the instant, and sleeps again; at the instant it claims them, fenced
and versioned as any claim, and not before the store's clock reaches the instant
(``not_before``). What it read stands only while nothing is heard: an edit, a release or a
run's end announced meanwhile (the store wakes the leader on every change) drops it, and that
wake looks at everything as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from goatbeat_celery.core.loop.claiming import PlannedBatch
from goatbeat_celery.core.types.claims import DueBatch, Waiting

#: How long before a due instant the leader wakes to read and plan it (seconds): more than a
#: due read and the planning of a first batch take on a busy machine. Past it, the claim
#: simply follows at once.
READ_AHEAD = 0.05


@dataclass(frozen=True, kw_only=True)
class ReadAhead:
    """The first batch of a due instant, read and planned ahead of it under lease ``token``:
    ``waiting`` what the wake that read it was told waits (``due_at`` its next due instant),
    ``batch`` as read (its ``now`` the instant it was planned at), ``planned`` its claims and
    set-asides."""

    due_at: datetime
    token: int
    waiting: Waiting
    batch: DueBatch
    planned: PlannedBatch
