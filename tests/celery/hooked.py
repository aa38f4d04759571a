"""Beat watched by a real monitoring client, in a process of its own (each client patches Celery
for the life of the process): ``python -m tests.celery.hooked sentry|ddtrace|otel DIR``.

Each scenario runs a Celery app on the memory broker with an embedded worker, goatbeat on a
SQLite store in DIR (a leader and a standby replica), and prints one JSON object of what the
client captured. ``sentry`` first runs Celery's own beat on the same schedules, for comparison.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from tests.support.waiting import wait_for

#: Every wait below is for work a 2-core machine does in well under a second (a tick, a
#: message through the memory broker, a task run); 30 s is room for a machine under load.
TIMEOUT = 30.0


def make_app(directory: Path, beat_schedule: dict[str, Any]) -> Any:
    from celery import Celery

    app = Celery("hooked", broker="memory://", backend="cache+memory://")
    app.conf.update(
        timezone="UTC",
        goatbeat_database_url=f"sqlite:///{directory / 'goatbeat.sqlite3'}",
        goatbeat_lease_ttl=3,
        goatbeat_lease_renew_interval=1,
        goatbeat_max_interval=0.1,
        beat_schedule=beat_schedule,
        worker_hijack_root_logger=False,
    )
    done: list[str] = []

    @app.task(name="hooked.work", bind=True)
    def work(self: Any, fail: bool = False) -> str:
        done.append(self.request.id)
        if fail:
            raise ValueError("this run fails, as asked")
        return "done"

    app.done = done  # type: ignore[attr-defined]
    return app


def start_worker(app: Any) -> Any:
    from celery.contrib.testing.worker import start_worker as embedded

    return embedded(app, perform_ping_check=False, loglevel="WARNING", shutdown_timeout=10)


class Replicas:
    """A leader and a standby goatbeat replica on one store, ticked in turn."""

    def __init__(self, app: Any) -> None:
        from goatbeat_celery.beat.scheduler import Scheduler

        self.leader = Scheduler(app=app)
        self.leader.tick()
        assert self.leader.engine is not None and self.leader.engine.is_leader()
        self.standby = Scheduler(app=app)
        self.standby.tick()
        assert self.standby.engine is not None and not self.standby.engine.is_leader()

    def tick(self) -> None:
        self.leader.tick()
        self.standby.tick()

    def close(self) -> None:
        self.standby.close()
        self.leader.close()


def sent_keys(app: Any) -> dict[str, list[str]]:
    from goatbeat_celery.store import open_store

    store = open_store(app.conf.goatbeat_database_url)
    try:
        found: dict[str, list[str]] = {}
        for execution in store.executions(limit=1000):
            if execution.submitted_at is not None:
                found.setdefault(execution.schedule_name, []).append(execution.key)
        return found
    finally:
        store.close()


# -- Sentry Crons ---------------------------------------------------------------------------
MINUTE = 60.0
SENTRY_NAMES = ("cron-config", "interval-config", "cron-api", "interval-api", "cron-paris")


def sentry(directory: Path) -> dict[str, Any]:
    import sentry_sdk
    from celery import beat
    from celery.schedules import crontab
    from sentry_sdk.integrations.celery import CeleryIntegration
    from sentry_sdk.transport import Transport

    envelopes: list[Any] = []
    lock = threading.Lock()

    class Capture(Transport):  # type: ignore[misc]
        def capture_envelope(self, envelope: Any) -> None:
            with lock:
                envelopes.append(envelope)

    sentry_sdk.init(dsn="https://public@sentry.invalid/1", transport=Capture,
                    integrations=[CeleryIntegration(monitor_beat_tasks=True)],
                    default_integrations=False, traces_sample_rate=0)

    def checkins() -> list[dict[str, Any]]:
        with lock:
            return [item.payload.json for envelope in envelopes for item in envelope.items
                    if item.type == "check_in"]

    # Celery's own beat: the two config entries, and config twins of the API schedules.
    default_schedule = {
        "cron-config": {"task": "hooked.work", "schedule": crontab(minute="*")},
        "interval-config": {"task": "hooked.work", "schedule": MINUTE, "kwargs": {"fail": True}},
        "cron-api": {"task": "hooked.work", "schedule": crontab(minute="*")},
        "interval-api": {"task": "hooked.work", "schedule": MINUTE},
    }
    from goatbeat_celery.api import Schedules

    app = make_app(directory, default_schedule)
    with start_worker(app):
        celery_beat = beat.Scheduler(app=app)
        for entry in celery_beat.schedule.values():
            entry.last_run_at = datetime.now(timezone.utc) - timedelta(minutes=2)  # due now
        wait_for(lambda: len(app.done) >= 4, "Celery beat's four runs", tick=celery_beat.tick,
                 timeout=TIMEOUT)
        wait_for(lambda: len(checkins()) >= 8, "Celery beat's eight check-ins", timeout=TIMEOUT)
        celery_beat.close()
        default = checkins()
        with lock:
            envelopes.clear()
        app.done.clear()

        # goatbeat: the same two config entries, the API schedules made through the API, and one
    # more in a zone of its own.
        app.conf.beat_schedule = {name: default_schedule[name]
                                  for name in ("cron-config", "interval-config")}
        replicas = Replicas(app)
        try:
            schedules = Schedules.from_app(app)
            try:
                schedules.create("cron-api", "hooked.work", cron="* * * * *")
                schedules.create("interval-api", "hooked.work", every=MINUTE)
                schedules.create("cron-paris", "hooked.work", cron="* * * * *",
                                 timezone="Europe/Paris")
                # Each schedule's latest occurrence, run now rather than at the next minute.
                now = schedules.store.now()
                for name in SENTRY_NAMES:
                    schedules.backfill(name, now - timedelta(seconds=MINUTE - 0.001), now)
            finally:
                schedules.close()
            wait_for(lambda: len(app.done) >= len(SENTRY_NAMES), "goatbeat's runs",
                     tick=replicas.tick, timeout=TIMEOUT)
            wait_for(lambda: len(checkins()) >= 2 * len(app.done), "goatbeat's check-ins",
                     tick=replicas.tick, timeout=TIMEOUT)
        finally:
            replicas.close()
    return {"default": default, "goatbeat": checkins(), "sent": sent_keys(app)}


def two_runs_traced(directory: Path, traced: Callable[[Any], bool]) -> Any:
    """An every-second schedule run twice by goatbeat's replicas and a worker, then the wait
    until ``traced(app)`` says the tracer holds the worker's spans of every run; the app."""
    app = make_app(directory, {"every-second": {"task": "hooked.work", "schedule": 1.0}})
    with start_worker(app):
        replicas = Replicas(app)
        try:
            wait_for(lambda: len(app.done) >= 2, "two runs", tick=replicas.tick, timeout=TIMEOUT)
        finally:
            replicas.close()
        wait_for(lambda: traced(app), "the worker's spans", timeout=TIMEOUT)
    return app


