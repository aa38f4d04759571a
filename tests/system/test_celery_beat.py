"""`celery beat -S goatbeat_celery.Scheduler` end to end: real beat and worker processes,
PostgreSQL and Redis."""

from __future__ import annotations

import time
from collections import defaultdict
from datetime import datetime, timedelta

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.config import GoatbeatConfig
from goatbeat_celery.core.types.execution import idempotency_key
from goatbeat_celery.store import open_store
from tests.support.waiting import wait_for
from tests.system.harness import Cluster, Verdict

pytestmark = [pytest.mark.system, pytest.mark.slow]

FAST_LEASE = {"lease_ttl": 3, "lease_renew_interval": 1, "max_interval": 1}


def by_schedule(executions: list[dict]) -> dict[str, list[datetime]]:
    grouped: dict[str, list[datetime]] = defaultdict(list)
    for row in executions:
        if not row["manual"]:
            grouped[row["schedule_name"]].append(row["occurrence_at"])
    return {name: sorted(points) for name, points in grouped.items()}


def assert_contiguous(points: list[datetime], step: timedelta, name: str) -> None:
    gaps = [(a, b) for a, b in zip(points, points[1:], strict=False) if b - a != step]
    assert not gaps, f"{name}: occurrences not contiguous on the {step} grid: {gaps[:5]}"


def test_one_replica_dispatches_interval_and_cron_with_keys_as_task_ids(cluster: Cluster):
    cluster.write_config(
        schedules={"every-second": {"every": 1, "goatbeat": {"misfire_policy": "all"}},
                   "each-minute": {"crontab": {"minute": "*"}}},
        settings=FAST_LEASE,
    )
    cluster.start_worker()
    beat = cluster.start_beat("beat-1")
    wait_for(lambda: any(r["schedule"] == "each-minute" for r in cluster.records()),
             timeout=75, what="the cron schedule's first run")
    wait_for(lambda: len(cluster.records()) >= 5, timeout=10, what="interval runs")
    assert beat.stop() == 0
    wait_for(lambda: Verdict.of(cluster.executions(), cluster.records()).not_delivered == (),
             timeout=15, what="every claimed key to reach the worker")

    executions = cluster.executions()
    records = cluster.records()
    assert {r["id"] for r in records} == {row["key"] for row in executions}
    for record in records:
        assert record["id"] == idempotency_key(
            record["schedule"], datetime.fromisoformat(record["occurrence"]))
    cron_points = by_schedule(executions)["each-minute"]
    assert all(p.second == 0 and p.microsecond == 0 for p in cron_points)
    assert_contiguous(by_schedule(executions)["every-second"], timedelta(seconds=1),
                      "every-second")
    assert all(row["state"] == "submitted" for row in executions)


def test_two_replicas_for_a_minute_claim_nothing_twice_and_lose_nothing(cluster: Cluster):
    names = [f"s{i}" for i in range(5)]
    cluster.write_config(schedules={n: {"every": 1, "goatbeat": {"misfire_policy": "all"}}
                                    for n in names}, settings=FAST_LEASE)
    cluster.start_worker()
    replicas = [cluster.start_beat("beat-1"), cluster.start_beat("beat-2")]
    cluster.wait_for_leader()
    time.sleep(60)  # the scenario's duration, not a synchronisation
    for replica in replicas:
        assert replica.alive(), f"{replica.name} died:\n{replica.log()[-3000:]}"
        replica.stop()
    wait_for(lambda: Verdict.of(cluster.executions(), cluster.records()).not_delivered == (),
             timeout=15, what="every claimed key to reach the worker")

    executions = cluster.executions()
    verdict = Verdict.of(executions, cluster.records())
    grouped = by_schedule(executions)
    assert sorted(grouped) == names
    for name, points in grouped.items():
        # Sixty seconds pass between the leader's start and the stop; the first claim waits for
        # the first whole second after the lease, and the last seconds before the stop may
        # still be unclaimed: five points are left to those edges on a busy machine. The
        # points in between are checked one by one (contiguous, each once).
        assert len(points) >= 60 - 5, f"{name}: only {len(points)} runs in a minute"
        assert_contiguous(points, timedelta(seconds=1), name)
    assert verdict.keys_claimed_twice == 0
    assert verdict.duplicates_delivered == 0
    assert verdict.foreign_deliveries == ()
    assert verdict.unsubmitted == 0


