"""Time the dashboard's pages and the Django admin's schedule list and page with 100,000
schedules in PostgreSQL (target: every page < 300 ms).

    GOATBEAT_TEST_PG_URL=postgresql+psycopg://postgres:postgres@127.0.0.1:5432/test \\
        .venv/bin/python -m benchmarks.web [--schedules 100000] [--repeat 20] [--no-admin]

Creates a database of its own on that server (dropped afterwards), fills it with raw SQL
(the benchmark's setup, not the dashboard's way: the dashboard only goes through the API), then
renders pages through Starlette's TestClient, and the admin's through Django's test client
(Django's own tables migrated into the same database), and prints the median and worst time
of each. Half the schedules carry the tag ``nightly`` and one of 50 ``team-NN`` tags
(1,000 schedules each); no schedule carries ``nope``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from datetime import timedelta
from typing import Any
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
            " next_run_at, created_at, updated_at, tags, last_occurrence_at) "
            "SELECT 'sched-' || lpad(n::text, 6, '0'), 'proj.tasks.tick', '[]', '{}', '{}',"
            " '{\"kind\": \"interval\", \"every\": 60}', n % 10 <> 0,"
            " CASE WHEN n % 3 = 0 THEN 'config' ELSE 'api' END, 'bench', 0, 0, 1,"
            " now() + make_interval(secs => 60 + n % 3600),"
            " now() + make_interval(secs => 60 + n % 3600), now(), now(),"
            " CASE WHEN n % 2 = 0 THEN json_build_array("
            "'team-' || lpad((n / 2 % 50)::text, 2, '0'), 'nightly') END,"
            " date_trunc('minute', now()) - make_interval(mins => 1 + n % 60) "
            "FROM generate_series(1, :count) AS n"), {"count": count})
        # Each schedule's last occurrence ran (one in 7 failed): the list shows its state.
        connection.execute(sa.text(
            f"INSERT INTO goatbeat_execution ({EXECUTION_COLUMNS}) "
            f"SELECT {_execution_values('last_occurrence_at', 'n')} "
            "FROM (SELECT name, last_occurrence_at, row_number() OVER () AS n"
            " FROM goatbeat_schedule) AS s"))
        # And the busy one ran every second for the last BUSY_RUNS seconds.
        connection.execute(sa.text(
            f"INSERT INTO goatbeat_execution ({EXECUTION_COLUMNS}) "
            f"SELECT {_execution_values('at', 'k')} "
            "FROM (SELECT :busy AS name, date_trunc('minute', now()) - make_interval(secs => k)"
            " AS at, k FROM generate_series(61, 60 + :runs) AS k) AS s "
            "ON CONFLICT (key) DO NOTHING"),
            {"busy": BUSY, "runs": BUSY_RUNS})
        connection.execute(sa.text("ANALYZE"))
    engine.dispose()


BUSY = "sched-000001"
BUSY_RUNS = 2_000
EXECUTION_COLUMNS = ("key, schedule_name, occurrence_at, due_at, token, state, claimed_at,"
                     " submitted_at, attempts, missed, manual, run_state, worker, run_attempts,"
                     " started_at, finished_at, runtime, run_error")


def calendar_and_backfill(url: str, schedules: Any) -> tuple[str, int]:
    """A calendar that OBSERVERS schedules observe (written in SQL, as the fill), and a
    backfill of the busy schedule's last hour (through the API: the leader would drain it)."""
    schedules.create_calendar(CALENDAR, dates=["2030-12-25"], ranges=["2030-08-01..2030-08-15"],
                              description="Days off")
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    with engine.begin() as connection:
        connection.execute(sa.text(
            "UPDATE goatbeat_schedule SET calendars = json_build_array(CAST(:calendar AS text)) "
            "WHERE name IN (SELECT name FROM goatbeat_schedule ORDER BY name DESC LIMIT :n)"),
            {"calendar": CALENDAR, "n": OBSERVERS})
        connection.execute(sa.text("ANALYZE goatbeat_schedule"))
    engine.dispose()
    end = schedules.store.now()
    backfill = schedules.backfill(BUSY, end - timedelta(hours=1), end)
    return CALENDAR, backfill.id


CALENDAR = "days-off"
OBSERVERS = 100


def _execution_values(at: str, n: str) -> str:
    """The columns of a run of ``name`` at ``at`` (SQL), failed when ``n`` is a multiple of
    7: its key as goatbeat writes it (the instant in UTC, ISO-8601)."""
    failed = f"{n} % 7 = 0"
    return (f"name || ':' || to_char({at} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS')"
            f" || '+00:00', name, {at}, {at}, 1, 'submitted', {at} + interval '10 ms',"
            f" {at} + interval '20 ms', 1, 0, false,"
            f" CASE WHEN {failed} THEN 'failed' ELSE 'succeeded' END, 'celery@bench', 1,"
            f" {at} + interval '30 ms', {at} + interval '530 ms', 0.5 + ({n} % 10) / 10.0,"
            f" CASE WHEN {failed} THEN 'ValueError: upstream answered 503' END")


def measure(client: object, path: str, repeat: int) -> list[float]:
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(path)  # type: ignore[attr-defined]
        timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (path, response.status_code)
    return timings


