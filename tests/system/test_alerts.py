"""Alerts with real processes: ``celery beat -S goatbeat_celery.Scheduler`` replicas, a
``celery worker`` tracking runs, PostgreSQL and Redis.

What was raised is read from ``goatbeat_alert``, the alert signals beat sent (``trackproj``
appends each to a Redis list) and beat's log lines. Bounds are derived from the settings below.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.support.tracked_app import FAST_LEASE, request_run, start, start_worker
from tests.support.waiting import wait_for
from tests.system.harness import Cluster, Process

pytestmark = [pytest.mark.system, pytest.mark.slow]

HEARTBEAT = 1.0
START_TIMEOUT = 3.0  # a run no worker started is lost this long after it was sent
SILENT = 6.0  # the silent window of the scenario's schedule
ALERT_INTERVAL = 1.0
SETTINGS = {**FAST_LEASE, "heartbeat_interval": HEARTBEAT, "run_lost_after": 4,
            "run_start_timeout": START_TIMEOUT, "run_resends": 0,
            "alert_interval": ALERT_INTERVAL}
#: The lease's ttl and renew interval: a standby takes over within ttl + renew of a leader
#: killed, and judges alerts in the tick that follows.
TAKEOVER = FAST_LEASE["lease_ttl"] + FAST_LEASE["lease_renew_interval"]
#: For a busy two-core machine running two beats, a worker and PostgreSQL: a tick woken late,
#: a report written late, a look that waits for the next interval.
MARGIN = 5.0
#: A run sent to no worker is lost after the start timeout, at the leader's next look for lost
#: runs (every heartbeat interval), and the alert follows at the next alert look.
LOST_BOUND = 2 + START_TIMEOUT + HEARTBEAT + ALERT_INTERVAL + MARGIN


def alerts(cluster: Cluster, where: str = "true", **params: Any) -> list[dict[str, Any]]:
    return cluster.sql("SELECT id, schedule_name, rule, state, count, key, reason, first_at, "
                       f"last_at, resolved_at FROM goatbeat_alert WHERE {where} ORDER BY id",
                       **params)


def signalled(cluster: Cluster) -> list[dict[str, Any]]:
    return [json.loads(item)
            for item in cluster.redis.lrange(f"{cluster.record_key}:alerts", 0, -1)]


def opened_lines(beats: list[Process], rule: str) -> int:
    """The ``alert_opened`` log lines of ``rule`` across the replicas' logs."""
    return sum(beat.log().count(f"alert {rule} raised on schedule") for beat in beats)


def start_beat(cluster: Cluster, name: str) -> Process:
    return start(cluster, name, ["beat", "-S", "goatbeat_celery.Scheduler", "--loglevel", "INFO",
                                 "-s", str(cluster.workdir / f"{name}.schedule")])


def test_a_stopped_worker_raises_lost_and_silent_once_across_a_failover(
        cluster: Cluster, report: Any) -> None:
    cluster.write_config(settings=SETTINGS, schedules={
        "quiet": {"every": 1, "task": "trackproj.work", "args": ["quiet", 0],
                  "goatbeat": {"alert_silent": SILENT}}})
    worker = start_worker(cluster, "threads")
    # Beat starts once the worker consumes: a run sent before then waits for the worker's
    # start, and on a busy machine that took past the start timeout, so a lost alert was
    # raised (and resolved by the first success) before the worker was ever stopped.
    wait_for(lambda: " ready." in worker.log(), timeout=60, what="the worker to consume")
    beats = [start_beat(cluster, "beat-a"), start_beat(cluster, "beat-b")]
    try:
        wait_for(lambda: cluster.sql("SELECT 1 FROM goatbeat_execution WHERE run_state = "
                                     "'succeeded' LIMIT 1"),
                 timeout=30, what="a run succeeded")
        worker.kill_tree()
        stopped_at = cluster.db_now()

        # lost: raised by the leader once the runs sent since find no worker.
        (lost,) = wait_for(lambda: alerts(cluster, "rule = 'lost'") or None,
                           timeout=LOST_BOUND, what="the lost alert", interval=0.2)
        raised_after = (lost["first_at"] - stopped_at).total_seconds()

        # The leader dies in the middle; the standby takes over and goes on judging.
        leader = cluster.wait_for_leader()
        leader.kill_tree()
        wait_for(lambda: cluster.leader_pid() not in (None, leader.pid),
                 timeout=TAKEOVER + MARGIN, what="the standby to take over")

        # silent: no success for the window (judged by a leader that watched a whole window).
        (silent,) = wait_for(lambda: alerts(cluster, "rule = 'silent'") or None,
                             timeout=TAKEOVER + SILENT + 2 * MARGIN, what="the silent alert",
                             interval=0.2)
        # The new leader counts the lost runs it judges on the same alert.
        wait_for(lambda: alerts(cluster, "rule = 'lost' AND count > :n",
                                n=lost["count"]) or None,
                 timeout=LOST_BOUND, what="the lost alert counted again", interval=0.2)
    finally:
        cluster.redis.delete(f"{cluster.record_key}:alerts")

    rows = alerts(cluster, "rule IN ('lost', 'silent')")
    # The failover may coalesce occurrences: a missed alert then, resolved by the next run.
    assert {r["rule"] for r in alerts(cluster)} <= {"lost", "silent", "missed"}
    report(lost_after_stop=f"{raised_after:.2f}s", lost_bound=f"{LOST_BOUND:.1f}s",
           silent_after_stop=f"{(silent['first_at'] - stopped_at).total_seconds():.2f}s")
    # Once each: one row per rule, open, whoever led; one opening line across the replicas.
    assert sorted((r["rule"], r["state"]) for r in rows) == [("lost", "open"),
                                                             ("silent", "open")], rows
    assert rows[0]["first_at"] == lost["first_at"]
    assert (opened_lines(beats, "lost"), opened_lines(beats, "silent")) == (1, 1)
    assert silent["reason"].startswith(f"no run succeeded in the last {SILENT:g}s")
    assert raised_after <= LOST_BOUND


