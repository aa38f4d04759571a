"""/healthz and /readyz beside /metrics: a scheduler's loop turning, its database answering."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
import sqlalchemy as sa
from celery import Celery
from sqlalchemy.engine import URL

from goatbeat_celery.beat.health import HealthEndpoints, Liveness
from goatbeat_celery.beat.metrics import MetricsExporter
from goatbeat_celery.beat.scheduler import Scheduler
from goatbeat_celery.store import open_store
from goatbeat_celery.testing import ManualClock
from tests.conftest import migrated_database
from tests.support.waiting import wait_for

from .support import exporter_port, scrape


def get(port: int, path: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def app(pg_empty_url: str) -> Celery:
    app = Celery("health", broker="memory://", set_as_current=False)
    app.conf.update(goatbeat_database_url=pg_empty_url, goatbeat_lease_ttl=3,
                    goatbeat_lease_renew_interval=1, goatbeat_max_interval=0.2,
                    goatbeat_metrics_port=0)
    return app


def test_a_ticking_scheduler_is_live_and_ready_and_says_it_leads(app: Celery) -> None:
    scheduler = Scheduler(app=app)
    try:
        port = exporter_port(scheduler)

        def leads() -> bool:
            scheduler.tick()
            return scheduler.engine is not None and scheduler.engine.is_leader()

        wait_for(leads, timeout=10, what="the scheduler to lead")
        live = get(port, "/healthz")
        ready = get(port, "/readyz")
        samples = scrape(port)  # the metrics are still served on the same port
    finally:
        scheduler.close()

    assert live[0] == 200 and live[1]["live"] is True and live[1]["leading"] is True
    assert 0 <= live[1]["last_tick_seconds_ago"] < 3 + 1
    assert ready == (200, {"ready": True, "leading": True})
    assert samples["goatbeat_leader"] == 1


def test_a_loop_silent_past_ttl_plus_renew_interval_is_not_live() -> None:
    clock = ManualClock()
    liveness = Liveness(stale_after=timedelta(seconds=4), monotonic=clock.monotonic)
    endpoints = HealthEndpoints(liveness=liveness, leading=lambda: True,
                                read_database=lambda: None)
    clock.advance(4)
    assert endpoints.liveness_answer()[0] == 200
    clock.advance(0.5)
    status, answer = endpoints.liveness_answer()
    assert status == 503 and answer["live"] is False
    assert "has not ticked for 4.5s (more than 4s)" in answer["reason"]
    liveness.ticked()
    assert endpoints.liveness_answer()[0] == 200


def test_a_database_that_does_not_answer_is_not_ready(pg_server_url: URL) -> None:
    name = f"goatbeat_health_{uuid.uuid4().hex[:10]}"
    with migrated_database(pg_server_url, name) as url:
        store = open_store(url)
        liveness = Liveness(stale_after=timedelta(seconds=4))
        exporter = MetricsExporter.start(port=0, lease_ttl=timedelta(seconds=3), health=(
            HealthEndpoints(liveness=liveness, leading=lambda: False,
                            read_database=partial(store.inspect, "default"))))
        try:
            assert get(exporter.port, "/readyz")[0] == 200
            # The database goes away under the running store (its sessions ended).
            admin = sa.create_engine(pg_server_url, isolation_level="AUTOCOMMIT",
                                     poolclass=sa.NullPool)
            with admin.connect() as connection:
                connection.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
            admin.dispose()
            status, answer = get(exporter.port, "/readyz")
            # Its loop goes on while the database is away (a tick that fails is a tick):
            # dropping a database on a busy machine may outlast the 4 s since the start.
            liveness.ticked()
            live = get(exporter.port, "/healthz")
        finally:
            exporter.close()
            store.close()
    assert (status, answer) == (503, {"ready": False, "leading": False,
                                      "reason": "database unreachable"})
    assert live[0] == 200  # a live process whose database is away: not restarted for that