# -- Datadog ---------------------------------------------------------------------------------
def ddtrace(directory: Path) -> dict[str, Any]:
    import ddtrace as dd
    from ddtrace.trace import TraceFilter, tracer

    spans: list[Any] = []
    lock = threading.Lock()

    class Capture(TraceFilter):  # type: ignore[misc]
        def process_trace(self, trace: list[Any]) -> None:
            with lock:
                spans.extend(trace)
            return None  # kept here, never sent to an agent

    tracer.configure(trace_processors=[Capture()])
    # The worker continues the publisher's trace only with distributed tracing on (off by
    # default in ddtrace's Celery integration; DD_CELERY_DISTRIBUTED_TRACING=true).
    dd.config.celery["distributed_tracing"] = True
    dd.patch(celery=True)
    def runs_traced(app: Any) -> bool:
        with lock:
            return sum(s.name == "celery.run" for s in spans) >= len(app.done)

    app = two_runs_traced(directory, runs_traced)
    with lock:
        found = [{"name": s.name, "resource": s.resource, "trace_id": str(s.trace_id),
                  "span_id": str(s.span_id), "parent_id": str(s.parent_id),
                  "task_id": s.get_tag("celery.id")} for s in spans]
    return {"spans": found, "sent": sent_keys(app), "done": list(app.done)}


# -- OpenTelemetry ---------------------------------------------------------------------------
def otel(directory: Path) -> dict[str, Any]:
    from opentelemetry import trace
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    CeleryInstrumentor().instrument()
    app = two_runs_traced(directory, lambda app: sum(
        s.name.startswith("run/") for s in exporter.get_finished_spans()) >= len(app.done))
    found = [{"name": s.name, "trace_id": f"{s.context.trace_id:032x}",
              "span_id": f"{s.context.span_id:016x}",
              "parent_id": None if s.parent is None else f"{s.parent.span_id:016x}",
              "start": s.start_time, "end": s.end_time, "attributes": dict(s.attributes or {})}
             for s in exporter.get_finished_spans()]
    return {"spans": found, "sent": sent_keys(app), "done": list(app.done)}


SCENARIOS = {"sentry": sentry, "ddtrace": ddtrace, "otel": otel}


def main(argv: list[str]) -> None:
    scenario, directory = argv
    result = SCENARIOS[scenario](Path(directory))
    sys.stdout.flush()
    print("RESULT " + json.dumps(result, default=str))
    sys.stdout.flush()
    os._exit(0)  # the clients' background threads (flushers, writers) have nothing to do


if __name__ == "__main__":
    os.environ.setdefault("DD_INSTRUMENTATION_TELEMETRY_ENABLED", "false")
    os.environ.setdefault("DD_REMOTE_CONFIGURATION_ENABLED", "false")
    os.environ.setdefault("DD_TRACE_STARTUP_LOGS", "false")
    main(sys.argv[1:])
