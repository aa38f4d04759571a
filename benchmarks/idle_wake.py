"""Where an idle leader's wakes spend their CPU, part by part, on PostgreSQL.

    python benchmarks/idle_wake.py [--wakes 60] [--schedules 10000]

Creates its own database on the server of ``GOATBEAT_BENCH_PG_URL`` (default: the test server),
loads ``--schedules`` schedules none due for an hour (as ``compare.py --bench idle`` does), and
drives one leader (lease ttl 30 s, renewed every 10 s: goatbeat's defaults) wake by wake on a
monotonic clock moved 10 s at each, as the beat loop would after each sleep. Before each wake
it walks a few megabytes of objects, so that the wake starts from cold caches as one does after
10 s asleep (a wake's calls take several times longer cold than in a loop). It prints each
part's thread CPU time, in total over the wakes and per call: the wait on the LISTEN socket,
the renewal (its statement apart), the member rows' listing (only when one ran out), the
checks of a quiet wake (pruning among them), the alert looks and their page reads, and any
full look (an idle leader makes none). Parts nest: a part's time includes the parts it calls.
Dropped at the end. A plain script that reports figures, not a test; ``compare.py --bench
idle`` measures the whole process.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import populate
import sqlalchemy as sa
from scratch import scratch_database

from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.store.postgres import PostgresStore
from goatbeat_celery.testing import build_engine

RENEW_EVERY = 10.0


class SteppedClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def timed(spent: dict[str, list[int]], obj: Any, attribute: str, label: str) -> None:
    """Replace ``obj.attribute`` by a wrapper adding each call's thread CPU to ``spent``."""
    call: Callable[..., Any] = getattr(obj, attribute)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time_ns()
        try:
            return call(*args, **kwargs)
        finally:
            spent[label].append(time.thread_time_ns() - started)

    setattr(obj, attribute, wrapper)


def cool_caches(junk: list[str]) -> None:
    total = 0
    for item in junk:
        total += len(item)
    {index: index for index in range(200_000)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wakes", type=int, default=60)
    parser.add_argument("--schedules", type=int, default=10_000)
    args = parser.parse_args()
    spent: dict[str, list[int]] = defaultdict(list)
    junk = [str(index) for index in range(400_000)]
    with scratch_database("goatbeat_idle_wake") as url:
        engine_sa = sa.create_engine(url)
        populate.goatbeat(engine_sa, populate.Plan(
            count=args.schedules, every=7200, first_due=time.time() + 3600, spread=3600))
        engine_sa.dispose()
        store = PostgresStore(url)
        clock = SteppedClock()
        engine = build_engine(store, monotonic=clock, holder="idle", runs=store, alerts=store,
                              settings=Settings(lease_ttl=30, lease_renew_interval=RENEW_EVERY))
        # Taking the lease, the config sync, the first full look and alert cycle: each
        # statement's first run also compiles it.
        for _ in range(6):
            engine.wait(0.01)
            engine.tick()
            clock.now += RENEW_EVERY
        # The loading and the warm-up leave the collector a full collection (50 ms) owed: paid
        # here, not by whichever measured wake would trip it.
        gc.collect()
        timed(spent, store, "wait", "wait on the LISTEN socket")
        timed(spent, engine._leadership, "renew", "renewal, its statement included")
        timed(spent, store, "acquire_watching", "renewal statement (lease and member row)")
        timed(spent, store, "alert_evidence", "alert page read (a full cycle every 300 s)")
        timed(spent, store, "list_leases", "member rows listed (when one ran out)")
        timed(spent, engine._wakes, "ask", "what waits, asked of the store")
        timed(spent, engine._housekeeping, "all_due", "quiet wake: pruning, lost runs, alerts")
        timed(spent, engine._housekeeping, "look_at_alerts", "alert look")
        timed(spent, engine._dispatcher, "dispatch", "full look")
        timed(spent, store, "prune", "pruning (every 10 minutes)")
        timed(spent, engine, "tick", "tick, all of it")
        try:
            for _ in range(args.wakes):
                clock.now += RENEW_EVERY
                cool_caches(junk)
                engine.wait(0.001)
                engine.tick()
        finally:
            store.close()
    total = sum(spent["tick, all of it"]) + sum(spent["wait on the LISTEN socket"])
    minutes = args.wakes * RENEW_EVERY / 60
    print(f"{args.wakes} wakes ({minutes:.0f} idle minutes), {args.schedules:,} schedules: "
          f"{total / 1e6:.1f} ms of CPU, {total / 1e6 / minutes:.2f} ms a minute, "
          f"{total / args.wakes / 1000:.0f} µs a wake")
    print("| part | calls | ms in all | µs per call (median) |")
    print("|---|---|---|---|")
    for label, samples in sorted(spent.items(), key=lambda item: -sum(item[1])):
        print(f"| {label} | {len(samples)} | {sum(samples) / 1e6:.2f} | "
              f"{statistics.median(samples) / 1000:.0f} |")


if __name__ == "__main__":
    main()
