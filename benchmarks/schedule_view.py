"""What reading ``scheduler.schedule`` costs with many schedules on PostgreSQL.

A fresh database (migrated) gets ``--count`` API schedules (benchmarks/populate.py's rows) and
a beat_schedule of ten entries; a real ``goatbeat_celery.Scheduler`` is started on it, and the
first read of its ``schedule`` after a sync is timed (wall and CPU), with the memory it holds.
The scheduling loop never pays this: only a read after a sync does.

    python benchmarks/schedule_view.py --count 100000
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import tracemalloc
from pathlib import Path

import sqlalchemy as sa
from celery import Celery
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import populate  # noqa: E402
from goatbeat_celery import Scheduler  # noqa: E402
from tests.conftest import migrated_database  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--server", default=os.environ.get(
        "GOATBEAT_TEST_PG_URL", "postgresql+psycopg://postgres:postgres@127.0.0.1:5432/test"))
    options = parser.parse_args()
    with migrated_database(make_url(options.server), f"goatbeat_view_{os.getpid()}") as url:
        engine = sa.create_engine(url)
        populate.goatbeat(engine, populate.Plan(count=options.count, every=3600,
                                                first_due=time.time() + 3600))
        engine.dispose()
        app = Celery("view", broker="memory://", set_as_current=False)
        app.conf.update(goatbeat_database_url=url, beat_schedule={
            f"config-{i}": {"task": "bench.noop", "schedule": 60.0} for i in range(10)})
        scheduler = Scheduler(app)
        try:
            store = scheduler.engine.store if scheduler.engine else None
            assert store is not None
            for attempt in ("first", "second"):
                gc.collect()
                wall, cpu = time.perf_counter(), time.process_time()
                rows = len(store.list_schedules())
                listed = time.perf_counter() - wall, time.process_time() - cpu
                scheduler.sync()
                wall, cpu = time.perf_counter(), time.process_time()
                entries = len(scheduler.schedule)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                print(f"{attempt} read after a sync: {entries} entries, {wall:.2f} s wall, "
                      f"{cpu:.2f} s CPU (of which the store's listing of {rows} rows alone: "
                      f"{listed[0]:.2f} s wall, {listed[1]:.2f} s CPU)")
            scheduler.sync()
            gc.collect()
            tracemalloc.start()
            len(scheduler.schedule)
            held = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            print(f"the view holds {held / 2**20:.0f} MiB (traced)")
            wall = time.perf_counter()
            len(scheduler.schedule)
            print(f"a read with no sync since: {(time.perf_counter() - wall) * 1e6:.0f} µs")
        finally:
            scheduler.close()


if __name__ == "__main__":
    main()
