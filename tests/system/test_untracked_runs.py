"""Runs where the workers do not track runs, with real processes: ``celery beat -S
goatbeat_celery.Scheduler`` and a ``celery worker`` of the system tests' app (``sysproj``, which
never calls ``track_runs``), PostgreSQL and Redis.

The worker runs every task, and nothing tells beat so: past the start timeout each run's outcome
is unknown, never lost, and beat warns about none of them. Timing bounds are derived from the
settings below.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from tests.support.waiting import wait_for
from tests.system.harness import Cluster

pytestmark = [pytest.mark.system, pytest.mark.slow]

HEARTBEAT = 1.0
START_TIMEOUT = 4.0
MAX_INTERVAL = 1.0
SETTINGS = {"lease_ttl": 3, "lease_renew_interval": 1, "max_interval": MAX_INTERVAL,
            "heartbeat_interval": HEARTBEAT, "run_lost_after": 3 * HEARTBEAT,
            "run_start_timeout": START_TIMEOUT}
EVERY = 2
#: Beat elects itself, syncs the schedule and the worker connects: seconds on a quiet machine,
#: more on a busy two-core one that also runs PostgreSQL and Redis.
STARTUP = 30.0
#: A run no worker reported on ends once the start timeout has passed since it was sent, at
#: the leader's next look (every heartbeat interval, from a tick at least every max_interval).
ENDED_BOUND = START_TIMEOUT + HEARTBEAT + MAX_INTERVAL
#: For a busy two-core machine: the look's statement, and a tick woken late.
MARGIN = 3.0


def test_without_tracking_runs_the_worker_completed_are_unknown_never_lost(
        cluster: Cluster) -> None:
    cluster.write_config(schedules={"tick": {"every": EVERY}}, settings=SETTINGS)
    worker = cluster.start_worker()
    beat = cluster.start_beat("beat")
    cluster.wait_for_leader()

    # The worker visibly ran them: each appended its task id (the key) to the record list.
    done = wait_for(lambda: cluster.records()[:2] if len(cluster.records()) >= 2 else None,
                    timeout=STARTUP, what="two runs completed by the worker")
    keys = [record["id"] for record in done]

    def sent_at(key: str) -> Any:
        (row,) = cluster.sql("SELECT submitted_at FROM goatbeat_execution WHERE key = :key",
                             key=key)
        return row["submitted_at"]

    def both_sent() -> Any:
        sent = [sent_at(key) for key in keys]
        return None if None in sent else max(sent)

    # Beat records a message as submitted once the broker took it, and a worker may run it
    # before that write commits (ci22: the second run, a few milliseconds apart).
    last_sent = wait_for(both_sent, timeout=MARGIN, what="the two runs recorded as submitted")
    left = (last_sent + timedelta(seconds=ENDED_BOUND) - cluster.db_now()).total_seconds()

    def unknown() -> list[dict[str, Any]] | None:
        rows = cluster.sql("SELECT key, run_state, run_error FROM goatbeat_execution "
                           "WHERE key = ANY(:keys)", keys=list(keys))
        return rows if all(row["run_state"] == "unknown" for row in rows) else None

    rows = wait_for(unknown, timeout=max(left, 0) + MARGIN,
                    what="the completed runs' outcome given up as unknown")
    assert worker.alive() and beat.alive(), cluster.logs()
    assert {row["run_error"] for row in rows} == {
        "workers do not track runs (goatbeat_track_runs is off)"}

    # Runs went on being sent past the start timeout; none is lost, and nothing warned.
    states = cluster.sql("SELECT run_state, count(*) AS n FROM goatbeat_execution "
                         "GROUP BY run_state")
    assert {row["run_state"] for row in states} <= {None, "unknown"}, states
    log = beat.log()
    assert "never started" not in log and "runs lost" not in log, log[-3000:]
    assert "run_lost" not in log

    # The history shows the outcome as unknown, in its table and in JSON.
    # --wide: the 100-column table shows each run by its due instant, not its key.
    history = cluster.goatbeat("history", "tick", "--limit", "100", "--wide")
    shown = [line for line in history.splitlines() if keys[0] in line]
    assert len(shown) == 1 and " unknown " in shown[0] + " ", history
    entries = {e["key"]: e for e in json.loads(
        cluster.goatbeat("history", "tick", "--limit", "100", "--json"))}
    assert entries[keys[0]]["run_state"] == "unknown"

    # The check says why, and passes.
    check = cluster.goatbeat("check")
    assert "goatbeat_track_runs is off" in check and "all checks passed" in check, check


