"""What resending runs never started costs the database, on PostgreSQL.

    python benchmarks/resends.py [--runs 500]

Creates its own database on the server of ``GOATBEAT_BENCH_PG_URL`` (default: the test server),
drops it at the end, and counts, with a listener on the store's connections, the statements and
the rows each step writes:

1. the leader's look (``resend_unstarted``) while ``--runs`` runs are unstarted but none is due
   yet: what every heartbeat interval costs while runs are in flight;
2. the look that resends them all, then their resubmission (``take_pending``) and
   ``mark_submitted``: what each resent run costs, against a first send;
3. a worker's check of a delivery sent again (``read_runs`` of one key).

A plain script that reports figures, not a test.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from scratch import scratch_database, store_engines

from goatbeat_celery.core.types.claims import PlannedClaim
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from goatbeat_celery.store.postgres import PostgresStore

TRACKED = datetime(2000, 1, 1, tzinfo=UTC)


class Counting:
    """Statements run on an engine, and the rows the writing ones changed."""

    def __init__(self) -> None:
        self.statements = 0
        self.writes = 0
        self.rows_written = 0

    def attach(self, engine: sa.Engine) -> None:
        sa.event.listen(engine, "after_cursor_execute", self._after)

    def _after(self, conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        self.statements += 1
        head = statement.lstrip().split(None, 1)[0].upper()
        if head in ("UPDATE", "INSERT", "DELETE") or "FOR SHARE" in statement \
                or "FOR UPDATE" in statement:
            self.writes += 1
            if head in ("UPDATE", "INSERT", "DELETE"):
                self.rows_written += max(cursor.rowcount, 0)

    def step(self, call: Callable[[], Any]) -> dict[str, Any]:
        before = (self.statements, self.writes, self.rows_written)
        started = time.perf_counter()
        result = call()
        took = time.perf_counter() - started
        return {"statements": self.statements - before[0],
                "locking_or_writing_statements": self.writes - before[1],
                "rows_written": self.rows_written - before[2],
                "ms": round(took * 1000, 1), "result": result}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=500)
    args = parser.parse_args()
    with scratch_database("goatbeat_resend_bench") as url:
        run(url, args.runs)


def run(url: str, count: int) -> None:
    store = PostgresStore(url)
    counting = Counting()
    for engine in {id(e): e for e in store_engines(store)}.values():
        counting.attach(engine)
    grant = store.acquire("default", "bench", timedelta(minutes=5))
    assert grant is not None
    now = store.now()
    claims = []
    for index in range(count):
        spec = ScheduleSpec(name=f"s{index:05d}", task="bench.tick",
                            trigger=TriggerSpec(kind="interval", params={"every": 60}))
        schedule = store.create_schedule(spec, next_occurrence_at=now, next_run_at=now)
        claims.append(PlannedClaim(
            schedule_name=schedule.name, version=schedule.version,
            occurrences=((now, now),), missed=0, next_occurrence_at=now + timedelta(minutes=1),
            next_run_at=now + timedelta(minutes=1)))
    keys = [d.key for d in store.claim(claims, lease=grant).dispatches]
    first_send = counting.step(lambda: store.mark_submitted(keys))
    figures: dict[str, Any] = {"runs": count}

    def look(timeout: timedelta) -> int:
        return len(store.resend_unstarted(lease=grant, unstarted_for=timeout,
                                          tracked_since=TRACKED, resends=1))

    figures["look_nothing_due"] = counting.step(lambda: look(timedelta(minutes=10)))
    time.sleep(0.05)
    figures["look_resending_all"] = counting.step(lambda: look(timedelta(milliseconds=10)))
    figures["take_pending"] = counting.step(
        lambda: len(store.take_pending(lease=grant, limit=count)))
    figures["mark_submitted"] = counting.step(lambda: store.mark_submitted(keys))
    figures["first_send_mark_submitted"] = first_send
    figures["worker_check_of_one_key"] = counting.step(lambda: len(store.read_runs(keys[:1])[1]))
    store.close()
    print(json.dumps(figures, indent=2, default=str))


if __name__ == "__main__":
    main()
