"""Run tracking with real processes: ``celery beat -S goatbeat_celery.Scheduler``, ``celery
worker`` (prefork and threads pools) with ``track_runs``, PostgreSQL and Redis.

What a run did is read from the run columns of the executions table; what the task itself saw
(when it started, in which process) from the Redis list it appends to. Timing bounds are derived
from the tracking settings below.
"""

from __future__ import annotations

import os
import signal
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa

from tests.support.tracked_app import (
    FAST_LEASE,
    HEARTBEAT,
    LOST_AFTER,
    LOST_BOUND,
    LOST_MARGIN,
    TRACKING,
    request_run,
    runs,
    start_beat,
    start_worker,
)
from tests.support.waiting import wait_for
from tests.system.harness import Cluster
from tests.system.services import PartitionProxy

pytestmark = [pytest.mark.system, pytest.mark.slow]


#: A run's reports reach the table within the writer's flush interval (0.25 s) of the event;
#: two seconds leave the rest to a busy two-core machine running beat, a worker and PostgreSQL.
REPORT_SLACK = 2.0


def pools() -> Any:
    return pytest.mark.parametrize("pool", ["prefork", "threads"])


def write_config(cluster: Cluster, schedules: dict[str, Any]) -> None:
    """The scenario's schedules, a short lease and the tracking settings above (read by beat
    and the workers alike, from the same app module)."""
    cluster.write_config(schedules=schedules, settings={**FAST_LEASE, **TRACKING})


def worker_name(cluster: Cluster, name: str = "worker") -> str:
    import socket

    return f"{name}-{cluster.run_id}@{socket.gethostname()}"


# -- 1. what is recorded ---------------------------------------------------------------------
@pools()
def test_runs_are_recorded_started_and_finished_with_worker_runtime_and_error(
        cluster: Cluster, pool: str) -> None:
    write_config(cluster, {
        "ok": {"every": 1, "task": "trackproj.work", "args": ["ok", 0.3]},
        "bad": {"every": 1, "task": "trackproj.work", "args": ["bad", 0, True]},
    })
    start_worker(cluster, pool)
    start_beat(cluster)

    def finished() -> list[dict[str, Any]] | None:
        rows = runs(cluster, "run_state IN ('succeeded', 'failed')")
        by = {name: [r for r in rows if r["schedule_name"] == name] for name in ("ok", "bad")}
        return rows if all(len(found) >= 3 for found in by.values()) else None

    rows = wait_for(finished, timeout=30, what="three finished runs of each schedule")

    worker = worker_name(cluster)
    for row in rows:
        assert row["worker"] == worker, row
        assert row["run_attempts"] == 1 and row["run_id"], row
        assert row["state"] == "submitted", row  # beat's column, untouched by the worker
        assert row["claimed_at"] - timedelta(seconds=0.5) <= row["started_at"], row
        assert row["started_at"] <= row["finished_at"] <= cluster.db_now(), row
        elapsed = (row["finished_at"] - row["started_at"]).total_seconds()
        # Both instants are the database's now() minus an age measured by the worker: they
        # differ from the runtime by the write latencies only.
        assert abs(elapsed - row["runtime"]) < 0.5, row
        if row["schedule_name"] == "ok":
            assert (row["run_state"], row["run_error"]) == ("succeeded", None), row
            assert 0.3 <= row["runtime"] < 0.3 + REPORT_SLACK, row
        else:
            assert (row["run_state"], row["run_error"]) == ("failed", "ValueError: boom"), row


# -- 2. a worker killed mid-run ----------------------------------------------------------------
@pools()
def test_a_run_whose_worker_is_killed_is_marked_lost_within_the_documented_bound(
        cluster: Cluster, pool: str, report: Any) -> None:
    write_config(cluster, {
        "long": {"every": 3600, "task": "trackproj.work", "args": ["long", 600]},
    })
    worker = start_worker(cluster, pool)
    start_beat(cluster)
    key = request_run(cluster, "long")

    def beating() -> dict[str, Any] | None:
        (row,) = runs(cluster, "key = :key", key=key)
        return row if row["run_state"] == "running" and row["heartbeat_at"] > \
            row["started_at"] + timedelta(seconds=HEARTBEAT / 2) else None

    # Started within REPORT_SLACK of its submission, then a heartbeat an interval later.
    running = wait_for(beating, timeout=REPORT_SLACK + 2 * HEARTBEAT + 5,
                       what="the run to be running with heartbeats")

    killed_at = cluster.db_now()
    worker.kill_tree()

    def lost() -> dict[str, Any] | None:
        (row,) = runs(cluster, "key = :key", key=key)
        return row if row["run_state"] == "lost" else None

    # The leader (beat) marks it: nothing else looks for lost runs here.
    row = wait_for(lost, timeout=LOST_BOUND + LOST_MARGIN, what="the run marked lost",
                   interval=0.1)

    took = (row["finished_at"] - killed_at).total_seconds()
    report(pool=pool, lost_after_kill=f"{took:.2f}s", bound=f"{LOST_BOUND:.1f}s")
    assert row["run_error"] == f"worker silent for {LOST_AFTER:g}s"
    assert row["worker"] == running["worker"] and row["run_id"] == running["run_id"]
    # Not before the worker had been silent for lost_after: its last heartbeat came at most an
    # interval before the kill.
    assert took >= LOST_AFTER - HEARTBEAT - 0.5
    assert took <= LOST_BOUND + LOST_MARGIN


#: Celery's ``worker_lost_wait`` (its default): how long a worker's main process waits for the
#: result of a pool process that died before it reports WorkerLostError.
WORKER_LOST_WAIT = 10.0


