"""Waiting on a condition another thread or process makes true, bounded by a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], what: str, *, timeout: float, interval: float = 0.05,
             tick: Callable[[], Any] | None = None) -> T:
    """Call ``condition`` until it returns something truthy, and return that.

    Between calls, ``tick`` is called when given (a scheduler driven by the test, which does
    the work waited for), else the thread sleeps ``interval`` seconds. Once ``timeout``
    seconds have passed without a truthy value, raises ``AssertionError`` naming ``what``.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        if tick is not None:
            tick()
        else:
            time.sleep(interval)
