"""The leader's record of its full looks (core.loop.looks) and the store's clock as last read
(core.loop.store_clock): what lets a wake with no news skip reading everything."""

from __future__ import annotations

from datetime import timedelta

from goatbeat_celery.core.loop.looks import TIMER_SLACK, LookLedger, due_by
from goatbeat_celery.core.loop.store_clock import StoreClock
from goatbeat_celery.testing import ManualClock

T0 = ManualClock.DEFAULT_START


def test_a_new_ledger_has_heard_of_changes_and_vouches_for_no_grant() -> None:
    looks = LookLedger()
    assert looks.changes_heard and looks.looks_begun == 0
    assert not looks.unchanged_under(1) and not looks.unchanged_under(None)


def test_a_finished_look_vouches_for_its_grant_alone_until_a_change_is_heard() -> None:
    looks = LookLedger()
    looks.begin()
    looks.finished(7, T0)
    assert looks.unchanged_under(7) and looks.next_due_at == T0 and looks.looks_begun == 1
    assert not looks.unchanged_under(8) and not looks.unchanged_under(None)
    looks.heard()
    assert not looks.unchanged_under(7)


def test_a_change_heard_during_a_look_calls_for_the_next_one() -> None:
    looks = LookLedger()
    looks.begin()
    looks.heard()
    looks.finished(7, None)
    assert not looks.unchanged_under(7)
    looks.begin()
    looks.finished(7, None)
    assert looks.unchanged_under(7) and looks.looks_begun == 2


def test_a_look_without_a_grant_keeps_the_token_of_the_last_one() -> None:
    looks = LookLedger()
    looks.begin()
    looks.finished(7, None)
    looks.begin()
    looks.finished(None, T0)
    assert looks.looked_under_token == 7 and looks.next_due_at == T0


def test_a_run_is_due_at_its_instant_or_within_the_slack_before_it() -> None:
    assert not due_by(None, T0)
    assert due_by(T0, T0) and due_by(T0 - timedelta(hours=1), T0)
    assert due_by(T0 + timedelta(seconds=TIMER_SLACK), T0)
    assert not due_by(T0 + timedelta(seconds=TIMER_SLACK + 0.001), T0)


def test_the_store_clock_moves_on_with_local_time_from_its_last_reading() -> None:
    mono = [100.0]
    clock = StoreClock(lambda: mono[0])
    assert clock.now() is None and clock.spent_since(T0) == 0.0
    assert clock.read(T0) == T0
    mono[0] += 2.5
    assert clock.now() == T0 + timedelta(seconds=2.5)
    assert clock.spent_since(T0) == 2.5
    # Only the last instant read has time spent since it.
    assert clock.spent_since(T0 - timedelta(seconds=1)) == 0.0
    clock.read(T0 + timedelta(seconds=10))
    assert clock.now() == T0 + timedelta(seconds=10) and clock.spent_since(T0) == 0.0
