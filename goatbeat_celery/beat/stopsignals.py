"""Stop signals held while a tick claims, sends and records: :class:`StopSignals`."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

#: Signals Celery's beat service stops on (it closes the scheduler, then raises SystemExit).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

_Handler = Callable[[int, FrameType | None], Any]


class StopSignals:
    """Holds SIGTERM and SIGINT during :meth:`held` and hands the first one to its handler
    when the block ends; a second one is handed over at once.

    Celery's handler raises SystemExit wherever the main thread is: between sending a batch and
    marking it submitted, it left the batch ``claimed`` and the next leader sent it again (a
    duplicate delivery on a clean stop). A tick lasts milliseconds, and its calls are bounded
    by the store's and the broker's timeouts; a second signal still stops a replica whose call
    never returns (a database behind a connection that swallows traffic).

    The holding handler goes in at the first :meth:`held`, in front of the handler then set
    (Celery's: beat installs it before it builds the scheduler), and stays until
    :meth:`restore`; outside a block it hands each signal over at once. Swapping handlers at
    every tick made six calls into Python's ``signal`` module per wake of an idle leader, each
    turning a handler into an enum by way of an exception. Only the main thread can set
    handlers; elsewhere (or for a signal without a Python handler) nothing is held.
    """

    def __init__(self) -> None:
        self._previous: dict[int, _Handler] = {}
        self._installed = False
        self._holding = False
        self._held: tuple[int, FrameType | None] | None = None
        self._insisted = False

    @property
    def insisted(self) -> bool:
        """True once a stop signal came while another was held: the operator would not wait for
        the tick, so the stop must not wait on the database or the broker either."""
        return self._insisted

    def held(self) -> StopSignals:
        """The block of a ``with`` statement holding the stop signals (this object, which
        enters and leaves it without a generator: it runs at every wake)."""
        return self

    def __enter__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if not self._installed:
            self._install()
        self._holding, self._held = True, None

    def __exit__(self, *exc_info: object) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        self._holding = False
        held, self._held = self._held, None
        if held is not None:
            self._hand_over(*held)

    def restore(self) -> None:
        """Put back the handlers this replaced, where its own is still in place."""
        if not self._installed or threading.current_thread() is not threading.main_thread():
            return
        self._installed = False
        for number, handler in self._previous.items():
            if signal.getsignal(number) == self._handle:
                signal.signal(number, handler)
        self._previous.clear()

    def _install(self) -> None:
        self._installed = True
        for stop in STOP_SIGNALS:
            handler = signal.getsignal(stop)
            if callable(handler):
                self._previous[int(stop)] = handler
                signal.signal(stop, self._handle)

    def _handle(self, number: int, frame: FrameType | None) -> None:
        if self._holding and self._held is None:
            self._held = (number, frame)
            return
        # Outside a block, or a second signal in one: handed over now (and the held one not
        # again when the block ends).
        if self._holding:
            self._insisted = True
        self._held = None
        self._hand_over(number, frame)

    def _hand_over(self, number: int, frame: FrameType | None) -> None:
        self._previous[number](number, frame)
