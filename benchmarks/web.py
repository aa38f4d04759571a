"""Time the dashboard's schedules page with 100,000 schedules in PostgreSQL (target < 300 ms).

    GOATBEAT_TEST_PG_URL=postgresql+psycopg://postgres:postgres@127.0.0.1:5432/test \\
        .venv/bin/python -m benchmarks.web [--schedules 100000] [--repeat 20]

Creates a database of its own on that server (dropped afterwards), fills it with raw SQL
(the benchmark's setup, not the dashboard's way: the dashboard only goes through the API), then
renders pages through Starlette's TestClient and prints the median and worst time of each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from urllib.parse import urlencode

import sqlalchemy as sa
from sqlalchemy.engine import make_url

TARGET_MS = 300.0


def fill(url: str, count: int) -> None:
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    with engine.begin() as connection:
        connection.execute(sa.text(
            "INSERT INTO goatbeat_schedule (name, task, args, kwargs, options, trigger, enabled,"
            " source, spec_hash, total_runs, total_missed, version, next_occurrence_at,"
            " next_run_at, created_at, updated_at) "
            "SELECT 'sched-' || lpad(n::text, 6, '0'), 'proj.tasks.tick', '[]', '{}', '{}',"
            " '{\"kind\": \"interval\", \"every\": 60}', n % 10 <> 0,"
            " CASE WHEN n % 3 = 0 THEN 'config' ELSE 'api' END, 'bench', 0, 0, 1,"
            " now() + make_interval(secs => 60 + n % 3600),"
            " now() + make_interval(secs => 60 + n % 3600), now(), now() "
            "FROM generate_series(1, :count) AS n"), {"count": count})
        connection.execute(sa.text("ANALYZE goatbeat_schedule"))
    engine.dispose()


def measure(client: object, path: str, repeat: int) -> list[float]:
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(path)  # type: ignore[attr-defined]
        timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (path, response.status_code)
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=20)
    options = parser.parse_args()
    warnings.filterwarnings("ignore", category=DeprecationWarning)

    from celery import Celery
    from starlette.testclient import TestClient

    from goatbeat_celery.api import Schedules
    from goatbeat_celery.web import create_app
    from tests.conftest import migrated_database

    server = make_url(os.environ.get("GOATBEAT_TEST_PG_URL",
                                     "postgresql+psycopg://postgres@127.0.0.1:5432/test"))
    with migrated_database(server, "goatbeat_bench_web") as url:
        started = time.perf_counter()
        fill(url, options.schedules)
        print(f"stored {options.schedules:,} schedules in {time.perf_counter() - started:.1f}s")
        app = Celery("benchweb", broker="memory://", set_as_current=False)
        app.conf.update(goatbeat_database_url=url)
        schedules = Schedules.from_app(app)
        middle = f"sched-{options.schedules // 2:06d}"
        middle_run = schedules.get(middle).next_run_at
        assert middle_run is not None
        pages = {
            "schedules, first page": "/schedules",
            "schedules, name prefix": "/schedules?q=sched-0500",
            "schedules, paused filter": "/schedules?state=paused",
            "schedules, config source": "/schedules?source=config",
            "schedules, page 2 (after a name)": "/schedules?after=sched-000050&page=1",
            f"schedules, a deep page (after {middle})":
                f"/schedules?after={middle}&page={options.schedules // 100}",
            "schedules by next run, first page": "/schedules?sort=next_run",
            f"schedules by next run, a deep page (after {middle})":
                "/schedules?" + urlencode({"sort": "next_run", "after": middle,
                                           "after_run": middle_run.isoformat(), "page": 1000}),
            "overview": "/",
            "one schedule": f"/schedule?name={middle}",
        }
        worst_first = 0.0
        try:
            with TestClient(create_app(schedules)) as client:
                measure(client, "/schedules", 3)  # warm the pool and the templates
                for label, path in pages.items():
                    timings = measure(client, path, options.repeat)
                    median = statistics.median(timings)
                    if label == "schedules, first page":
                        worst_first = median
                    print(f"{label:<45} median {median:7.1f} ms   worst {max(timings):7.1f} ms")
        finally:
            schedules.close()
    verdict = "meets" if worst_first < TARGET_MS else "MISSES"
    print(f"schedules page with {options.schedules:,} schedules: {worst_first:.1f} ms median "
          f"({verdict} the {TARGET_MS:.0f} ms target)")
    return 0 if worst_first < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
