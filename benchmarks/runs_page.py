"""What the dashboard's runs pages cost with many schedules and runs on PostgreSQL.

A fresh database (migrated) gets ``--count`` API schedules (benchmarks/populate.py's rows, one
tag in ten carrying ``tagged``) and ``--runs`` executions spread over them, generated
server-side: one minute apart per schedule, 1 % failed with an error and a traceback, 0.1 %
lost, 0.5 % submitted and not started, the rest succeeded, on 20 workers. Then each page is
requested through the application (Starlette's TestClient, so the time includes rendering)
``--repeat`` times and its median time printed:

    python benchmarks/runs_page.py --count 100000 --runs 10000000

The target is every page under 300 ms at 100,000 schedules and 10 million runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
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
    # In slices of schedules: one statement for ten million rows holds too much at once.
    step = max(1, 1_000_000 // per)
    for start in range(0, count, step):
        with engine.begin() as conn:
            conn.execute(sa.text(_RUNS.replace("generate_series(0, :count - 1)",
                                               "generate_series(:start, :stop - 1)")),
                         {"start": start, "stop": min(count, start + step), "per": per,
                          "prefix": "s-", "traceback": TRACEBACK})
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM ANALYZE goatbeat_execution"))
        conn.execute(sa.text("VACUUM ANALYZE goatbeat_schedule_tag"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--server", default=os.environ.get(
        "GOATBEAT_TEST_PG_URL", "postgresql+psycopg://postgres:postgres@127.0.0.1:5432/test"))
    options = parser.parse_args()
    from starlette.testclient import TestClient

    from goatbeat_celery.api import Schedules
    from goatbeat_celery.web import create_app

    with migrated_database(make_url(options.server), f"goatbeat_runs_{os.getpid()}") as url:
        engine = sa.create_engine(url)
        began = time.perf_counter()
        fill(engine, options.count, options.runs)
        with engine.connect() as conn:
            total = conn.execute(sa.text("SELECT count(*) FROM goatbeat_execution")).scalar()
            key = conn.execute(sa.text("SELECT key FROM goatbeat_execution WHERE run_state = "
                                       "'failed' LIMIT 1")).scalar()
        print(f"{options.count} schedules, {total} runs, filled in "
              f"{time.perf_counter() - began:.0f} s")
        engine.dispose()
        app = Celery("runs", broker="memory://", set_as_current=False)
        app.conf.update(goatbeat_database_url=url)
        schedules = Schedules.from_app(app)
        pages = {
            "runs, no filter": "/runs",
            "runs, failed": "/runs?outcome=failed",
            "runs, lost in the last day": "/runs?outcome=lost&range=24h",
            "runs, submitted (not started)": "/runs?outcome=submitted",
            "runs, one schedule": f"/runs?schedule=s-{options.count // 2:07d}",
            "runs, one worker, failed": "/runs?worker=celery%40w7&outcome=failed",
            "runs, tag": "/runs?tag=tagged",
            "runs, tag and failed": "/runs?tag=tagged&outcome=failed",
            "runs, text in the last hour": "/runs?q=bad+input+42&range=1h",
            "runs, page 2 (keyset)": None,
            "grid, first page": "/runs/grid",
            "grid, tag": "/runs/grid?tag=tagged",
            "run page with traceback": f"/run?key={quote(str(key), safe='')}",
        }
        try:
            with TestClient(create_app(schedules), base_url="http://127.0.0.1") as client:
                first = client.get("/runs").text
                start = first.index('rel="next"')
                href = first.rindex('href="', 0, start) + len('href="')
                pages["runs, page 2 (keyset)"] = first[href:first.index('"', href)].replace(
                    "&amp;", "&")
                for label, path in pages.items():
                    assert path is not None
                    times = []
                    for _ in range(options.repeat):
                        began = time.perf_counter()
                        response = client.get(path)
                        times.append(time.perf_counter() - began)
                        assert response.status_code == 200, (path, response.status_code)
                    print(f"{label:34} median {statistics.median(times) * 1000:7.1f} ms, "
                          f"max {max(times) * 1000:7.1f} ms")
        finally:
            schedules.close()


if __name__ == "__main__":
    main()
