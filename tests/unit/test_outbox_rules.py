"""When a failed delivery is tried again: doubling from the first wait, capped."""

from __future__ import annotations

from datetime import timedelta

from goatbeat_celery.core.rules.outbox import retry_delay

FIRST, MOST = timedelta(seconds=1), timedelta(minutes=5)


def test_the_wait_doubles_from_the_first_up_to_the_most() -> None:
    waits = [retry_delay(n, first=FIRST, most=MOST).total_seconds() for n in range(1, 12)]
    assert waits == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]


def test_a_huge_attempt_count_stays_at_the_most() -> None:
    assert retry_delay(10_000, first=FIRST, most=MOST) == MOST
    assert retry_delay(0, first=FIRST, most=MOST) == FIRST
    assert retry_delay(1, first=timedelta(minutes=10), most=MOST) == MOST
