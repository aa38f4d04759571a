"""What the dashboard's runs pages cost with many schedules and runs on PostgreSQL.

A fresh database (migrated) gets ``--count`` API schedules (benchmarks/populate.py's rows, one
tag in ten carrying ``tagged``) and ``--runs`` executions spread over them, generated
server-side: one minute apart per schedule, 1 % failed with an error and a traceback, 0.1 %
lost, 0.5 % submitted and not started, the rest succeeded, on 20 workers. Then each page is
requested through the application (Starlette's TestClient, so the time includes rendering)
``--repeat`` times and its median time printed:

    python benchmarks/runs_page.py --count 100000 --runs 10000000

The target is every page under 300 ms at 100,000 schedules and 10 million runs. Filling ten
million runs takes a while: ``--database URL`` uses (and keeps) a database of your own instead,
filled on the first run when it has no runs and only upgraded on the next ones, so that the code
before and after a change can be measured on the same rows. One schedule also gets a backfill of
``--backfill`` occurrences (its page counts their outcomes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import sqlalchemy as sa
from celery import Celery
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import populate  # noqa: E402
from tests.conftest import migrated_database  # noqa: E402

TRACEBACK = ("Traceback (most recent call last):\n" + '  File "tasks.py", line 9, in run\n'
             "    step()\n" * 30 + "ValueError: bad input")

# Runs of schedule i at now - (n + 1) minutes, n = 0 .. per-1; outcome by a hash of (i, n).
_RUNS = """
INSERT INTO goatbeat_execution (
    key, schedule_name, occurrence_at, due_at, token, state, claimed_at, submitted_at,
    attempts, missed, manual, run_state, run_id, worker, run_attempts, started_at,
    finished_at, runtime, run_error, run_traceback)
SELECT name || ':' || to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') || '+00:00',
       name, at, at, 1, 'submitted', at, at, 1, 0, false,
       CASE WHEN roll < 10 THEN 'failed' WHEN roll < 11 THEN 'lost'
            WHEN roll < 16 THEN NULL ELSE 'succeeded' END,
       CASE WHEN roll >= 11 AND roll < 16 THEN NULL ELSE 'r' || n END,
       CASE WHEN roll >= 11 AND roll < 16 THEN NULL ELSE 'celery@w' || (i % 20) END,
       CASE WHEN roll >= 11 AND roll < 16 THEN 0 ELSE 1 END,
       at + interval '1 second', at + interval '2 seconds', 1.0,
       CASE WHEN roll < 10 THEN 'ValueError: bad input ' || i
            WHEN roll < 11 THEN 'worker silent for 60s' END,
       CASE WHEN roll < 10 THEN CAST(:traceback AS text) END
FROM generate_series(0, :count - 1) AS i,
     LATERAL (SELECT :prefix || lpad(i::text, 7, '0') AS name) AS s,
     generate_series(0, :per - 1) AS n,
     LATERAL (SELECT now() - (n + 1) * interval '1 minute' AS at,
                     abs(hashtext(i || ':' || n)) % 1000 AS roll) AS r
