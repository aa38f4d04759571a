"""A backfill under real `celery beat` replicas, a worker, PostgreSQL and Redis: the leader is
killed halfway through and its successor finishes from the stored cursor; every occurrence of
the range reaches the worker under its own key, none is claimed twice, and the live schedule
runs on."""

from __future__ import annotations

import signal
from datetime import datetime, timedelta
from typing import Any

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.config import GoatbeatConfig
from goatbeat_celery.core.rules.backfill import BackfillState
from goatbeat_celery.core.types.execution import idempotency_key
from goatbeat_celery.store import open_store
from tests.support.waiting import wait_for
from tests.system.harness import Cluster, Verdict

pytestmark = [pytest.mark.system, pytest.mark.slow]

PER_TICK = 5
#: Lease 3 s renewed every second: a successor leads within about 4 s of the kill.
SETTINGS = {"lease_ttl": 3, "lease_renew_interval": 1, "max_interval": 1,
            "backfill_per_tick": PER_TICK}


def test_a_backfill_survives_the_death_of_its_leader(cluster: Cluster) -> None:
    cluster.write_config(schedules={"live": {"every": 1, "goatbeat": {"misfire_policy": "all"}}},
                         settings=SETTINGS)
    cluster.start_worker()
    cluster.start_beat("beat-1")
    cluster.start_beat("beat-2")
    leader = cluster.wait_for_leader()
    wait_for(lambda: any(r["schedule"] == "live" for r in cluster.records()), timeout=20,
             what="the live schedule's first run")

    now = cluster.db_now()
    end = now.replace(microsecond=0) - timedelta(minutes=5)
    start = end - timedelta(seconds=199)
    wanted = {idempotency_key("live", start + timedelta(seconds=k)) for k in range(200)}
    store = open_store(cluster.database_url)
    schedules = Schedules(store, config=GoatbeatConfig(database_url=cluster.database_url))
    try:
        backfill = schedules.backfill("live", start, end)

        def backfilled() -> set[str]:
            return {r["id"] for r in cluster.records()} & wanted

        # Killed once some of the range is sent: 200 occurrences at 5 a tick take 40 steps.
        wait_for(lambda: len(backfilled()) >= 30, timeout=30, what="part of the backfill")
        leader.signal(signal.SIGKILL)
        wait_for(lambda: store.get_backfill(backfill.id).state is BackfillState.DONE,
                 timeout=60, what="the successor to finish the backfill")
        wait_for(lambda: backfilled() == wanted, timeout=20,
                 what="every backfilled occurrence to reach the worker")
        done = store.get_backfill(backfill.id)
    finally:
        schedules.close()
    assert (done.examined, done.claimed) == (200, 200)

    executions = cluster.executions()
    rows = [row for row in executions if row["key"] in wanted]
    assert len(rows) == 200
    # Due when claimed, and claimed a few at a time.
    assert all(row["due_at"] == row["claimed_at"] for row in rows)
    per_claim: dict[datetime, int] = {}
    for row in rows:
        per_claim[row["claimed_at"]] = per_claim.get(row["claimed_at"], 0) + 1
    assert max(per_claim.values()) <= PER_TICK
    assert len({row["token"] for row in rows}) >= 2  # two leaders claimed them
    verdict = Verdict.of(executions, cluster.records())
    assert verdict.keys_claimed_twice == 0
    assert verdict.foreign_deliveries == ()
    # The live schedule runs on beside the backfill, and after its leader's death: a crashed
    # leader is replaced at once, so the backfill may be done before five of its seconds.
    def live() -> list[dict[str, Any]]:
        return [row for row in cluster.executions() if row["schedule_name"] == "live"
                and row["key"] not in wanted and row["occurrence_at"] > now]
    wait_for(lambda: len(live()) >= 5, timeout=20, what="five live runs since the backfill")
