"""What judging alerts costs the leader, on PostgreSQL.

    python benchmarks/alerts.py [--schedules 2000] [--runs 25] [--failing 0.1] [--reps 5]

Creates its own database on the server of ``GOATBEAT_BENCH_PG_URL`` (default: the test server),
drops it at the end. ``--schedules`` schedules, each with ``--runs`` executions that ended
(a ``--failing`` share of the schedules with their newest three runs failed, the others
succeeded), then the leader's looks (``AlertWatcher.look``: one page of ``alert_batch``
schedules with their newest runs, judged, and the changes written in one fenced transaction),
a full cycle over every schedule at a time:

1. the first cycle, which opens an alert for each failing schedule;
2. full cycles that find nothing new (each after an announced change: every schedule with runs
   is read), what a cycle costs after an edit, at a new lease, or every 5 minutes;
3. the cycles between (nothing announced, no run in flight or claimed since): only the
   schedules with an open alert are read.

For each: statements, milliseconds of wall time, and CPU milliseconds of this process (reading
the rows and judging them) per look and per schedule. A plain script that reports figures,
not a test.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from scratch import scratch_database, store_engines

from goatbeat_celery.core.loop.alerts import AlertWatcher
from goatbeat_celery.core.loop.observer import NullObserver
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from goatbeat_celery.store.postgres import PostgresStore
from goatbeat_celery.store.schema import execution_table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schedules", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--failing", type=float, default=0.1)
    parser.add_argument("--batch", type=int, default=Settings().alert_batch)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # one line per alert opened: not what is measured
    with scratch_database("goatbeat_alert_bench") as url:
        run(url, args)


def populate(store: PostgresStore, engine: sa.Engine, args: argparse.Namespace) -> None:
    now = store.now()
    every = timedelta(minutes=1)
    failing = int(args.schedules * args.failing)
    rows: list[dict[str, Any]] = []
    for index in range(args.schedules):
        spec = ScheduleSpec(name=f"s{index:05d}", task="bench.tick",
                            trigger=TriggerSpec(kind="interval", params={"every": 60}))
        store.create_schedule(spec, next_occurrence_at=now + every, next_run_at=now + every)
        for back in range(args.runs):
            due = now - every * (back + 1)
            state = "failed" if index < failing and back < 3 else "succeeded"
            rows.append({"key": f"{spec.name}:{due.isoformat()}", "schedule_name": spec.name,
                         "occurrence_at": due, "due_at": due, "token": 1, "state": "submitted",
                         "claimed_at": due, "submitted_at": due + timedelta(seconds=0.2),
                         "attempts": 1, "missed": 0, "manual": False, "run_state": state,
                         "run_attempts": 1, "started_at": due + timedelta(seconds=0.3),
                         "finished_at": due + timedelta(seconds=1.3),
                         "runtime": timedelta(seconds=1),
                         "run_error": "ValueError: boom" if state == "failed" else None})
        if len(rows) >= 10_000:
            with engine.begin() as conn:
                conn.execute(sa.insert(execution_table), rows)
            rows = []
    if rows:
        with engine.begin() as conn:
            conn.execute(sa.insert(execution_table), rows)
    with engine.begin() as conn:
        conn.execute(sa.text("ANALYZE"))


def run(url: str, args: argparse.Namespace) -> None:
    store = PostgresStore(url)
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    populate(store, engine, args)
    statements = [0]
    for target in store_engines(store):
        sa.event.listen(target, "after_cursor_execute",
                        lambda *_: statements.__setitem__(0, statements[0] + 1))
    grant = store.acquire("default", "bench", timedelta(minutes=30))
    assert grant is not None
    settings = Settings(alert_batch=args.batch, track_runs=True)
    watcher = AlertWatcher(store=store, settings=settings, observer=NullObserver())
    # How many schedules each cycle read, counted around the store's evidence call.
    watcher_reads: list[int] = []
    evidence = store.alert_evidence

    def counted(**kwargs: Any) -> Any:
        page = evidence(**kwargs)
        if kwargs.get("after") is None:
            watcher_reads.append(0)
        watcher_reads[-1] += len(page.schedules)
        return page

    store.alert_evidence = counted  # type: ignore[method-assign]
    tracked = store.now() - timedelta(days=1)

    def cycle(full: bool = False) -> dict[str, Any]:
        if full:
            watcher.changes_heard()
        looks: list[tuple[float, float, int]] = []
        changes = 0
        while True:
            before, wall, cpu = statements[0], time.perf_counter(), time.process_time()
            changes += len(watcher.look(grant, tracked, full_looks=0))
            looks.append((time.perf_counter() - wall, time.process_time() - cpu,
                          statements[0] - before))
            if watcher.cycle_done:
                break
        walls = [wall for wall, _, _ in looks]
        return {"looks": len(looks), "changes_written": changes,
                "ms_per_look_median": round(statistics.median(walls) * 1000, 1),
                "ms_per_look_max": round(max(walls) * 1000, 1),
                "cpu_ms_per_look_median": round(
                    statistics.median(c for _, c, _ in looks) * 1000, 1),
                "schedules_read": watcher_reads.pop(),
                "statements_per_look": sorted({n for _, _, n in looks}),
                "ms_per_schedule": round(sum(walls) * 1000 / args.schedules, 3)}

    figures: dict[str, Any] = {"schedules": args.schedules, "runs_each": args.runs,
                               "failing": int(args.schedules * args.failing),
                               "alert_batch": args.batch,
                               "first_cycle": cycle(),
                               "full_cycles": [cycle(full=True) for _ in range(args.reps)],
                               "quiet_cycles": [cycle() for _ in range(args.reps)]}
    store.close()
    engine.dispose()
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
