"""Waking the waiters of one database in this process, for the stores whose database has no
notification channel of its own (SQLite, MySQL): an edit through any store object of the
process wakes them; other processes' edits are seen at the next tick."""

from __future__ import annotations

import threading


class WakeChannel:
    """A generation counter under a condition: ``notify`` moves it, ``wait`` returns when it
    has moved."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._generation = 0

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a ``notify``; whether one came."""
        with self._changed:
            seen = self._generation
            self._changed.wait_for(lambda: self._generation != seen, timeout=max(0.0, timeout))
            return self._generation != seen

    def notify(self) -> None:
        with self._changed:
            self._generation += 1
            self._changed.notify_all()


_channels: dict[str, WakeChannel] = {}
_channels_lock = threading.Lock()


def wake_channel(key: str) -> WakeChannel:
    """The one channel of the database ``key`` names in this process."""
    with _channels_lock:
        return _channels.setdefault(key, WakeChannel())
