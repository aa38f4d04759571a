"""The run policies read from configuration (``goatbeat`` options of beat_schedule entries and
``goatbeat_overlap_policy``), checked as the API checks them, and the start-up warning about
policies that need run tracking."""

from __future__ import annotations

from datetime import timedelta

import pytest
from celery.schedules import crontab

from goatbeat_celery.config import load, policy_warnings
from goatbeat_celery.core.rules.policies import OverlapPolicy, ScheduleMode
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.settings import Settings
from tests.celery.support import entry, make_app

TEN_MINUTES = timedelta(minutes=10)


def problems_of(**own: object) -> list[str]:
    with pytest.raises(ConfigurationError) as raised:
        load(make_app(beat_schedule={"poll": entry(**own)}))
    return list(raised.value.problems)


def test_an_entry_gives_every_run_policy_under_its_goatbeat_options() -> None:
    app = make_app(beat_schedule={"poll": entry(
        overlap="skip", mode="fixed_delay", failure_backoff="30s", failure_backoff_factor=3,
        failure_backoff_max=600, pause_after_failures=5)})
    (spec,) = load(app).schedules
    assert spec.overlap is OverlapPolicy.SKIP
    assert spec.mode is ScheduleMode.FIXED_DELAY
    assert (spec.failure_backoff, spec.failure_backoff_factor, spec.failure_backoff_max) == (
        timedelta(seconds=30), 3, timedelta(minutes=10))
    assert spec.pause_after_failures == 5


def test_an_entry_without_policies_keeps_the_defaults_and_its_hash() -> None:
    (spec,) = load(make_app(beat_schedule={"poll": entry()})).schedules
    assert (spec.overlap, spec.mode, spec.failure_backoff, spec.pause_after_failures) == (
        None, ScheduleMode.FIXED_RATE, None, None)
    assert "overlap" not in spec.spec_hash()  # a digest: the policies only count when set


@pytest.mark.parametrize(("own", "problem"), [
    ({"overlap": "sometimes"}, "beat_schedule['poll'].goatbeat.overlap: unknown value"),
    ({"mode": "fixed_delay_please"}, "beat_schedule['poll'].goatbeat.mode: unknown value"),
    ({"failure_backoff": 0}, "beat_schedule['poll'].failure_backoff: must be > 0s"),
    ({"failure_backoff": "soon"}, "beat_schedule['poll'].goatbeat.failure_backoff: cannot read"),
    ({"failure_backoff": 30, "failure_backoff_factor": 0.5},
     "beat_schedule['poll'].failure_backoff_factor: must be a number from 1 to 100"),
    ({"failure_backoff": 30, "failure_backoff_max": 10},
     "beat_schedule['poll'].failure_backoff_max: must not be shorter than failure_backoff"),
    ({"failure_backoff_factor": 3}, "beat_schedule['poll'].failure_backoff: give it too"),
    ({"pause_after_failures": 0},
     "beat_schedule['poll'].pause_after_failures: must be an integer from 1 to"),
    ({"pause_after_failures": True},
     "beat_schedule['poll'].pause_after_failures: must be an integer from 1 to"),
])
def test_a_bad_policy_is_reported_with_the_entry_and_option(own: dict[str, object],
                                                            problem: str) -> None:
    found = problems_of(**own)
    assert len(found) == 1 and found[0].startswith(problem), found


def test_fixed_delay_needs_an_interval_schedule() -> None:
    app = make_app(beat_schedule={"nightly": {
        "task": "proj.tasks.poll", "schedule": crontab(minute=0, hour=3),
        "goatbeat": {"mode": "fixed_delay"}}})
    with pytest.raises(ConfigurationError) as raised:
        load(app)
    assert list(raised.value.problems) == [
        "beat_schedule['nightly'].mode: fixed_delay needs an interval schedule (every = the "
        "delay), not a cron one"]


def test_the_global_overlap_policy_is_a_setting() -> None:
    settings = load(make_app(goatbeat_overlap_policy="buffer_one")).config.settings
    assert settings.overlap_policy is OverlapPolicy.BUFFER_ONE
    with pytest.raises(ConfigurationError) as raised:
        load(make_app(goatbeat_overlap_policy="never"))
    assert raised.value.problems[0].startswith("goatbeat_overlap_policy: unknown value 'never'")


# -- the warning about run tracking ----------------------------------------------------------
def warnings_for(**own: object) -> list[str]:
    loaded = load(make_app(beat_schedule={"poll": entry(**own)}))
    return policy_warnings(loaded.schedules, loaded.config.settings, TEN_MINUTES)


def test_a_skip_schedule_shorter_than_the_start_timeout_is_warned_about() -> None:
    assert warnings_for(overlap="skip") == [
        "schedule 'poll' uses overlap skip, which needs run tracking on the workers "
        "(goatbeat_celery.track_runs): without it each run counts as unfinished until its "
        "outcome is given up as unknown, 600s (goatbeat_run_start_timeout) after it was sent, "
        "and the schedule runs at most that often"]


def test_no_schedule_is_warned_about_where_the_workers_track_runs() -> None:
    loaded = load(make_app(goatbeat_track_runs=True, goatbeat_overlap_policy="buffer_one",
                           beat_schedule={"poll": entry(overlap="skip", mode="fixed_delay")}))
    assert policy_warnings(loaded.schedules, loaded.config.settings, TEN_MINUTES) == []


def test_fixed_delay_and_a_global_buffer_one_are_warned_about() -> None:
    loaded = load(make_app(goatbeat_overlap_policy="buffer_one",
                           beat_schedule={"poll": entry(mode="fixed_delay")}))
    (warning,) = policy_warnings(loaded.schedules, loaded.config.settings, TEN_MINUTES)
    assert "uses overlap buffer_one and fixed delay" in warning


@pytest.mark.parametrize("own", [
    {}, {"overlap": "allow"}, {"failure_backoff": 30, "pause_after_failures": 3},
    {"overlap": "skip", "enabled": False},
])
def test_policies_that_never_wait_for_a_run_are_not_warned_about(
        own: dict[str, object]) -> None:
    assert warnings_for(**own) == []


def test_an_interval_at_least_the_start_timeout_is_not_warned_about() -> None:
    loaded = load(make_app(beat_schedule={"hourly": {
        "task": "proj.tasks.poll", "schedule": 3600, "goatbeat": {"overlap": "skip"}}}))
    assert policy_warnings(loaded.schedules, Settings(), TEN_MINUTES) == []