def test_a_failing_task_raises_failed_after_n_and_resolves_and_an_overrun_is_raised(
        cluster: Cluster) -> None:
    failing = f"{cluster.record_key}:failing:flaky"
    cluster.redis.set(failing, 1)
    cluster.write_config(settings=SETTINGS, schedules={
        "flaky": {"every": 1, "task": "trackproj.flaky", "args": ["flaky"],
                  "goatbeat": {"alert_failures": 3}},
        "slow": {"every": 3600, "task": "trackproj.work", "args": ["slow", 5],
                 "goatbeat": {"max_runtime": 1.5}}})
    start_worker(cluster, "threads")
    beat = start_beat(cluster, "beat")
    cluster.wait_for_leader()
    try:
        slow = request_run(cluster, "slow")
        # failed: raised once three runs in a row failed.
        (failed,) = wait_for(lambda: alerts(cluster, "rule = 'failed'") or None,
                             timeout=30, what="the failed alert", interval=0.2)
        failed_ends = [row["finished_at"] for row in cluster.sql(
            "SELECT finished_at FROM goatbeat_execution WHERE schedule_name = 'flaky' "
            "AND run_state = 'failed' AND finished_at <= :at ORDER BY finished_at",
            at=failed["first_at"])]
        # overrun: raised while the slow run runs past max_runtime, resolved when it ends.
        (overrun,) = wait_for(lambda: alerts(cluster, "rule = 'overrun'") or None,
                              timeout=15, what="the overrun alert", interval=0.2)
        wait_for(lambda: alerts(cluster, "rule = 'overrun' AND state = 'resolved'") or None,
                 timeout=15, what="the overrun alert resolved", interval=0.2)

        cluster.redis.delete(failing)
        wait_for(lambda: alerts(cluster, "rule = 'failed' AND state = 'resolved'") or None,
                 timeout=15, what="the failed alert resolved", interval=0.2)
        signals = signalled(cluster)
    finally:
        cluster.redis.delete(failing, f"{cluster.record_key}:alerts")

    # The reason counts the streak the alert look read: three, or more when a busy machine
    # let another failure end before that look (one look per alert interval).
    streak = re.match(r"(\d+) runs failed in a row", failed["reason"])
    assert streak is not None, failed
    assert 3 <= int(streak.group(1)) <= len(failed_ends), (failed, failed_ends)
    raised_after = (failed["first_at"] - failed_ends[2]).total_seconds()
    assert raised_after <= ALERT_INTERVAL + MARGIN, (raised_after, failed)
    assert overrun["key"] == slow and "running for" in overrun["reason"], overrun
    (failed_row,) = alerts(cluster, "rule = 'failed'")
    assert failed_row["state"] == "resolved" and failed_row["count"] >= 1
    # Each change was signalled in beat once, in order.
    assert [s["action"] for s in signals if s["rule"] == "overrun"] == ["opened", "resolved"]
    failed_actions = [s["action"] for s in signals if s["rule"] == "failed"]
    assert failed_actions[0] == "opened" and failed_actions[-1] == "resolved"
    assert set(failed_actions[1:-1]) <= {"repeated"}
    assert beat.log().count("alert failed raised on schedule 'flaky'") == 1
    # And each went to the outbox, for webhooks, in the transaction that wrote it.
    events = {row["event_id"] for row in cluster.sql(
        "SELECT event_id FROM goatbeat_outbox WHERE kind LIKE 'alert.%'")}
    assert {f"alert:{failed_row['id']}:open", f"alert:{failed_row['id']}:resolve",
            f"alert:{overrun['id']}:open", f"alert:{overrun['id']}:resolve"} <= events
