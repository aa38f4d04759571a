"""Exclusion calendars end to end: a real ``celery beat`` leader and ``celery worker``,
PostgreSQL and Redis. What beat decided is read from the executions table, what the worker
received from the Redis list its task appends to."""

from __future__ import annotations

import time

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.config import GoatbeatConfig
from goatbeat_celery.store import open_store
from tests.support.waiting import wait_for
from tests.system.harness import Cluster

pytestmark = [pytest.mark.system, pytest.mark.slow]

MAX_INTERVAL = 1.0
SETTINGS = {"lease_ttl": 3, "lease_renew_interval": 1, "max_interval": MAX_INTERVAL}
EVERY = 1.0
#: A busy two-core machine running beat, a worker and PostgreSQL: a tick woken late, a message
#: picked up late by the worker.
MARGIN = 3.0
#: An edit reaches the leader at its next planning: the schedule's next occurrence (EVERY
#: away), planned at the latest MAX_INTERVAL after it (NOTIFY usually wakes it at once).
EDIT_BOUND = EVERY + MAX_INTERVAL + MARGIN


def test_a_leader_skips_the_excluded_date_and_runs_again_once_the_calendar_changes(
        cluster: Cluster) -> None:
    store = open_store(cluster.database_url)
    schedules = Schedules(store, config=GoatbeatConfig(database_url=cluster.database_url))
    try:
        # Interval schedules read their calendars in UTC: exclude the database's UTC date.
        today = cluster.db_now().date()
        schedules.create_calendar("today", dates=[today])
        cluster.write_config(settings=SETTINGS, schedules={
            "canary": {"every": EVERY},
            "closed": {"every": EVERY, "goatbeat": {"calendars": ["today"]}},
        })
        cluster.start_worker()
        cluster.start_beat("beat-1")
        cluster.wait_for_leader()

        def received(name: str) -> list[dict[str, object]]:
            return [r for r in cluster.records() if r["schedule"] == name]

        wait_for(lambda: len(received("canary")) >= 3, timeout=3 * EVERY + 4 * MARGIN,
                 what="three runs of the canary")
        closed = cluster.sql("SELECT state, attempts, last_error FROM goatbeat_execution "
                             "WHERE schedule_name = 'closed'")
        assert len(closed) >= 2, closed
        assert {(r["state"], r["attempts"], r["last_error"]) for r in closed} == {
            ("skipped", 0, "excluded by calendar today")}
        assert received("closed") == []

        schedules.update_calendar("today", dates=[])
        edited = time.monotonic()
        wait_for(lambda: received("closed"), timeout=EDIT_BOUND,
                 what="a run of the schedule once its calendar excludes nothing")
        assert time.monotonic() - edited <= EDIT_BOUND
        (counts,) = cluster.sql("SELECT total_skipped FROM goatbeat_schedule "
                                "WHERE name = 'closed'")
        assert counts["total_skipped"] >= 2
    finally:
        schedules.close()
