"""Scheduling lateness with and without a webhook that never answers, on PostgreSQL.

    python benchmarks/webhooks.py [--schedules 50] [--seconds 20]

Creates its own database on the server of ``GOATBEAT_BENCH_PG_URL`` (default: the test server)
and drops it at the end. Each scenario runs the real ``goatbeat_celery.Scheduler`` in this
process (a Celery app on the in-memory broker, ``--schedules`` schedules every second) for
``--seconds``, and records the lateness of every run sent (due instant to the broker accepting
it, as ``goatbeat_lateness_seconds`` measures it) through ``goatbeat_occurrence_hook``:

1. ``no webhook``: the outbox is not drained;
2. ``hanging webhook``: ``goatbeat_webhooks`` names a receiver that accepts each connection and
   never answers, while another thread enqueues five events a second: the delivery thread spends
   its life waiting on ``goatbeat_webhook_timeout``.

The figures printed are the lateness percentiles of each scenario and, for the second, how many
delivery attempts timed out meanwhile. A plain script that reports figures, not a test.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import threading
import time
import uuid
from typing import Any

import sqlalchemy as sa
from celery import Celery
from scratch import scratch_database

from goatbeat_celery.beat.scheduler import Scheduler
from goatbeat_celery.core.loop.observer import OccurrenceRecord
from goatbeat_celery.core.types.outbox import OutboxEvent
from goatbeat_celery.store import open_store


class HangingReceiver:
    """Accepts connections and never answers (until closed)."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(128)
        self.port = self.socket.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.socket.settimeout(0.2)
        while not self._stop.is_set():
            try:
                connection, _ = self.socket.accept()
            except OSError:
                continue
            self.accepted.append(connection)  # held open, never read nor answered

    def close(self) -> None:
        self._stop.set()
        for connection in self.accepted:
            connection.close()
        self.socket.close()


def run(url: str, *, schedules: int, seconds: float, hanging: bool) -> dict[str, Any]:
    with sa.create_engine(url, poolclass=sa.NullPool).begin() as connection:
        connection.execute(sa.text("TRUNCATE goatbeat_schedule, goatbeat_execution, "
                                   "goatbeat_lease, goatbeat_outbox"))
    records: list[OccurrenceRecord] = []
    app = Celery("bench", broker="memory://", set_as_current=False)
    app.conf.update(
        goatbeat_database_url=url,
        goatbeat_occurrence_hook=records.append,
        beat_schedule={f"s{i:03d}": {"task": "bench.noop", "schedule": 1.0}
                       for i in range(schedules)},
    )
    receiver = HangingReceiver() if hanging else None
    if receiver is not None:
        app.conf.update(goatbeat_webhooks=[f"http://127.0.0.1:{receiver.port}/hook"],
                        goatbeat_webhook_secret="bench", goatbeat_webhook_timeout=5)
    stop = threading.Event()
    enqueued = 0

    def enqueue() -> None:
        nonlocal enqueued
        store = open_store(url)
        try:
            while not stop.wait(0.2):
                store.enqueue_events([OutboxEvent(event_id=uuid.uuid4().hex,
                                                  kind="bench.event", payload={"n": enqueued})])
                enqueued += 1
        finally:
            store.close()

    feeder = threading.Thread(target=enqueue, daemon=True)
    scheduler = Scheduler(app=app)
    try:
        feeder.start()
        warm_up = time.monotonic() + 3  # the lease, the config sync, the first claims
        while time.monotonic() < warm_up:
            scheduler.tick()
        records.clear()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            scheduler.tick()
    finally:
        stop.set()
        feeder.join(5)
        scheduler.close()
        if receiver is not None:
            receiver.close()
    late = sorted(r.lateness.total_seconds() for r in records
                  if r.error is None and r.lateness is not None)
    failed = 0
    with sa.create_engine(url, poolclass=sa.NullPool).connect() as connection:
        failed = connection.execute(sa.text(
            "SELECT coalesce(sum(attempts), 0) FROM goatbeat_outbox WHERE delivered_at IS NULL"
        )).scalar_one()

    def pct(p: float) -> float:
        return round(late[min(len(late) - 1, int(p * len(late)))] * 1000, 1) if late else 0.0

    return {"scenario": "hanging webhook" if hanging else "no webhook", "runs sent": len(late),
            "seconds": seconds, "lateness ms p50": pct(0.50),
            "p95": pct(0.95), "p99": pct(0.99),
            "max": round(late[-1] * 1000, 1) if late else 0.0,
            "mean": round(statistics.fmean(late) * 1000, 1) if late else 0.0,
            "events enqueued": enqueued, "delivery attempts failed": int(failed)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--schedules", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20)
    args = parser.parse_args()
    with scratch_database("goatbeat_bench_webhooks") as url:
        results = [run(url, schedules=args.schedules, seconds=args.seconds, hanging=hanging)
                   for hanging in (False, True)]
    for result in results:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
