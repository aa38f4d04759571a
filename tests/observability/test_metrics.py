"""Prometheus metrics scraped over real HTTP from an exporter fed by a real Engine."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from functools import partial

import pytest

from goatbeat_celery.beat.metrics import MetricsExporter, StatusReading
from goatbeat_celery.beat.observability import read_status
from goatbeat_celery.core.loop.submission import MAX_SEND_ATTEMPTS
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome
from goatbeat_celery.core.rules.shards import Shard, shard_lease_name
from goatbeat_celery.core.rules.status import State
from goatbeat_celery.core.types.errors import ConfigurationError, StoreUnavailable
from goatbeat_celery.core.types.execution import idempotency_key
from goatbeat_celery.core.types.schedule import PauseNote
from goatbeat_celery.core.types.spec import MisfirePolicy

from .support import (
    SETTINGS,
    START,
    ManualClock,
    RecordingObserver,
    Replicas,
    create_due,
    interval,
    refuses_connections,
    scrape,
)

Exporters = Callable[[], MetricsExporter]


@pytest.fixture
def exporters(clock: ManualClock) -> Iterator[Exporters]:
    """Starts exporters on free local ports, each with its own registry; closes them after."""
    started: list[MetricsExporter] = []

    def start() -> MetricsExporter:
        exporter = MetricsExporter.start(port=0, addr="127.0.0.1", lease_ttl=SETTINGS.lease_ttl,
                                         monotonic=clock.monotonic)
        started.append(exporter)
        return exporter

    yield start
    for exporter in started:
        exporter.close()


def test_a_few_ticks_show_in_every_metric(
        replicas: Replicas, clock: ManualClock, exporters: Exporters) -> None:
    exporter = exporters()
    engine = replicas.engine(exporter.observer)
    replicas.broker.latency = 0.5
    clock.advance(2)
    create_due(replicas.store, "on-time", START)
    # Six points due, five past a 30 s grace: "latest" runs 12:00 and records five missed.
    create_due(replicas.store, "behind", START - timedelta(minutes=5),
               misfire_policy=MisfirePolicy.LATEST, misfire_grace=timedelta(seconds=30))

    engine.tick()  # both run 12:00, accepted at 12:00:02.5
    first = scrape(exporter.port)
    replicas.broker.down = True
    clock.advance(60)
    engine.tick()  # both claim 12:01 at 12:01:02.5; the broker refuses them
    clock.advance(7)
    during_outage = scrape(exporter.port)
    replicas.broker.down = False
    engine.tick()  # resubmitted, accepted at 12:01:10.5
    after = scrape(exporter.port)

    assert (first["goatbeat_leader"], first["goatbeat_fencing_token"]) == (1, 1)
    assert first["goatbeat_claims_total"] == 2
    assert first["goatbeat_submissions_total"] == 2
    assert first["goatbeat_submit_failures_total"] == 0
    assert first["goatbeat_missed_total"] == 5
    assert first["goatbeat_lateness_seconds_count"] == 2
    assert first["goatbeat_lateness_seconds_sum"] == pytest.approx(5.0)
    assert first['goatbeat_lateness_seconds_bucket{le="1.0"}'] == 0
    assert first['goatbeat_lateness_seconds_bucket{le="2.5"}'] == 2
    assert first["goatbeat_oldest_unsubmitted_claim_age_seconds"] == 0

    assert during_outage["goatbeat_claims_total"] == 4
    assert during_outage["goatbeat_submissions_total"] == 2
    assert during_outage["goatbeat_submit_failures_total"] == 2
    assert during_outage["goatbeat_oldest_unsubmitted_claim_age_seconds"] == pytest.approx(7.5)

    assert after["goatbeat_submissions_total"] == 4
    assert after["goatbeat_submit_failures_total"] == 2
    assert after["goatbeat_lateness_seconds_count"] == 4
    # The retries were due at 12:01 and accepted 10.5 seconds later.
    assert after["goatbeat_lateness_seconds_sum"] == pytest.approx(26.0)
    assert after['goatbeat_lateness_seconds_bucket{le="5.0"}'] == 2
    assert after['goatbeat_lateness_seconds_bucket{le="10.0"}'] == 2
    assert after['goatbeat_lateness_seconds_bucket{le="30.0"}'] == 4
    assert after["goatbeat_oldest_unsubmitted_claim_age_seconds"] == 0


def test_the_oldest_claim_age_counts_a_predecessors_claim_from_its_claimed_at(
        replicas: Replicas, clock: ManualClock, exporters: Exporters) -> None:
    old_exporter, new_exporter = exporters(), exporters()
    old = replicas.engine(old_exporter.observer, holder="a")
    new = replicas.engine(new_exporter.observer, holder="b")
    create_due(replicas.store, "report", START)
    replicas.broker.down = True
    old.tick()  # claimed at 12:00:00, refused
    clock.advance(31)  # the old leader freezes; its claim stays pending

    new.tick()  # takes over, resubmits the old claim, still refused

    assert scrape(new_exporter.port)["goatbeat_oldest_unsubmitted_claim_age_seconds"] == 31


def test_a_replica_that_loses_the_lease_drops_its_gauges_and_its_pending_claims(
        replicas: Replicas, clock: ManualClock, exporters: Exporters) -> None:
    old_exporter, new_exporter = exporters(), exporters()
    old = replicas.engine(old_exporter.observer, holder="a")
    new = replicas.engine(new_exporter.observer, holder="b")
    create_due(replicas.store, "report", START)
    replicas.broker.down = True
    old.tick()
    clock.advance(31)
    new.tick()

    old.tick()  # learns it was replaced

    lost, leading = scrape(old_exporter.port), scrape(new_exporter.port)
    assert (lost["goatbeat_leader"], lost["goatbeat_fencing_token"]) == (0, 0)
    assert lost["goatbeat_oldest_unsubmitted_claim_age_seconds"] == 0
    assert (leading["goatbeat_leader"], leading["goatbeat_fencing_token"]) == (1, 2)
    # Separate registries: the new leader's counters hold only its own attempts.
    assert (lost["goatbeat_claims_total"], lost["goatbeat_submit_failures_total"]) == (1, 1)
    assert (leading["goatbeat_claims_total"],
            leading["goatbeat_submit_failures_total"]) == (0, 1)


def test_a_standby_reports_that_it_does_not_lead(
        replicas: Replicas, exporters: Exporters) -> None:
    leader_exporter, standby_exporter = exporters(), exporters()
    replicas.engine(leader_exporter.observer, holder="a").tick()

    replicas.engine(standby_exporter.observer, holder="b").tick()

    assert scrape(leader_exporter.port)["goatbeat_leader"] == 1
    assert scrape(standby_exporter.port)["goatbeat_leader"] == 0


def test_closing_the_exporter_frees_its_port(exporters: Exporters) -> None:
    exporter = exporters()
    port = exporter.port
    assert "goatbeat_leader" in scrape(port)

    exporter.close()
    exporter.close()

    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
    assert refuses_connections(port)
    again = MetricsExporter.start(port=port, addr="127.0.0.1", lease_ttl=SETTINGS.lease_ttl)
    try:
        assert again.port == port
        assert "goatbeat_leader" in scrape(port)
    finally:
        again.close()


def test_a_port_in_use_is_a_configuration_error_naming_the_setting() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigurationError) as caught:
            MetricsExporter.start(port=port, addr="127.0.0.1", lease_ttl=SETTINGS.lease_ttl)
    [problem] = caught.value.problems
    assert problem.startswith("goatbeat_metrics_port:")
    assert f"127.0.0.1:{port}" in problem


def test_a_schedule_set_aside_is_counted(
        replicas: Replicas, clock: ManualClock, exporters: Exporters) -> None:
    exporter = exporters()
    engine = replicas.engine(exporter.observer)
    create_due(replicas.store, "report", START)
    create_due(replicas.store, "rogue", START, options={"retry": False})

    engine.tick()

    samples = scrape(exporter.port)
    assert samples["goatbeat_schedules_set_aside_total"] == 1
    assert samples["goatbeat_claims_total"] == 1


def test_an_abandoned_occurrence_is_no_longer_owed_to_the_broker(
        replicas: Replicas, clock: ManualClock, exporters: Exporters) -> None:
    exporter = exporters()
    engine = replicas.engine(exporter.observer)
    create_due(replicas.store, "report", START)
    replicas.broker.rejecting = {"report"}

    for _ in range(MAX_SEND_ATTEMPTS + 1):
        engine.tick()
        clock.advance(1)

    assert scrape(exporter.port)["goatbeat_oldest_unsubmitted_claim_age_seconds"] == 0


def test_runs_are_counted_by_outcome_with_their_runtimes(
        replicas: Replicas, clock: ManualClock, exporters: Exporters) -> None:
    exporter = exporters()
    engine = replicas.engine(exporter.observer)
    for name in ("ok", "bad", "slow"):
        create_due(replicas.store, name, START)
    engine.tick()
    keys = {name: idempotency_key(name, START) for name in ("ok", "bad", "slow")}
    ran = {"ok": (RunOutcome.SUCCEEDED, 0.2), "bad": (RunOutcome.FAILED, 3.0),
           "slow": (RunOutcome.SUCCEEDED, 40.0)}
    for name, (outcome, seconds) in ran.items():
        replicas.store.record_runs([
            RunEvent.started(keys[name], run="r", worker="w", age=timedelta(seconds=seconds)),
            RunEvent.finished(keys[name], run="r", worker="w", age=timedelta(0),
                              outcome=outcome, runtime=timedelta(seconds=seconds))])
    clock.advance(1)
    engine.tick()
    clock.advance(1)
    engine.tick()  # nothing new: nothing counted twice
    samples = scrape(exporter.port)

    assert samples['goatbeat_runs_total{outcome="succeeded"}'] == 2
    assert samples['goatbeat_runs_total{outcome="failed"}'] == 1
    assert samples["goatbeat_run_runtime_seconds_count"] == 3
    assert samples["goatbeat_run_runtime_seconds_sum"] == pytest.approx(43.2)
    assert samples['goatbeat_run_runtime_seconds_bucket{le="1.0"}'] == 1
    assert samples['goatbeat_run_runtime_seconds_bucket{le="5.0"}'] == 2
    assert samples['goatbeat_run_runtime_seconds_bucket{le="60.0"}'] == 3


def test_with_shards_each_shards_leader_and_token_are_exported(
        replicas: Replicas, clock: ManualClock) -> None:
    settings = replace(SETTINGS, shards=2)
    names = [shard_lease_name(settings.lease_name, Shard(k, 2)) for k in range(2)]
    exporter = MetricsExporter.start(port=0, addr="127.0.0.1", lease_ttl=settings.lease_ttl,
                                     monotonic=clock.monotonic, shard_leases=names)
    try:
        engine = replicas.engine(exporter.observer, settings=settings)
        engine.tick()
        leading = scrape(exporter.port)
        assert leading['goatbeat_shard_leader{shard="0"}'] == 1
        assert leading['goatbeat_shard_leader{shard="1"}'] == 1
        assert leading['goatbeat_shard_fencing_token{shard="1"}'] == 1
        assert (leading["goatbeat_leader"], leading["goatbeat_fencing_token"]) == (1, 1)

        engine.close()
        closed = scrape(exporter.port)
        assert closed['goatbeat_shard_leader{shard="0"}'] == 0
        assert closed['goatbeat_shard_fencing_token{shard="1"}'] == 0
        assert closed["goatbeat_leader"] == 0
    finally:
        exporter.close()


def test_with_one_shard_no_shard_series_are_exported(exporters: Exporters) -> None:
    assert not [name for name in scrape(exporters().port) if "shard" in name]


def status_exporter(replicas: Replicas, clock: ManualClock,
                    read: Callable[[], StatusReading] | None = None) -> MetricsExporter:
    return MetricsExporter.start(
        port=0, addr="127.0.0.1", lease_ttl=SETTINGS.lease_ttl, monotonic=clock.monotonic,
        read_status=read or partial(read_status, replicas.store, SETTINGS))


def test_schedules_by_state_and_the_standbys_are_read_from_the_store_when_scraped(
        replicas: Replicas, clock: ManualClock) -> None:
    store = replicas.store
    create_due(store, "on-time", START)
    create_due(store, "also-on-time", START)
    store.create_schedule(interval("frozen", enabled=False), next_occurrence_at=None,
                          next_run_at=None)
    store.create_schedule(interval("over", end_at=START - timedelta(hours=1)),
                          next_occurrence_at=None, next_run_at=None)
    exporter = status_exporter(replicas, clock)
    try:
        alone = scrape(exporter.port)
        replicas.engine(exporter.observer, holder="a").tick()
        replicas.engine(RecordingObserver(), holder="b").tick()
        replicas.engine(RecordingObserver(), holder="c").tick()
        later = START + timedelta(hours=1)
        store.replace_schedule(interval("on-time"), next_occurrence_at=later,
                               next_run_at=later, pause=PauseNote(reason="review", until=later))
        with_standbys = scrape(exporter.port)
    finally:
        exporter.close()

    def states(samples: dict[str, float]) -> dict[str, float]:
        return {state.value: samples[f'goatbeat_schedules{{state="{state.value}"}}']
                for state in State}

    assert states(alone) == {"enabled": 2, "paused": 1, "paused until": 0, "set aside": 0,
                             "ended": 1}
    assert alone["goatbeat_standbys"] == 0
    assert states(with_standbys) == {"enabled": 1, "paused": 1, "paused until": 1,
                                     "set aside": 0, "ended": 1}
    assert with_standbys["goatbeat_standbys"] == 2


def test_a_failed_read_leaves_the_states_out_of_that_scrape_and_nothing_else(
        replicas: Replicas, clock: ManualClock, caplog: pytest.LogCaptureFixture) -> None:
    def unreachable() -> StatusReading:
        raise StoreUnavailable("connection refused")

    exporter = status_exporter(replicas, clock, unreachable)
    try:
        samples = scrape(exporter.port)
    finally:
        exporter.close()

    assert samples["goatbeat_leader"] == 0
    assert not any(name.startswith("goatbeat_schedules{") or name == "goatbeat_standbys"
                   for name in samples)
    assert "cannot read the schedules' states: connection refused" in caplog.text


def test_without_a_store_no_state_series_are_exported(exporters: Exporters) -> None:
    samples = scrape(exporters().port)

    assert not any(name.startswith("goatbeat_schedules{") or name == "goatbeat_standbys"
                   for name in samples)
