"""Claim throughput and idle-tick cost of the PostgreSQL store.

    python benchmarks/claims.py [--due 100000] [--idle 1000000] [--explain]

Creates its own database on the server of ``GOATBEAT_BENCH_PG_URL`` (default: the test server),
drops it at the end, and prints:

1. occurrences claimed and submitted per second, for ``--due`` due interval schedules claimed in
   batches of 500 through the engine's real path (due_schedules → misfire planning → claim →
   submit to a submitter that accepts at once → mark_submitted); target >= 10,000/s;
   (measured twice: driving the store directly, planning with ``plan_misfires``, and through
   ``Engine.tick()``, which adds the engine's own work);
2. with ``--idle`` schedules of which none is due, the cost of one idle leader tick: the store
   calls it makes (take_pending + due_schedules) and a whole Engine.tick(); target < 5 ms.

A plain script that reports figures, not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from goatbeat_celery.core.loop.engine import Engine
from goatbeat_celery.core.rules.misfire import plan_misfires
from goatbeat_celery.core.rules.triggers import TriggerRegistry
from goatbeat_celery.core.types.claims import PlannedClaim
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from goatbeat_celery.store import upgrade_schema
from goatbeat_celery.store.postgres import PostgresStore
from goatbeat_celery.testing import RecordingSubmitter

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
EVERY = 3600.0
BATCH = 500
HOLDER = "bench"


def load(engine: sa.Engine, count: int, *, next_run_at: datetime, spread: timedelta) -> float:
    """Insert ``count`` interval schedules server-side in one statement; returns seconds."""
    spec = ScheduleSpec(name="bench", task="bench.tick",
                        trigger=TriggerSpec(kind="interval", params={"every": EVERY}))
    started = time.perf_counter()
    with engine.begin() as connection:
        connection.execute(sa.text("TRUNCATE goatbeat_schedule, goatbeat_execution"))
        connection.execute(
            sa.text(
                """
                INSERT INTO goatbeat_schedule (
                    name, task, args, kwargs, options, trigger, enabled, source, spec_hash,
                    next_occurrence_at, next_run_at, total_runs, total_missed, version,
                    created_at, updated_at)
                SELECT 'bench-' || lpad(i::text, 7, '0'), 'bench.tick', '[]', '{}', '{}',
                       CAST(:trigger AS jsonb), true, 'api', :hash,
                       :base + (i % :buckets) * :step, :base + (i % :buckets) * :step,
                       0, 0, 1, now(), now()
                FROM generate_series(1, :count) AS i
                """
            ),
            {
                "trigger": json.dumps(spec.trigger.to_json()),
                "hash": spec.spec_hash(),
                "base": next_run_at,
                "buckets": max(1, int(spread.total_seconds())),
                "step": timedelta(seconds=1),
                "count": count,
            },
        )
        connection.execute(sa.text("ANALYZE goatbeat_schedule"))
        connection.execute(sa.text("ANALYZE goatbeat_execution"))
    return time.perf_counter() - started


def engine_for(store: PostgresStore, submitter: RecordingSubmitter) -> Engine:
    settings = Settings(batch_size=BATCH, misfire_grace=timedelta(hours=1),
                        lease_ttl=timedelta(seconds=60), lease_renew_interval=timedelta(seconds=20))
    return Engine(store=store, lease=store, submitter=submitter, settings=settings,
                  holder=HOLDER)


def bench_claims(store: PostgresStore, engine: sa.Engine, count: int) -> None:
    for label, drive in (("store path (due_schedules, plan_misfires, claim, mark_submitted)",
                          drive_store),
                         ("Engine.tick() with a no-op submitter", drive_engine)):
        # Every schedule is due at the same grid point (the last full hour), as when thousands
        # of schedules share a round time; all are within the grace: one occurrence each.
        grid_point = store.now().replace(minute=0, second=0, microsecond=0)
        seconds = load(engine, count, next_run_at=grid_point, spread=timedelta(0))
        print(f"loaded {count:,} due schedules in {seconds:.1f}s")
        store.due_schedules(1)  # open the pool's connection before measuring its server's CPU
        database = engine.url.database or ""
        server_before = backend_cpu(engine, database)
        cpu_started = time.process_time()
        started = time.perf_counter()
        drive(store, count)
        elapsed = time.perf_counter() - started
        client_cpu = time.process_time() - cpu_started
        server_cpu = backend_cpu(engine, database) - server_before
        with engine.connect() as connection:
            submitted = connection.execute(sa.text(
                "SELECT count(*) FROM goatbeat_execution WHERE state = 'submitted'")).scalar_one()
        rate = submitted / elapsed
        verdict = "ok" if rate >= 10_000 else "BELOW TARGET"
        print(f"{label}: claimed+submitted {submitted:,} occurrences in {elapsed:.2f}s "
              f"(batches of {BATCH}): {rate:,.0f}/s [target >= 10,000/s: {verdict}]")
        # On a shared machine the wall clock includes waiting for a CPU; the CPU used tells
        # what an idle one would do (client and server take turns at each round trip).
        busy = client_cpu + server_cpu
        print(f"  cpu: client {client_cpu:.2f}s + server {server_cpu:.2f}s = {busy:.2f}s "
              f"({submitted / busy:,.0f} occurrences per CPU-second); "
              f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")


def drive_store(store: PostgresStore, count: int) -> None:
    """The claim path without the engine around it: what the store itself sustains."""
    grant = store.acquire("bench-store", HOLDER, timedelta(seconds=300))
    assert grant is not None
    triggers = TriggerRegistry.default()
    grace = timedelta(hours=1)
    while True:
        batch = store.due_schedules(BATCH)
        if not batch.schedules:
            break
        claims = []
        for schedule in batch.schedules:
            first = schedule.next_occurrence_at
            assert first is not None
            plan = plan_misfires(trigger=triggers.build(schedule.spec.trigger), first=first,
                                 now=batch.now, grace=grace)
            claims.append(PlannedClaim(
                schedule_name=schedule.name, version=schedule.version,
                occurrences=tuple((point, point) for point in plan.run), missed=plan.missed,
                next_occurrence_at=plan.next_occurrence, next_run_at=plan.next_occurrence,
            ))
        result = store.claim(claims, lease=grant)
        store.mark_submitted([dispatch.key for dispatch in result.dispatches])
    store.release(grant)


def drive_engine(store: PostgresStore, count: int) -> None:
    """The whole leader loop: lease, planning with the engine's caches, observers, submission
    to a broker that accepts every message at once (the store is measured, not a broker)."""
    submitter = RecordingSubmitter()
    loop = engine_for(store, submitter)
    while True:
        loop.tick()
        if len(submitter.sent) >= count or not store.due_schedules(1).schedules:
            break
    loop.close()


def backend_cpu(engine: sa.Engine, database: str) -> float:
    """CPU seconds used so far by the server processes serving ``database`` (same host only)."""
    with engine.connect() as connection:
        pids = connection.execute(sa.text(
            "SELECT pid FROM pg_stat_activity WHERE datname = :db AND pid <> pg_backend_pid()"),
            {"db": database}).scalars().all()
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:  # another host, or the process ended
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def timed(call: Callable[[], object], rounds: int) -> tuple[float, float]:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def bench_idle(store: PostgresStore, engine: sa.Engine, count: int, rounds: int) -> None:
    later = store.now() + timedelta(days=1)
    seconds = load(engine, count, next_run_at=later, spread=timedelta(days=1))
    print(f"loaded {count:,} schedules, none due, in {seconds:.1f}s")
    grant = store.acquire("bench-idle", HOLDER, timedelta(seconds=300))
    assert isinstance(grant, LeaseGrant)

    def store_calls() -> None:
        store.take_pending(lease=grant, limit=BATCH)
        batch = store.due_schedules(BATCH)
        assert not batch.schedules

    submitter = RecordingSubmitter()
    loop = engine_for(store, submitter)
    loop.tick()  # become leader (and sync nothing) before timing
    assert loop.is_leader()
    for _ in range(20):  # warm the pool and the server's plan cache
        store_calls()
        loop.tick()
    for label, call in (("take_pending + due_schedules", store_calls),
                        ("Engine.tick() (leader, nothing due)", loop.tick)):
        median, p99 = timed(call, rounds)
        verdict = "ok" if median < 5 else "ABOVE TARGET"
        print(f"idle tick over {count:,} schedules, {label}: median {median:.2f} ms, "
              f"p99 {p99:.2f} ms [target < 5 ms: {verdict}]")
    loop.close()
    store.release(grant)


def explain(engine: sa.Engine) -> None:
    statements = {
        "due": "SELECT * FROM goatbeat_schedule WHERE enabled AND next_run_at <= now() "
               "ORDER BY next_run_at, name LIMIT 500",
        "earliest": "SELECT min(next_run_at) FROM goatbeat_schedule WHERE enabled",
        "pending": "SELECT * FROM goatbeat_execution WHERE state = 'claimed' "
                   "ORDER BY claimed_at, key LIMIT 500",
    }
    with engine.connect() as connection:
        for label, statement in statements.items():
            plan = connection.execute(sa.text("EXPLAIN ANALYZE " + statement)).scalars()
            print(f"-- {label}\n   " + "\n   ".join(plan))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--due", type=int, default=100_000)
    parser.add_argument("--idle", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--explain", action="store_true", help="print the plans of hot queries")
    args = parser.parse_args(argv)

    server = make_url(os.environ.get("GOATBEAT_BENCH_PG_URL", DEFAULT_URL)).set(
        drivername="postgresql+psycopg")
    name = f"goatbeat_bench_{os.getpid()}"
    admin = sa.create_engine(server, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    with admin.connect() as connection:
        connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = server.set(database=name).render_as_string(hide_password=False)
    print(f"benchmark database {server.set(database=name).render_as_string()} "
          f"at {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC")
    try:
        upgrade_schema(url)
        raw = sa.create_engine(url, poolclass=sa.NullPool)
        store = PostgresStore(url)
        try:
            if args.due:
                bench_claims(store, raw, args.due)
                if args.explain:
                    explain(raw)
            if args.idle:
                bench_idle(store, raw, args.idle, args.rounds)
                if args.explain:
                    explain(raw)
        finally:
            store.close()
            raw.dispose()
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
