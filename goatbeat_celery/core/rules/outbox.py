"""Rules of outbox delivery: when a failed delivery is tried again."""

from __future__ import annotations

from datetime import timedelta


def retry_delay(attempts: int, *, first: timedelta, most: timedelta) -> timedelta:
    """How long to wait before the next attempt after ``attempts`` failed ones: ``first``,
    doubling each time, never more than ``most``."""
    if attempts <= 1:
        return min(first, most)
    # Past 2**32 times ``first`` any ``most`` a setting allows is reached: stop doubling there.
    factor = 1 << min(attempts - 1, 32)
    return min(first * factor, most)
