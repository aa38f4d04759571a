"""The run policies through the Schedules API, on the memory store: given, changed, turned off,
refused at the door; and resume clearing a pause the schedule gave itself."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.rules.policies import OverlapPolicy, ScheduleMode
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.testing import ManualClock, MemoryStore

NOW = datetime(2026, 1, 5, 12, 0, 30, tzinfo=UTC)
S = timedelta(seconds=1)


@pytest.fixture
def schedules() -> Schedules:
    return Schedules(MemoryStore(clock=ManualClock(NOW)))


def test_create_stores_every_run_policy(schedules: Schedules) -> None:
    created = schedules.create("poll", "proj.tasks.poll", every=60, overlap="buffer_one",
                               mode="fixed_delay", failure_backoff="30s",
                               failure_backoff_factor=3, failure_backoff_max="10m",
                               pause_after_failures=4)
    spec = schedules.get("poll").spec
    assert spec == created.spec
    assert (spec.overlap, spec.mode) == (OverlapPolicy.BUFFER_ONE, ScheduleMode.FIXED_DELAY)
    assert (spec.failure_backoff, spec.failure_backoff_factor, spec.failure_backoff_max,
            spec.pause_after_failures) == (30 * S, 3, 600 * S, 4)


def test_update_changes_a_policy_and_keeps_the_next_run(schedules: Schedules) -> None:
    before = schedules.create("poll", "proj.tasks.poll", every=60)
    after = schedules.update("poll", overlap=OverlapPolicy.SKIP, failure_backoff=10)
    assert (after.spec.overlap, after.spec.failure_backoff) == (OverlapPolicy.SKIP, 10 * S)
    assert after.next_run_at == before.next_run_at


def test_update_turns_policies_off_with_none(schedules: Schedules) -> None:
    schedules.create("poll", "proj.tasks.poll", every=60, overlap="skip", failure_backoff=10,
                     pause_after_failures=2)
    spec = schedules.update("poll", overlap=None, failure_backoff=None,
                            pause_after_failures=None, mode=None).spec
    assert (spec.overlap, spec.failure_backoff, spec.pause_after_failures, spec.mode) == (
        None, None, None, ScheduleMode.FIXED_RATE)


def test_bad_policies_are_all_reported_and_nothing_is_stored(schedules: Schedules) -> None:
    with pytest.raises(ConfigurationError) as raised:
        schedules.create("poll", "proj.tasks.poll", cron="0 3 * * *", overlap="maybe",
                         mode="fixed_delay", failure_backoff_max=10, pause_after_failures=0)
    found = [problem.split(":")[0] for problem in raised.value.problems]
    assert found == ["overlap", "schedule 'poll'", "schedule 'poll'", "schedule 'poll'"]
    assert schedules.list() == []


def test_resume_of_a_schedule_that_paused_itself_clears_the_reason_and_the_count(
        schedules: Schedules) -> None:
    schedules.create("poll", "proj.tasks.poll", every=60, pause_after_failures=2)
    store = schedules.store
    assert isinstance(store, MemoryStore)
    # What the leader's settle pass writes when the schedule pauses itself.
    paused = schedules.pause("poll")
    store._schedules["poll"] = replace(paused, paused_reason="paused after 2 failed runs in "
                                       "a row", consecutive_failures=2)
    resumed = schedules.resume("poll")
    assert resumed.spec.enabled
    assert (resumed.paused_reason, resumed.consecutive_failures) == (None, 0)
