"""Entries declared through Celery's scheduler API, and the way back to Celery's own beat, with
real ``celery beat`` processes, a real worker, PostgreSQL and a real broker.

A scheduler subclass that adds entries in ``setup_schedule`` (tests/system/addproj.py) runs on
two replicas: the entries are claimed and sent like config entries, once each, across a
handover to the standby (which syncs the entries it declares itself). The same
``beat_schedule``, goatbeat's options under ``options["goatbeat"]``, runs under Celery's own
``PersistentScheduler`` on Redis and RabbitMQ: the option is not a header the worker sees.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from tests.support.waiting import wait_for
from tests.system.harness import (
    BROKERS,
    FAST_LEASE,
    Broker,
    Cluster,
    assert_alive,
    finish,
    run_for,
    wait_for_takeover,
)

pytestmark = [pytest.mark.system, pytest.mark.slow]

STEP = timedelta(seconds=1)
DECLARED = [f"declared-{i}" for i in range(4)]
#: A process imports Celery and is ready within seconds; 60 s covers a busy 2-core machine.
FIRST_RUN_WITHIN = 60.0


def write(cluster: Cluster, **config: Any) -> None:
    """The scenario's config, with what sysproj and addproj read beside the schedules."""
    cluster.config_path.write_text(json.dumps({"settings": FAST_LEASE, "timezone": "UTC",
                                               **config}))


def test_entries_a_subclass_adds_in_setup_schedule_run_once_each_across_a_handover(
        cluster: Cluster) -> None:
    write(cluster, schedules={"configured": {"every": 1, "options": {
        "goatbeat": {"misfire_policy": "all"}}}}, declared=DECLARED)
    cluster.start_worker()
    beat = ["beat", "-S", "addproj:AddingScheduler", "--loglevel", "INFO"]
    first = cluster.start("beat-1", [*beat, "-s", str(cluster.workdir / "1.schedule")])
    leader = cluster.wait_for_leader()
    assert leader is first
    second = cluster.start("beat-2", [*beat, "-s", str(cluster.workdir / "2.schedule")])
    cluster.wait_for_replicas(2)
    started = cluster.db_now()
    run_for(5)  # the scenario's duration: several runs of each entry under the first leader
    lease = cluster.lease()
    assert lease is not None
    assert_alive(first, second)
    first.stop()  # releases the lease: the standby takes over and syncs its own entries
    wait_for_takeover(cluster, lease["token"])
    run_for(4)  # and under the second
    outcome = finish(cluster, [second])

    outcome.assert_sound()
    assert outcome.until is not None
    names = ["configured", *DECLARED]
    missing = outcome.missing(STEP, started + STEP, outcome.until, names)
    assert all(points == [] for points in missing.values()), missing
    tokens: dict[str, set[int]] = {name: set() for name in names}
    for o in outcome.scheduled:
        tokens[o.schedule].add(o.token)
    assert all(len(tokens[name]) == 2 for name in DECLARED), tokens  # both leaders sent them
    rows = cluster.sql("SELECT name, source, enabled FROM goatbeat_schedule "
                       "WHERE name <> 'celery.backend_cleanup' ORDER BY name")
    assert rows == [{"name": name, "source": "config", "enabled": True}
                    for name in sorted(names)]


@pytest.mark.parametrize("broker", BROKERS)
def test_the_same_beat_schedule_runs_under_celerys_own_scheduler(
        broker: Broker, request: pytest.FixtureRequest) -> None:
    cluster = broker.cluster(request)
    write(cluster, schedules={"rolled-back": {"every": 1, "options": {
        "priority": 5, "goatbeat": {"misfire_policy": "all", "jitter": 0.5}}}})
    cluster.start_worker()
    beat = cluster.start("celery-beat", ["beat", "--loglevel", "INFO", "-s",
                                         str(cluster.workdir / "celerybeat-schedule")])
    wait_for(lambda: [r for r in cluster.records() if r["label"] == "rolled-back"],
             timeout=FIRST_RUN_WITHIN, what="a run sent by Celery's own beat")
    assert_alive(beat)
    beat.stop()
    log = beat.log()
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]
    # Celery's beat sent it: goatbeat's headers are not there, nor its option as one.
    record = next(r for r in cluster.records() if r["label"] == "rolled-back")
    assert record["schedule"] is None and record["token"] is None
