"""Prometheus metrics of one scheduler, served on ``goatbeat_metrics_port`` (extra ``metrics``).

=================================================  =========  ==============================
metric                                             type       meaning
=================================================  =========  ==============================
``goatbeat_leader``                                gauge      1 while this replica leads
``goatbeat_fencing_token``                         gauge      token held (0 when standby)
``goatbeat_claims_total``                          counter    occurrences claimed
``goatbeat_submissions_total``                     counter    attempts the broker accepted
``goatbeat_submit_failures_total``                 counter    attempts the broker refused
``goatbeat_missed_total``                          counter    grid points never run
``goatbeat_lateness_seconds``                      histogram  accepted instant - due instant
``goatbeat_oldest_unsubmitted_claim_age_seconds``  gauge      see GoatbeatMetrics
``goatbeat_schedules{state}``                      gauge      schedules in each status state
``goatbeat_standbys``                              gauge      live replicas leading nothing
``goatbeat_webhook_deliveries_total{outcome}``     counter    events delivered or failed
=================================================  =========  ==============================

The last two are read from the database when scraped (one count and one lease read, whatever
the replica), and only when the exporter is given a way to read them (a scheduler's is).

Metrics carry no schedule label on purpose: thousands of schedules would make thousands of
series. Per-schedule detail is what the signals and ``goatbeat_occurrence_hook`` are for.

Each exporter owns its own ``CollectorRegistry`` so that several schedulers in one process (tests,
embedded use) never share or clash over series. prometheus-client is imported only when metrics
are asked for; without it, a set port is a configuration error naming the extra to install.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from types import ModuleType
from typing import TYPE_CHECKING, Any

from goatbeat_celery.beat.health import HealthEndpoints, serve
from goatbeat_celery.core.loop.observer import OccurrenceRecord
from goatbeat_celery.core.rules.alerts import AlertEvent, AlertRule
from goatbeat_celery.core.rules.runs import ENDED_STATE_VALUES
from goatbeat_celery.core.rules.status import State
from goatbeat_celery.core.types.claims import Dispatch
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.settings.metrics import INSTALL_HINT, SETTING, client_problems
from goatbeat_celery.settings.metrics import prometheus_client as _client

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from prometheus_client import CollectorRegistry

logger = logging.getLogger(__name__)

#: From a few milliseconds (a healthy tick) to an hour (catch-up after downtime).
LATENESS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0,
                    3600.0)
#: From a no-op task (milliseconds) to a long batch job (hours).
RUNTIME_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0,
                   3600.0, 4 * 3600.0, 12 * 3600.0)
#: How long close() waits for the exporter's thread to finish.
STOP_TIMEOUT = 5.0

__all__ = ["INSTALL_HINT", "SETTING", "GoatbeatMetrics", "MetricsExporter", "StatusReading",
           "client_problems"]

#: What a scrape reads from the store: how many schedules are in each state, and how many live
#: replicas stand by.
StatusReading = tuple[Mapping[State, int], int]


class GoatbeatMetrics:
    """The metrics of one scheduler, kept up to date as its engine's observer.

    The oldest unsubmitted claim age is computed from the observer's own events, never by a
    store query: the engine reports every claim and every submission attempt, so the claims
    this leader has seen claimed (or fail) and not yet seen accepted are exactly the ones it
    still owes the broker. Ages are measured on the database clock, which stamps ``claimed_at``:
    the latest database instant seen (a claim, or the lease grant) is carried forward with the
    local monotonic clock, so a drifting host clock does not skew them. A scrape costs
    O(pending claims), which is zero in a healthy tick.

    Known limit: a claim abandoned because its schedule was deleted is never reported again by
    the engine; it counts until this replica stops leading.
    """

    def __init__(self, *, lease_ttl: timedelta, registry: CollectorRegistry | None = None,
                 monotonic: Callable[[], float] = time.monotonic,
                 shard_leases: Sequence[str] = (),
                 read_status: Callable[[], StatusReading] | None = None) -> None:
        client = _client()
        #: With shards, each shard's lease name -> its index (core.rules.shards); empty with one.
        self._shards = {name: index for index, name in enumerate(shard_leases)}
        #: Tokens of the leases held now, by lease name.
        self._held: dict[str, int] = {}
        self.registry: CollectorRegistry = registry or client.CollectorRegistry()
        self._lease_ttl = lease_ttl
        self._mono = monotonic
        self._lock = threading.Lock()  # the exporter's thread reads what the loop writes
        self._pending: dict[str, datetime] = {}
        self._store_anchor: tuple[datetime, float] | None = None
        reg = self.registry
        self.leader = client.Gauge(
            "goatbeat_leader", "1 while this replica holds the lease and dispatches, else 0",
            registry=reg)
        self.token = client.Gauge(
            "goatbeat_fencing_token", "Fencing token this replica holds (0 when it does not lead)",
            registry=reg)
        self.shard_leader = self.shard_token = None
        if self._shards:
            # Only with shards, so that a deployment of one shard exports what it always did.
            self.shard_leader = client.Gauge(
                "goatbeat_shard_leader", "1 while this replica leads the shard, else 0",
                ["shard"], registry=reg)
            self.shard_token = client.Gauge(
                "goatbeat_shard_fencing_token",
                "Fencing token this replica holds on the shard (0 when it does not lead it)",
                ["shard"], registry=reg)
            for index in self._shards.values():
                self.shard_leader.labels(shard=str(index)).set(0)
                self.shard_token.labels(shard=str(index)).set(0)
        self.claims_total = client.Counter(
            "goatbeat_claims", "Occurrences claimed by this replica", registry=reg)
        self.submissions_total = client.Counter(
            "goatbeat_submissions", "Submission attempts accepted by the broker", registry=reg)
        self.submit_failures_total = client.Counter(
            "goatbeat_submit_failures", "Submission attempts refused by the broker (retried)",
            registry=reg)
        self.set_aside_total = client.Counter(
            "goatbeat_schedules_set_aside",
            "Times a schedule was set aside because it cannot run as stored", registry=reg)
        self.missed_total = client.Counter(
            "goatbeat_missed", "Grid points that will never run (misfire policy)", registry=reg)
        self.skipped_total = client.Counter(
            "goatbeat_skipped",
            "Occurrences recorded as skipped because their previous run had not finished "
            "(overlap policy skip or buffer_one)", registry=reg)
        self.pauses_total = client.Counter(
            "goatbeat_schedule_pauses",
            "Times a schedule paused itself after failed runs in a row", registry=reg)
        self.resent_total = client.Counter(
            "goatbeat_runs_resent",
            "Runs sent again because no worker started them within their start timeout "
            "(run tracking)", registry=reg)
        self.lateness = client.Histogram(
            "goatbeat_lateness_seconds",
            "Seconds from an occurrence's due instant to the broker accepting it",
            buckets=LATENESS_BUCKETS, registry=reg)
        self.runs_total = client.Counter(
            "goatbeat_runs",
            "Runs that ended, by outcome (succeeded, failed, revoked, rejected, lost, unknown), "
            "as the "
            "leader settled them (each run once across the cluster's leaders)",
            ["outcome"], registry=reg)
        for outcome in ENDED_STATE_VALUES:
            self.runs_total.labels(outcome=outcome)  # every series exists from the start, at 0
        self.runtime = client.Histogram(
            "goatbeat_run_runtime_seconds",
            "Seconds a run ran on its worker, from its start to its end (runs with a runtime)",
            buckets=RUNTIME_BUCKETS, registry=reg)
        self.alerts_total = client.Counter(
            "goatbeat_alerts",
            "Alert changes by rule (missed, late, failed, lost, overrun, silent) and action "
            "(open, repeat, resolve), as the leader wrote them (each once across the cluster's "
            "leaders)", ["rule", "action"], registry=reg)
        for rule in AlertRule:
            for action in ("open", "repeat", "resolve"):
                self.alerts_total.labels(rule=rule.value, action=action)
        self.webhook_deliveries = client.Counter(
            "goatbeat_webhook_deliveries",
            "Attempts to deliver an outbox event to the webhooks, by outcome (delivered: every "
            "webhook took it; failed: retried later)", ["outcome"], registry=reg)
        for outcome in ("delivered", "failed"):
            self.webhook_deliveries.labels(outcome=outcome)
        self.oldest_claim_age = client.Gauge(
            "goatbeat_oldest_unsubmitted_claim_age_seconds",
            "Age of the oldest claim this leader has not yet had accepted by the broker",
            registry=reg)
        self.oldest_claim_age.set_function(self.oldest_unsubmitted_age)
        if read_status is not None:
            reg.register(_StatusCollector(client, read_status))

    # -- EngineObserver ------------------------------------------------------------------
    def lease_acquired(self, grant: LeaseGrant) -> None:
        self._held[grant.name] = grant.token
        self._show_leases(grant.name)
        with self._lock:
            # The grant expires one ttl after the database's now() at acquisition.
            self._store_anchor = (grant.expires_at - self._lease_ttl, self._mono())

    def lease_lost(self, name: str, holder: str, reason: str) -> None:
        self._held.pop(name, None)
        self._show_leases(name)
        with self._lock:
            # Claims still pending are the next leader's to submit and to report.
            self._pending.clear()

    def _show_leases(self, changed: str) -> None:
        """goatbeat_leader: 1 while leading (any shard); the token shown is that of the lowest
        shard held."""
        held = sorted(self._held.items(), key=lambda item: self._shards.get(item[0], 0))
        self.leader.set(1 if held else 0)
        self.token.set(held[0][1] if held else 0)
        index = self._shards.get(changed)
        if index is not None and self.shard_leader is not None \
                and self.shard_token is not None:
            token = self._held.get(changed)
            self.shard_leader.labels(shard=str(index)).set(0 if token is None else 1)
            self.shard_token.labels(shard=str(index)).set(token or 0)

    def claimed(self, dispatches: Sequence[Dispatch]) -> None:
        self.claims_total.inc(len(dispatches))
        if not dispatches:
            return
        with self._lock:
            for dispatch in dispatches:
                self._pending[dispatch.key] = dispatch.execution.claimed_at
            latest = max(d.execution.claimed_at for d in dispatches)
            self._store_anchor = (latest, self._mono())

    def missed(self, schedule_name: str, count: int) -> None:
        self.missed_total.inc(count)

    def set_aside(self, schedule_name: str, reason: str) -> None:
        self.set_aside_total.inc()

    def skipped(self, executions: Sequence[Execution]) -> None:
        self.skipped_total.inc(len(executions))

    def paused(self, schedule_name: str, reason: str) -> None:
        self.pauses_total.inc()

    def runs_resent(self, executions: Sequence[Execution]) -> None:
        self.resent_total.inc(len(executions))

    def runs_ended(self, executions: Sequence[Execution]) -> None:
        for execution in executions:
            if execution.run_state is None:
                continue
            self.runs_total.labels(outcome=execution.run_state.value).inc()
            if execution.runtime is not None:
                self.runtime.observe(execution.runtime.total_seconds())

    def alerts_changed(self, events: Sequence[AlertEvent]) -> None:
        for event in events:
            self.alerts_total.labels(rule=event.alert.rule.value, action=event.action).inc()

    def submitted(self, records: Sequence[OccurrenceRecord]) -> None:
        with self._lock:
            for record in records:
                if record.error is None or record.abandoned:
                    # Accepted, or given up: either way no longer owed to the broker.
                    self._pending.pop(record.key, None)
                else:
                    # A predecessor's claim is first seen here, when resubmitting it fails.
                    self._pending.setdefault(record.key, record.claimed_at)
        for record in records:
            if record.error is not None:
                self.submit_failures_total.inc()
                continue
            self.submissions_total.inc()
            if record.lateness is not None:
                self.lateness.observe(record.lateness.total_seconds())

    def webhook_attempted(self, delivered: bool) -> None:
        """One event's delivery attempt ended (from the webhooks' thread)."""
        self.webhook_deliveries.labels(outcome="delivered" if delivered else "failed").inc()

    # -- derived -------------------------------------------------------------------------
    def oldest_unsubmitted_age(self) -> float:
        """Seconds since the oldest pending claim was made, by the database clock (0 if none)."""
        with self._lock:
            if not self._pending or self._store_anchor is None:
                return 0.0
            oldest = min(self._pending.values())
            anchor, at = self._store_anchor
            store_now = anchor + timedelta(seconds=self._mono() - at)
        return max(0.0, (store_now - oldest).total_seconds())


class _StatusCollector:
    """``goatbeat_schedules`` by state and ``goatbeat_standbys``, read when scraped: what the
    database holds, the same on every replica. A failed read leaves them out of that scrape
    (a gap, rather than a value that is not true)."""

    def __init__(self, client: ModuleType, read: Callable[[], StatusReading]) -> None:
        self._client = client
        self._read = read

    def describe(self) -> list[Any]:
        # Registering must not read the database.
        return []

    def collect(self) -> Iterator[Any]:
        try:
            by_state, standbys = self._read()
        except Exception as exc:  # a StoreError, or anything else: never fail the scrape
            logger.warning("metrics: cannot read the schedules' states: %s", exc,
                           extra={"action": "metrics_read_failed"})
            return
        states = self._client.metrics_core.GaugeMetricFamily(
            "goatbeat_schedules", "Schedules in each state (enabled, paused, paused until, "
            "set aside, ended), by the database", labels=["state"])
        for state in State:
            states.add_metric([state.value], by_state.get(state, 0))
        yield states
        yield self._client.metrics_core.GaugeMetricFamily(
            "goatbeat_standbys", "Live replicas leading nothing, ready to take over",
            value=standbys)


class MetricsExporter:
    """A :class:`GoatbeatMetrics` served over HTTP (``GET /metrics``) from a daemon thread."""

    def __init__(self, metrics: GoatbeatMetrics, server: WSGIServer,
                 thread: threading.Thread) -> None:
        self.metrics = metrics
        self._server: WSGIServer | None = server
        self._thread = thread
        self.port: int = server.server_port

    @property
    def observer(self) -> GoatbeatMetrics:
        return self.metrics

    @classmethod
    def start(cls, *, port: int, lease_ttl: timedelta, addr: str = "127.0.0.1",
              monotonic: Callable[[], float] = time.monotonic,
              shard_leases: Sequence[str] = (),
              read_status: Callable[[], StatusReading] | None = None,
              health: HealthEndpoints | None = None) -> MetricsExporter:
        """Serve a fresh registry on ``addr:port`` (port 0 picks a free one: read ``.port``),
        with ``health``'s ``/healthz`` and ``/readyz`` beside ``/metrics`` when given.

        Raises ConfigurationError when prometheus-client is missing or the port cannot be bound.
        """
        client = _client()
        metrics = GoatbeatMetrics(lease_ttl=lease_ttl, monotonic=monotonic,
                                  shard_leases=shard_leases, read_status=read_status)
        app = client.make_wsgi_app(metrics.registry)
        if health is not None:
            app = health.wrap(app)
        try:
            server, thread = serve(app, addr=addr, port=port)
        except OSError as exc:
            raise ConfigurationError(
                [Problem(SETTING, f"cannot serve metrics on {addr}:{port}: {exc}")]
            ) from exc
        exporter = cls(metrics, server, thread)
        logger.info("goatbeat metrics on http://%s:%d/metrics", addr, exporter.port,
                    extra={"action": "metrics_started"})
        return exporter

    def close(self) -> None:
        """Stop serving and free the port (idempotent)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        self._thread.join(STOP_TIMEOUT)