def test_a_pool_process_killed_mid_run_is_reported_failed_by_the_workers_main_process(
        cluster: Cluster, report: Any) -> None:
    write_config(cluster, {
        "long": {"every": 3600, "task": "trackproj.work", "args": ["long", 600]},
    })
    start_worker(cluster, "prefork")
    start_beat(cluster)
    key = request_run(cluster, "long")
    pid = wait_for(lambda: cluster.redis.hget(f"{cluster.record_key}:pids", key),
                   timeout=REPORT_SLACK + 5, what="the run to start in a pool process")
    wait_for(lambda: runs(cluster, "key = :key AND run_state = 'running'", key=key),
             timeout=REPORT_SLACK, what="the run recorded running")

    killed_at = cluster.db_now()
    os.kill(int(pid), signal.SIGKILL)

    # The worker's main process reports the run failed once Celery gives up on the pool
    # process (worker_lost_wait, after billiard noticed its exit, which it checks every
    # second); the leader may have marked it lost meanwhile, which the report replaces.
    (row,) = wait_for(lambda: runs(cluster, "key = :key AND run_state = 'failed'", key=key),
                      timeout=WORKER_LOST_WAIT + 1 + REPORT_SLACK + LOST_MARGIN,
                      what="the run reported failed")
    took = (row["finished_at"] - killed_at).total_seconds()
    report(failed_after_kill=f"{took:.2f}s")
    assert row["run_error"].startswith("WorkerLostError"), row
    assert row["run_attempts"] == 1


# -- 3. the database out of reach -------------------------------------------------------------
OUTAGE = 10.0
#: How late a task may start once the worker runs tasks: beat sends within about a second of
#: the due instant (max_interval 1 s) and an idle worker starts it within milliseconds; the
#: rest is a busy two-core machine. A task thread that waited on the database would start the
#: tasks behind it seconds later, the outage's length.
START_BOUND = 2.5


@pools()
def test_a_database_out_of_reach_for_ten_seconds_neither_fails_nor_delays_a_task(
        cluster: Cluster, pool: str, report: Any) -> None:
    direct = sa.make_url(cluster.database_url)
    assert direct.port is not None
    proxy = PartitionProxy(direct.port, direct.host or "127.0.0.1")
    proxied = direct.set(port=proxy.port).render_as_string(hide_password=False)
    try:
        write_config(cluster, {
            f"q{index}": {"every": 1, "task": "trackproj.work", "args": [f"q{index}", 0.05],
                          "goatbeat": {"misfire_policy": "all"}}
            for index in range(3)
        })
        # The worker reaches PostgreSQL through the proxy; beat directly, and keeps sending.
        start_worker(cluster, pool, concurrency=2, env={"SYS_DATABASE_URL": proxied})
        start_beat(cluster)
        wait_for(lambda: runs(cluster, "run_state = 'succeeded'"), timeout=30,
                 what="a first recorded run")
        time.sleep(2)  # the scenario: a few seconds of normal running first

        cut_at = proxy.cut()
        time.sleep(OUTAGE)  # the scenario: ten seconds without the database
        # The cut holds: what ran meanwhile is not in the table yet (beat, on its own
        # connection, went on sending).
        unwritten = runs(cluster, "due_at >= :start AND due_at < :end",
                         start=datetime.fromtimestamp(cut_at + 1, timezone.utc),
                         end=cluster.db_now() - timedelta(seconds=1))
        proxy.heal()
        healed_at = time.time()
        end = cluster.db_now()

        def recorded() -> list[dict[str, Any]] | None:
            rows = runs(cluster, "due_at <= :end", end=end - timedelta(seconds=1))
            return rows if all(r["run_state"] == "succeeded" for r in rows) else None

        # After healing, the held statement completes and the rest follow within a backoff
        # (5 s at most) and a statement timeout (5 s); the margin is for a busy machine.
        rows = wait_for(recorded, timeout=5 + 5 + 10, what="every run recorded succeeded")
        recovered = time.time() - healed_at
    finally:
        proxy.close()

    records = {r["id"]: r for r in cluster.records()}
    during = [row for row in rows
              if cut_at <= row["due_at"].timestamp() <= cut_at + OUTAGE]
    assert len(during) >= 3 * (OUTAGE - 2), "tasks were sent during the outage"
    assert len(unwritten) >= 3 * (OUTAGE - 3)
    assert {row["run_state"] for row in unwritten} <= {None, "lost"}, unwritten
    assert all(row["key"] in records for row in rows), "every run reached its task"
    # Runs due before the worker ran its first task waited for the worker to start, not for
    # anything this test is about.
    ready_at = min(record["received_at"] for record in records.values())
    # (how late the task started, of which beat's claim, the run) for each run
    late = [(records[row["key"]]["received_at"] - row["due_at"].timestamp(),
             (row["claimed_at"] - row["due_at"]).total_seconds(), row["key"])
            for row in rows if row["due_at"].timestamp() >= ready_at]
    worst = max(lateness for lateness, _, _ in late)
    worst_during = max(records[row["key"]]["received_at"] - row["due_at"].timestamp()
                       for row in during)
    report(pool=pool, runs=len(rows), during_outage=len(during),
           worst_start=f"{worst:.2f}s", worst_start_during=f"{worst_during:.2f}s",
           worst_claim=f"{max(claim for _, claim, _ in late):.2f}s",
           worst_run=max(late)[2],
           recorded_after_heal=f"{recovered:.1f}s")
    assert worst < START_BOUND, sorted(late)[-5:]
    assert all(row["run_attempts"] == 1 for row in rows)