def test_config_change_on_restart_reschedules_only_the_changed_entry(cluster: Cluster):
    hourly = {"every": 3600}
    cluster.write_config(schedules={"kept": hourly, "changed": hourly, "dropped": hourly},
                         settings=FAST_LEASE)
    beat = cluster.start_beat("beat-1")
    rows = wait_for(lambda: cluster.sql("SELECT * FROM goatbeat_schedule ORDER BY name"),
                    timeout=20, what="config schedules in the database")
    before = {row["name"]: row for row in rows}
    assert beat.stop() == 0

    # 3599 s, not 1800: in the second half of an hour the next half-hour point is the next
    # hour, and the changed entry's next run would look unchanged.
    cluster.write_config(schedules={"kept": hourly, "changed": {"every": 3599}},
                         settings=FAST_LEASE)
    cluster.start_beat("beat-2")

    def after_sync() -> dict[str, dict]:
        rows = {r["name"]: r for r in cluster.sql("SELECT * FROM goatbeat_schedule")}
        return rows if rows["changed"]["version"] > before["changed"]["version"] else {}

    after = wait_for(after_sync, timeout=20, what="the restarted replica to sync config")
    assert after["kept"]["version"] == before["kept"]["version"]
    assert after["kept"]["next_run_at"] == before["kept"]["next_run_at"]
    assert after["changed"]["trigger"]["every"] == 3599
    assert after["changed"]["next_run_at"] != before["changed"]["next_run_at"]
    assert after["dropped"]["enabled"] is False
    assert before["dropped"]["enabled"] is True


def test_database_schedule_fires_without_restarting_beat(cluster: Cluster):
    cluster.write_config(schedules={}, settings=FAST_LEASE)
    cluster.start_worker()
    cluster.start_beat("beat-1")
    cluster.wait_for_leader()

    store = open_store(cluster.database_url)
    schedules = Schedules(store, config=GoatbeatConfig(database_url=cluster.database_url))
    try:
        schedules.create("from-api", "sysproj.record", every=1, args=("api",))
        wait_for(lambda: [r for r in cluster.records() if r["schedule"] == "from-api"],
                 timeout=5, what="the API-created schedule to run")
        manual = schedules.run_now("from-api")
        wait_for(lambda: [r for r in cluster.records() if r["id"] == manual.key],
                 timeout=5, what="the manual run to reach the worker")
        schedules.pause("from-api")
        paused_at = time.monotonic()
        wait_for(lambda: time.monotonic() - paused_at > 3, timeout=5, what="three seconds")
        count = len([r for r in cluster.records() if r["schedule"] == "from-api"])
        wait_for(lambda: time.monotonic() - paused_at > 5, timeout=5, what="two more seconds")
        assert len([r for r in cluster.records() if r["schedule"] == "from-api"]) == count
    finally:
        schedules.close()


def test_bad_config_makes_beat_exit_non_zero_naming_every_problem(cluster: Cluster):
    cluster.write_config(
        schedules={
            "bad-zone": {"crontab": {"minute": "0"}, "goatbeat": {"timezone": "Mars/Olympus"}},
            "bad-policy": {"every": 5, "goatbeat": {"misfire_policy": "sometimes"}},
        },
        settings={"lease_tll": 3},
    )
    beat = cluster.start_beat("beat-1")
    code = beat.popen.wait(60)
    output = beat.log()
    assert code != 0
    assert "Mars/Olympus" in output and "bad-zone" in output
    assert "sometimes" in output and "bad-policy" in output
    assert "goatbeat_lease_tll" in output and "goatbeat_lease_ttl" in output
    assert cluster.sql("SELECT count(*) AS n FROM goatbeat_schedule")[0]["n"] == 0
    assert cluster.sql("SELECT count(*) AS n FROM goatbeat_lease")[0]["n"] == 0


def test_worker_with_embedded_beat_dispatches_and_releases_the_lease_on_stop(cluster: Cluster):
    cluster.write_config(schedules={"embedded": {"every": 1}}, settings=FAST_LEASE)
    worker = cluster.start("worker-b", [
        "worker", "-B", "--scheduler", "goatbeat_celery.Scheduler", "--pool", "threads",
        "--concurrency", "4", "-Q", cluster.queue, "-n", f"wb-{cluster.run_id}@%h",
        "-s", str(cluster.workdir / "embedded.schedule"), "--without-heartbeat",
        "--without-gossip", "--without-mingle", "--loglevel", "INFO"])
    wait_for(lambda: len([r for r in cluster.records() if r["schedule"] == "embedded"]) >= 3,
             timeout=30, what="three runs dispatched by the embedded beat")
    assert worker.stop(timeout=20) == 0
    lease = cluster.lease()
    assert lease is not None and lease["holder"] is None, f"lease not released: {lease}"
    for record in cluster.records():
        assert record["id"] == idempotency_key(
            "embedded", datetime.fromisoformat(record["occurrence"]))
