"""Rotation across clusters end to end: a real ``celery beat`` leader and two real ``celery
worker`` processes, one per queue, on PostgreSQL and Redis. Each occurrence of a rotated
schedule must run on exactly the worker of the queue that owns it (occurrence k on queue k mod
N); with one worker stopped, a schedule without handover leaves its points waiting in that
worker's queue, and one with handover gives them to the other."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tests.support.waiting import wait_for
from tests.system.harness import Cluster, Process

#: Serial: which queue a handed-over occurrence goes to depends on the workers answering beat's
#: remote-control ask within its reply timeout (1 s), which a starved worker misses, and then
#: beat rightly hands its points over while the test expects them on their owner.
pytestmark = [pytest.mark.system, pytest.mark.slow, pytest.mark.serial]

EVERY = 1
#: How long beat keeps the broker's word on who consumes a queue (the handover's staleness).
PRESENCE_TTL = 1.0
#: What a remote-control ask of the workers waits for their replies (beat.presence).
REPLY_TIMEOUT = 1.0
SETTINGS = {"lease_ttl": 3, "lease_renew_interval": 1, "max_interval": 1.0,
            "rotation_presence_ttl": PRESENCE_TTL}
#: A busy two-core machine running beat, two workers and PostgreSQL: a tick woken late, a
#: message picked up late, an ask answered late.
MARGIN = 3.0
#: Once a worker is gone, beat knows within one ask period plus an ask.
HANDOVER_BOUND = PRESENCE_TTL + REPLY_TIMEOUT + MARGIN
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def owner(queues: list[str], occurrence: str) -> str:
    """The queue that owns an interval occurrence: its grid index mod N (the rule, restated)."""
    index = (datetime.fromisoformat(occurrence) - EPOCH) // timedelta(seconds=EVERY)
    return queues[index % len(queues)]


def start_worker(cluster: Cluster, name: str, queue: str) -> Process:
    return cluster.start(name, ["worker", "--pool", "threads", "--concurrency", "4", "-Q",
                                queue, "-n", f"{name}-{cluster.run_id}@%h",
                                "--without-heartbeat", "--without-gossip", "--without-mingle",
                                "--loglevel", "WARNING"])


def test_each_occurrence_runs_on_exactly_its_owner_and_a_handover_moves_a_stopped_ones(
        cluster: Cluster, report: Any) -> None:
    queues = [f"{cluster.queue}-eu", f"{cluster.queue}-us"]
    eu, us = queues
    cluster.write_config(settings=SETTINGS, schedules={
        name: {"every": EVERY, "task": "sysproj.where",
               "goatbeat": {"misfire_policy": "all", "rotate": queues, **more}}
        for name, more in (("fixed", {}), ("handed", {"rotate_handover": True}))})
    workers = {eu: start_worker(cluster, "worker-eu", eu),
               us: start_worker(cluster, "worker-us", us)}
    cluster.start_beat("beat-1")
    cluster.wait_for_leader()

    def runs(name: str) -> list[dict[str, Any]]:
        return [r for r in cluster.records() if r["schedule"] == name]

    def sent() -> dict[str, dict[str, Any]]:
        rows = cluster.sql("SELECT key, schedule_name, occurrence_at, state, cluster "
                           "FROM goatbeat_execution")
        return {row["key"]: row for row in rows}

    # Both workers up: four runs of each schedule, each on its owner's worker.
    wait_for(lambda: len(runs("fixed")) >= 4 and len(runs("handed")) >= 4,
             timeout=4 * EVERY + 4 * MARGIN, what="four runs of each schedule")
    before = cluster.records()

    def marked() -> dict[str, dict[str, Any]] | None:
        # A worker may run a message before beat marks its row sent (with its queue).
        rows = sent()
        return rows if all(rows[r["id"]]["state"] != "claimed" for r in before) else None
    rows = wait_for(marked, timeout=MARGIN, what="beat to mark the runs it sent")
    for record in before:
        expected = owner(queues, record["occurrence"])
        assert record["queue"] == expected, record
        assert record["worker"].startswith(f"worker-{expected.rsplit('-', 1)[1]}-"), record
        assert rows[record["id"]]["cluster"] == expected, rows[record["id"]]
    ids = [record["id"] for record in before]
    assert len(ids) == len(set(ids)), "an occurrence ran twice"
    assert {owner(queues, r["occurrence"]) for r in runs("fixed")} == set(queues)

    # The us worker stops: its queue has nobody.
    stopping = cluster.db_now()
    workers[us].stop()
    stopped = cluster.db_now()
    wait_for(lambda: any(r["schedule"] == "handed" and r["queue"] == eu
                         and owner(queues, r["occurrence"]) == us for r in cluster.records()),
             timeout=HANDOVER_BOUND + 2 * EVERY + MARGIN,
             what="a handed occurrence owned by the stopped queue to run on the other")
    handed_at = cluster.db_now()
    # From then on, a few more occurrences of each.
    later = handed_at + timedelta(seconds=3 * EVERY)
    wait_for(lambda: cluster.db_now() > later and all(
        row["state"] == "submitted" for row in sent().values()
        if row["occurrence_at"] <= later), timeout=3 * EVERY + 2 * MARGIN,
        what="three more seconds of occurrences sent")
    rows = sent()
    delivered = {record["id"]: record for record in cluster.records()}
    after = [row for row in rows.values() if handed_at <= row["occurrence_at"] <= later]
    assert {row["schedule_name"] for row in after} == {"fixed", "handed"}
    for row in after:
        due_owner = owner(queues, row["occurrence_at"].isoformat())
        if row["schedule_name"] == "handed":
            # Every occurrence goes to the worker still up, recorded so.
            assert row["cluster"] == eu, row
            wait_for(lambda key=row["key"]: key in {r["id"] for r in cluster.records()},
                     timeout=MARGIN, what=f"{row['key']} to run")
        elif due_owner == us:
            # Without handover, it waits in its owner's queue: sent there, never run.
            assert row["cluster"] == us and row["key"] not in delivered, row
        else:
            assert row["cluster"] == eu, row
    # Nothing was missed or counted against the schedules for the points of another queue.
    totals = cluster.sql("SELECT name, total_missed, total_runs FROM goatbeat_schedule")
    assert all(row["total_missed"] == 0 for row in totals), totals
    waiting = cluster.redis.llen(us)
    assert waiting >= 2, "the fixed schedule's points owned by the stopped queue wait there"
    report(rotated_runs=len(cluster.records()), waiting_in_stopped_queue=waiting,
           worker_stop_s=round((stopped - stopping).total_seconds(), 2),
           handover_seen_after_stop_s=round((handed_at - stopped).total_seconds(), 2))