"""


def fill(engine: sa.Engine, count: int, runs: int) -> None:
    populate.goatbeat(engine, populate.Plan(count=count, every=3600,
                                            first_due=time.time() + 3600))
    per = max(1, runs // count)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE goatbeat_schedule SET tags = '[\"tagged\"]' "
                             "WHERE right(name, 1) = '0'"))
    # The secondary indexes are dropped while the rows go in and built again after: ten
    # million rows took 30 minutes with them in place, about 12 this way.
    with engine.begin() as conn:
        indexes = [(name, definition) for name, definition in conn.execute(sa.text(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'goatbeat_execution'"
            " AND indexname NOT IN (SELECT conname FROM pg_constraint)"))]
        for name, _ in indexes:
            conn.execute(sa.text(f'DROP INDEX "{name}"'))
    # In slices of schedules: one statement for ten million rows holds too much at once.
    step = max(1, 1_000_000 // per)
    for start in range(0, count, step):
        with engine.begin() as conn:
            conn.execute(sa.text(_RUNS.replace("generate_series(0, :count - 1)",
                                               "generate_series(:start, :stop - 1)")),
                         {"start": start, "stop": min(count, start + step), "per": per,
                          "prefix": "s-", "traceback": TRACEBACK})
    with engine.begin() as conn:
        conn.execute(sa.text("SET LOCAL maintenance_work_mem = '512MB'"))
        for _, definition in indexes:
            conn.execute(sa.text(definition))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM ANALYZE goatbeat_execution"))
        conn.execute(sa.text("VACUUM ANALYZE goatbeat_schedule_tag"))


# A backfill of schedule ``name`` over ``:count`` occurrences one second apart ending an hour ago,
# each run under its backfill key (half succeeded, a tenth failed, the rest not started).
_BACKFILL = """
INSERT INTO goatbeat_execution (
    key, schedule_name, occurrence_at, due_at, token, state, claimed_at, submitted_at,
    attempts, missed, manual, run_state, run_attempts, run_error)
SELECT :name || ':' || to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
       || '+00:00:backfill-' || :id,
       :name, at, b.created_at, 1, 'submitted', b.created_at, b.created_at, 1, 0, false,
       CASE WHEN k % 10 = 0 THEN 'failed' WHEN k % 2 = 0 THEN 'succeeded' END,
       1, CASE WHEN k % 10 = 0 THEN 'ValueError: bad input' END
FROM goatbeat_backfill AS b, generate_series(0, :count - 1) AS k,
     LATERAL (SELECT b.start_at + k * interval '1 second' AS at) AS r
