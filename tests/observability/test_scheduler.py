"""The Scheduler wires signals, the hook and the exporter into its engine (PostgreSQL store)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery

from goatbeat_celery import signals
from goatbeat_celery.beat.scheduler import Scheduler
from goatbeat_celery.core.loop.observer import OccurrenceRecord
from tests.support.waiting import wait_for

from .support import exporter_port, free_port, refuses_connections, scrape


@pytest.fixture
def app(pg_empty_url: str) -> Celery:
    app = Celery("obs", broker="memory://", set_as_current=False)
    app.conf.update(
        goatbeat_database_url=pg_empty_url,
        goatbeat_lease_ttl=3,
        goatbeat_lease_renew_interval=1,
        goatbeat_max_interval=0.2,
        goatbeat_metrics_port=0,
        beat_schedule={"every-second": {"task": "obs.noop", "schedule": 1.0}},
    )
    return app


@pytest.fixture
def acquired() -> Iterator[list[tuple[object, dict[str, Any]]]]:
    seen: list[tuple[object, dict[str, Any]]] = []

    def receiver(sender: object, **kwargs: Any) -> None:
        seen.append((sender, kwargs))

    signals.lease_acquired.connect(receiver, weak=False)
    signals.lease_lost.connect(receiver, weak=False)
    yield seen
    signals.lease_acquired.disconnect(receiver)
    signals.lease_lost.disconnect(receiver)


def test_the_scheduler_serves_metrics_calls_the_hook_and_signals_as_itself(
        app: Celery, acquired: list[tuple[object, dict[str, Any]]]) -> None:
    records: list[OccurrenceRecord] = []
    app.conf.goatbeat_occurrence_hook = records.append
    scheduler = Scheduler(app=app)
    try:
        port = exporter_port(scheduler)

        def an_attempt() -> bool:
            scheduler.tick()
            return bool(records)

        wait_for(an_attempt, timeout=10, what="a submission attempt reported to the hook")
        samples = scrape(port)
    finally:
        scheduler.close()
        scheduler.close()

    assert samples["goatbeat_leader"] == 1
    assert samples["goatbeat_fencing_token"] >= 1
    assert samples["goatbeat_claims_total"] >= 1
    # Every attempt the hook saw is counted, accepted or refused by the broker.
    attempts = samples["goatbeat_submissions_total"] + samples["goatbeat_submit_failures_total"]
    assert attempts == len(records)
    assert {r.schedule_name for r in records} <= {"every-second", "celery.backend_cleanup"}
    [(sender, first)] = [item for item in acquired if "token" in item[1]]
    assert sender is scheduler
    assert first["token"] == samples["goatbeat_fencing_token"]
    [(lost_by, lost)] = [item for item in acquired if "reason" in item[1]]
    assert (lost_by, lost["reason"]) == (scheduler, "released")
    assert refuses_connections(port), "close() must stop the exporter"


def test_only_the_real_instance_serves_metrics(app: Celery) -> None:
    port = free_port()
    app.conf.goatbeat_metrics_port = port

    banner = Scheduler(app=app, lazy=True)
    try:
        assert refuses_connections(port), "the lazy instance must not listen"
    finally:
        banner.close()
    scheduler = Scheduler(app=app)
    try:
        assert scrape(port)["goatbeat_leader"] == 0  # not yet ticked
    finally:
        scheduler.close()


def test_a_metrics_port_in_use_stops_beat_naming_the_setting(app: Celery) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        app.conf.goatbeat_metrics_port = taken.getsockname()[1]
        with pytest.raises(SystemExit) as caught:
            Scheduler(app=app)
    assert "goatbeat_metrics_port" in str(caught.value.code)
