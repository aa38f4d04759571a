"""The tracked app (tests/tracking) in a system scenario: its celery processes, the run-tracking
settings its scenarios share and the bounds derived from them, and the runs it recorded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from goatbeat_celery import ScheduleNotFound
from goatbeat_celery.store import open_store
from tests.support.waiting import wait_for
from tests.system.harness import Cluster, Process

FAST_LEASE = {"lease_ttl": 3, "lease_renew_interval": 1, "max_interval": 1}
HEARTBEAT = 1.0
LOST_AFTER = 4.0  # at least three heartbeats, as the settings require
START_TIMEOUT = 30.0
TRACKING = {"heartbeat_interval": HEARTBEAT, "run_lost_after": LOST_AFTER,
            "run_start_timeout": START_TIMEOUT}


# -- processes -------------------------------------------------------------------------------
def start(cluster: Cluster, name: str, args: list[str],
          env: dict[str, str] | None = None, *, app: str = "trackproj") -> Process:
    """A celery process of a tracked app of tests/tracking (``trackproj``: sysproj +
    track_runs, unless told another)."""
    extra = {"PYTHONPATH": os.pathsep.join([str(TRACKING_DIR), cluster.env()["PYTHONPATH"]]),
             **(env or {})}
    log_path = cluster.workdir / f"{name}.log"
    with log_path.open("ab") as handle:
        popen = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", app, *args],
            cwd=cluster.workdir, env=cluster.env(extra), stdout=handle,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    process = Process(name=name, popen=popen, log_path=log_path)
    cluster.processes.append(process)
    return process


def start_worker(cluster: Cluster, pool: str, *, name: str = "worker", concurrency: int = 4,
                 env: dict[str, str] | None = None) -> Process:
    return start(cluster, name, [
        "worker", "--pool", pool, "--concurrency", str(concurrency), "-Q", cluster.queue,
        "-n", f"{name}-{cluster.run_id}@%h", "--without-heartbeat", "--without-gossip",
        "--without-mingle", "--loglevel", "INFO"], env)


def start_beat(cluster: Cluster, *, app: str = "trackproj") -> Process:
    """Beat of the tracked app, once it leads."""
    beat = start(cluster, "beat", ["beat", "-S", "goatbeat_celery.Scheduler", "--loglevel",
                                   "INFO", "-s", str(cluster.workdir / "beat.schedule")],
                 app=app)
    cluster.wait_for_leader()
    return beat


RUN_COLUMNS = ("key, schedule_name, state, claimed_at, submitted_at, due_at, run_state, "
               "run_id, worker, run_attempts, started_at, finished_at, heartbeat_at, "
               "runtime, run_error")


def runs(cluster: Cluster, where: str = "true", **params: Any) -> list[dict[str, Any]]:
    return cluster.sql(f"SELECT {RUN_COLUMNS} FROM goatbeat_execution WHERE {where} "
                       "ORDER BY due_at, key", **params)


def request_run(cluster: Cluster, name: str) -> str:
    """Run ``name`` now and return the occurrence's key, once beat's config sync has written
    the schedule (a leader is elected before the sync's write lands on a busy machine)."""
    store = open_store(cluster.database_url)

    def requested() -> str | None:
        try:
            return store.request_run(name).key
        except ScheduleNotFound:
            return None

    try:
        return wait_for(requested, timeout=SYNCED_WITHIN,
                        what=f"the schedule {name!r} synced")
    finally:
        store.close()


TRACKING_DIR = Path(__file__).resolve().parent.parent / "tracking"


MAX_INTERVAL = 1.0
#: Once the worker is silent, its run is lost after ``lost_after``; the leader looks every
#: heartbeat interval, from a tick that runs at least every ``max_interval``.
LOST_BOUND = LOST_AFTER + HEARTBEAT + MAX_INTERVAL


#: For a busy two-core machine: the sweep's statement, and a tick woken late.
LOST_MARGIN = 2.0


#: Beat syncs its config in the tick that takes the lease, right after the lease's statement;
#: the margin is for that transaction on a busy two-core machine.
SYNCED_WITHIN = MAX_INTERVAL + LOST_MARGIN
