"""When the beat's next look is due: the engine says how long it may sleep, and Celery's
``max_interval`` may end a wait before that. A tick that comes before the instant only waits
the rest of it, without asking the store again."""

from __future__ import annotations

import time
from collections.abc import Callable


class Pace:
    """The monotonic instant of the engine's next tick."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._mono = monotonic
        self._next = 0.0  # the first tick looks at once

    def planned(self, seconds: float) -> None:
        """The engine asked to sleep ``seconds`` (0: look again at once)."""
        self._next = self._mono() + max(0.0, seconds)

    def due(self) -> bool:
        """Whether the engine's tick is due now."""
        return self._mono() >= self._next

    def left(self) -> float:
        """Seconds until the engine's next tick (0.0: due)."""
        return max(0.0, self._next - self._mono())
