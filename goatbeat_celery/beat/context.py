"""Celery's context around a send: the beat's app is ``current_app`` on the sending thread.

Celery keeps its current app per thread (``app.set_current()``); a thread that never set it sees
the process's default app, which under a plain ``celery -A proj beat`` is Celery's fallback
``default`` app. Code that runs inside a publish (``before_task_publish`` handlers, ddtrace,
OpenTelemetry) looks the task up in ``current_app``'s registry, so goatbeat's sending thread
makes the beat's app current for the time of a batch, as Celery's beat has it on its own thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from celery import _state


@contextlib.contextmanager
def app_current(app: Any) -> Iterator[None]:
    """Make ``app`` Celery's current app on this thread for the block, then put back what this
    thread had (nothing, on a fresh thread: its default again)."""
    previous = _state._tls.current_app
    app.set_current()
    try:
        yield
    finally:
        _state._set_current_app(previous)