WHERE b.id = :id
"""


def add_backfill(engine: sa.Engine, name: str, count: int) -> int:
    """A finished backfill of ``name`` that claimed ``count`` occurrences; its id."""
    with engine.begin() as conn:
        start = conn.execute(sa.text(
            "SELECT date_trunc('second', now()) - interval '1 hour' - :count * interval "
            "'1 second'"), {"count": count}).scalar_one()
        backfill = conn.execute(sa.text(
            "INSERT INTO goatbeat_backfill (schedule_name, start_at, end_at, mode, newest_first,"
            " per_tick, total, examined, claimed, state, created_at, finished_at) "
            "VALUES (:name, :start, :start + (:count - 1) * interval '1 second', 'all', false,"
            " 100, :count, :count, :count, 'done', now(), now()) RETURNING id"),
            {"name": name, "start": start, "count": count}).scalar_one()
        conn.execute(sa.text(_BACKFILL), {"name": name, "id": backfill, "count": count})
    return int(backfill)


@contextmanager
def database(options: argparse.Namespace) -> Iterator[str]:
    """The database measured: ``--database`` (kept, brought to the latest schema) or a new
    one (dropped after)."""
    if options.database:
        from goatbeat_celery.store import upgrade_schema

        began = time.perf_counter()
        upgrade_schema(options.database)
        print(f"schema upgraded in {time.perf_counter() - began:.1f} s")
        yield options.database
        return
    with migrated_database(make_url(options.server), f"goatbeat_runs_{os.getpid()}") as url:
        yield url


def next_page(page: str) -> str | None:
    """The link to the page after ``page``; None when it has none."""
    if 'rel="next"' not in page:
        return None
    start = page.index('rel="next"')
    href = page.rindex('href="', 0, start) + len('href="')
    return page[href:page.index('"', href)].replace("&amp;", "&")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--backfill", type=int, default=10_000)
    parser.add_argument("--database", default=None)
    parser.add_argument("--server", default=os.environ.get(
        "GOATBEAT_TEST_PG_URL", "postgresql+psycopg://postgres:postgres@127.0.0.1:5432/test"))
    options = parser.parse_args()
    from starlette.testclient import TestClient

    from goatbeat_celery.api import Schedules
    from goatbeat_celery.web import create_app

    with database(options) as url:
        engine = sa.create_engine(url)
        began = time.perf_counter()
        with engine.connect() as conn:
            filled = conn.execute(sa.text("SELECT 1 FROM goatbeat_execution LIMIT 1")).first()
        if filled is None:
            fill(engine, options.count, options.runs)
            add_backfill(engine, "s-0000001", options.backfill)
        with engine.connect() as conn:
            backfill = conn.execute(sa.text("SELECT max(id) FROM goatbeat_backfill")).scalar()
            total = conn.execute(sa.text("SELECT count(*) FROM goatbeat_execution")).scalar()
            key = conn.execute(sa.text("SELECT key FROM goatbeat_execution WHERE run_state = "
                                       "'failed' LIMIT 1")).scalar()
            # The minute of the runs half-way through the history, as their keys spell it.
            minute = conn.execute(sa.text(
                "SELECT to_char(max(occurrence_at) AT TIME ZONE 'UTC' - interval '50 minutes',"
                " '\"T\"HH24:MI') FROM goatbeat_execution")).scalar()
        print(f"{options.count} schedules, {total} runs, ready in "
              f"{time.perf_counter() - began:.0f} s")
        engine.dispose()
        app = Celery("runs", broker="memory://", set_as_current=False)
        app.conf.update(goatbeat_database_url=url)
        schedules = Schedules.from_app(app)
        pages: dict[str, str | None] = {
            "runs, no filter": "/runs",
            "runs, failed": "/runs?outcome=failed",
            "runs, lost in the last day": "/runs?outcome=lost&range=24h",
            "runs, submitted (not started)": "/runs?outcome=submitted",
            "runs, one schedule": f"/runs?schedule=s-{options.count // 2:07d}",
            "runs, one worker, failed": "/runs?worker=celery%40w7&outcome=failed",
            "runs, tag": "/runs?tag=tagged",
            "runs, tag and failed": "/runs?tag=tagged&outcome=failed",
            "runs, text in the last hour": "/runs?q=bad+input+42&range=1h",
            "runs, text in the error, any time": "/runs?q=bad+input+4242",
            "runs, text in the key, any time": f"/runs?q=s-{options.count // 2 // 100:05d}",
            "runs, text found nowhere": "/runs?q=no+such+text",
            "runs, text of an instant in the key": f"/runs?q={quote(str(minute))}",
            "runs, page 2 (keyset)": None,
            "runs, failed, page 2 (keyset)": None,
            "runs, text, page 2 (keyset)": None,
            "runs, text of an instant, further back": None,
            "grid, first page": "/runs/grid",
            "grid, tag": "/runs/grid?tag=tagged",
            "run page with traceback": f"/run?key={quote(str(key), safe='')}",
            "schedule page (its history)": f"/schedule?name=s-{options.count // 2:07d}",
            f"backfill page ({options.backfill:,} runs)": f"/backfill?id={backfill}",
        }
        try:
            with TestClient(create_app(schedules), base_url="http://127.0.0.1") as client:
                for label, path in (("runs, page 2 (keyset)", "/runs"),
                                    ("runs, failed, page 2 (keyset)", "/runs?outcome=failed"),
                                    ("runs, text, page 2 (keyset)",
                                     "/runs?q=bad+input+42&range=1h"),
                                    ("runs, text of an instant, further back",
                                     f"/runs?q={quote(str(minute))}")):
                    pages[label] = next_page(client.get(path).text)
                for label, target in pages.items():
                    if target is None:
                        print(f"{label:40} no such page (no link to it)", flush=True)
                        continue
                    times = []
                    statuses = set()
                    for _ in range(options.repeat):
                        began = time.perf_counter()
                        response = client.get(target)
                        times.append(time.perf_counter() - began)
                        statuses.add(response.status_code)
                    # A page the database gave up on (its statement timeout: 503) is reported.
                    failed = "" if statuses == {200} else f"  status {sorted(statuses)}"
                    print(f"{label:40} median {statistics.median(times) * 1000:7.1f} ms, "
                          f"max {max(times) * 1000:7.1f} ms{failed}", flush=True)
        finally:
            schedules.close()


if __name__ == "__main__":
    main()
