"""The run policies on the command line: add and edit set them, show and --json print them, and
a schedule that paused itself shows why until it is resumed."""

from __future__ import annotations

from datetime import timedelta

from goatbeat_celery.core.rules.policies import OverlapPolicy, ScheduleMode
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome
from goatbeat_celery.core.types.claims import PlannedClaim
from goatbeat_celery.core.types.settlement import RunSettlement
from goatbeat_celery.store import Store

from .conftest import Cli, field_lines


def test_add_stores_every_run_policy_and_shows_it(cli: Cli, store: Store) -> None:
    shown = cli.json("add", "poll", "feeds.poll", "--every", "30", "--overlap", "skip",
                     "--fixed-delay", "--failure-backoff", "30s", "--failure-backoff-factor",
                     "3", "--failure-backoff-max", "10m", "--pause-after-failures", "5")
    spec = store.get_schedule("poll").spec
    assert (spec.overlap, spec.mode) == (OverlapPolicy.SKIP, ScheduleMode.FIXED_DELAY)
    assert (spec.failure_backoff, spec.failure_backoff_factor, spec.failure_backoff_max,
            spec.pause_after_failures) == (timedelta(seconds=30), 3.0,
                                           timedelta(minutes=10), 5)
    assert {key: shown[key] for key in ("overlap", "effective_overlap", "mode",
                                        "failure_backoff", "failure_backoff_factor",
                                        "failure_backoff_max", "pause_after_failures")} == {
        "overlap": "skip", "effective_overlap": "skip", "mode": "fixed_delay",
        "failure_backoff": 30.0, "failure_backoff_factor": 3.0, "failure_backoff_max": 600.0,
        "pause_after_failures": 5}
    lines = field_lines(cli.ok("show", "poll").output)
    assert lines["overlap"] == "skip"
    assert lines["mode"] == "fixed delay (30s after each run)"
    assert lines["failure backoff"] == "30s × 3 per failure, at most 10m"
    assert lines["pause after"] == "5 failed runs in a row"


def test_edit_turns_policies_back_to_their_defaults(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "30", "--overlap", "buffer_one",
           "--fixed-delay", "--failure-backoff", "30s", "--failure-backoff-max", "5m",
           "--pause-after-failures", "5")
    cli.ok("edit", "poll", "--overlap", "default", "--fixed-rate", "--failure-backoff", "0",
           "--pause-after-failures", "0")
    spec = store.get_schedule("poll").spec
    assert (spec.overlap, spec.mode, spec.failure_backoff, spec.failure_backoff_max,
            spec.pause_after_failures) == (None, ScheduleMode.FIXED_RATE, None, None, None)


def test_fixed_delay_on_a_cron_schedule_is_refused(cli: Cli) -> None:
    result = cli("add", "nightly", "feeds.poll", "--cron", "0 3 * * *", "--fixed-delay")
    assert result.exit_code != 0
    assert ("--fixed-delay: fixed_delay needs an interval schedule (--every = the delay), not "
            "a cron one") in result.output


def test_a_schedule_that_paused_itself_shows_why_until_resumed(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "30", "--pause-after-failures", "2")
    _pause_as_the_leader(store, "poll", "paused after 2 failed runs in a row")
    lines = field_lines(cli.ok("show", "poll").output)
    assert lines["paused because"] == "paused after 2 failed runs in a row"
    assert cli.json("show", "poll")["paused_reason"] == "paused after 2 failed runs in a row"
    cli.ok("resume", "poll")
    resumed = store.get_schedule("poll")
    assert resumed.spec.enabled and resumed.paused_reason is None


def _pause_as_the_leader(store: Store, name: str, reason: str) -> None:
    """Record a self-pause the way the leader does: a settled end of a run of ``name``."""
    grant = store.acquire("default", "test", timedelta(seconds=60))
    assert grant is not None
    schedule = store.get_schedule(name)
    point = store.now() - timedelta(seconds=1)
    (run,) = store.claim([PlannedClaim(
        schedule_name=name, version=schedule.row_version, occurrences=((point, point),), missed=0,
        next_occurrence_at=None, next_run_at=None, settle=True)], lease=grant).dispatches
    store.record_runs([RunEvent.finished(run.key, run=None, worker="w", age=timedelta(0),
                                         outcome=RunOutcome.FAILED)])
    schedule = store.get_schedule(name)
    store.settle_runs([RunSettlement(key=run.key, schedule_name=name, version=schedule.row_version,
                                     consecutive_failures=2, paused_reason=reason)],
                      lease=grant)


def test_check_warns_about_a_policy_that_needs_run_tracking(cli: Cli) -> None:
    cli.configure(beat_schedule={"poll": {"task": "feeds.poll", "schedule": 60,
                                          "goatbeat": {"overlap": "skip"}}})
    result = cli("check")
    assert "schedule 'poll' uses overlap skip, which needs run tracking on the workers" \
        in result.output