def admin_client(url: str) -> object:
    """Django's test client, logged in as a superuser, on the test project's admin over the
    database at ``url`` (Django's tables migrated into it)."""
    import django
    from django.conf import settings
    from django.core.management import call_command

    from tests.django.testproj import settings as project

    configured = {key: getattr(project, key) for key in dir(project) if key.isupper()}
    configured["DATABASES"]["default"]["NAME"] = make_url(url).database
    settings.configure(**configured)
    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    from django.contrib.auth.models import User
    from django.test import Client

    client = Client()
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    return client


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--no-admin", action="store_true",
                        help="leave out the Django admin's pages")
    options = parser.parse_args()
    warnings.filterwarnings("ignore", category=DeprecationWarning)

    from celery import Celery
    from starlette.testclient import TestClient

    from goatbeat_celery.api import Schedules
    from goatbeat_celery.web import create_app
    from tests.conftest import migrated_database

    server = make_url(os.environ.get("GOATBEAT_TEST_PG_URL",
                                     "postgresql+psycopg://postgres@127.0.0.1:5432/test"))
    # A name of this run's own: two runs on one server never drop each other's database.
    with migrated_database(server, f"goatbeat_bench_web_{os.getpid()}") as url:
        started = time.perf_counter()
        fill(url, options.schedules)
        print(f"stored {options.schedules:,} schedules in {time.perf_counter() - started:.1f}s")
        app = Celery("benchweb", broker="memory://", set_as_current=False)
        app.conf.update(goatbeat_database_url=url)
        schedules = Schedules.from_app(app)
        middle = f"sched-{options.schedules // 2:06d}"
        middle_run = schedules.get(middle).next_run_at
        assert middle_run is not None
        busy_key = schedules.history(BUSY, limit=1)[0].key
        calendar, backfill = calendar_and_backfill(url, schedules)
        pages = {
            "schedules, first page": "/schedules",
            "schedules, name prefix": "/schedules?q=sched-0500",
            "schedules, paused filter": "/schedules?state=paused",
            "schedules, config source": "/schedules?source=config",
            "schedules, page 2 (after a name)": "/schedules?after=sched-000050&page=1",
            f"schedules, a deep page (after {middle})":
                f"/schedules?after={middle}&page={options.schedules // 100}",
            "schedules by next run, first page": "/schedules?sort=next_run",
            "schedules, a tag no schedule carries": "/schedules?tag=nope",
            "schedules, a tag on half of them": "/schedules?tag=nightly",
            "schedules, a tag on 1,000 of them": "/schedules?tag=team-07",
            "schedules by next run, a tag none carries": "/schedules?tag=nope&sort=next_run",
            "schedules by next run, a tag on half": "/schedules?tag=nightly&sort=next_run",
            "schedules by next run, a tag on 1,000": "/schedules?tag=team-07&sort=next_run",
            f"schedules by next run, a deep page (after {middle})":
                "/schedules?" + urlencode({"sort": "next_run", "after": middle,
                                           "after_run": middle_run.isoformat(), "page": 1000}),
            "overview": "/",
            "one schedule": f"/schedule?name={middle}",
            f"a busy schedule ({BUSY_RUNS:,} runs)": f"/schedule?name={BUSY}",
            "its failed runs": f"/schedule?name={BUSY}&outcome=failed",
            "a run": "/run?" + urlencode({"key": busy_key}),
            "fleet": "/fleet",
            "backfills": "/backfills",
            "a backfill": f"/backfill?id={backfill}",
            "the backfill form": f"/backfill/new?name={BUSY}",
            "calendars": "/calendars",
            f"a calendar ({OBSERVERS:,} schedules observe it)": f"/calendar?name={calendar}",
            "the new schedule form": "/new",
            "the delete confirmation": f"/schedule/delete?name={middle}",
        }
        admin_pages = {
            "admin: schedule list": "/admin/goatbeat/schedule/",
            "admin: a tag no schedule carries": "/admin/goatbeat/schedule/?tag=nope",
            "admin: a tag on half of them": "/admin/goatbeat/schedule/?tag=nightly",
            "admin: a tag on 1,000 of them": "/admin/goatbeat/schedule/?tag=team-07",
            f"admin: a busy schedule's page ({BUSY_RUNS:,} runs, the last listed)":
                f"/admin/goatbeat/schedule/{BUSY}/change/",
        }
        medians: dict[str, float] = {}

        def report(label: str, timings: list[float]) -> None:
            medians[label] = statistics.median(timings)
            print(f"{label:<50} median {medians[label]:7.1f} ms   worst {max(timings):7.1f} ms",
                  flush=True)

        try:
            # A loopback name: the dashboard answers other hosts only with a token.
            with TestClient(create_app(schedules), base_url="http://localhost") as client:
                measure(client, "/schedules", 3)  # warm the pool and the templates
                for label, path in pages.items():
                    report(label, measure(client, path, options.repeat))
        finally:
            schedules.close()
        if not options.no_admin:
            admin = admin_client(url)
            measure(admin, admin_pages["admin: schedule list"], 2)  # warm as above
            for label, path in admin_pages.items():
                report(label, measure(admin, path, options.repeat))
            from django.db import connections

            connections.close_all()  # before the database is dropped
    slowest = max(medians, key=medians.__getitem__)
    verdict = "meets" if medians[slowest] < TARGET_MS else "MISSES"
    print(f"slowest page with {options.schedules:,} schedules: {slowest}, "
          f"{medians[slowest]:.1f} ms median ({verdict} the {TARGET_MS:.0f} ms target)")
    return 0 if medians[slowest] < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
