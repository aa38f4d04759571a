"""What run tracking costs a worker: throughput of a no-op task with and without
``track_runs``, prefork and threads pools, on a real Redis broker and PostgreSQL.

    .venv/bin/python benchmarks/tracking.py [--tasks 5000] [--reps 6] [--pools prefork,threads]
                                            [--receivers] [--timed 2] [--profile DIR]

Each measurement fills the queue with ``--tasks`` messages sent the way goatbeat sends them
(task id = idempotency key, goatbeat's headers), each with its ``submitted`` execution row, then
starts ``celery worker`` on it and, once a tenth of them ran (the steady state), times the rest
of the drain and the CPU time (user + system) the worker's processes used meanwhile (all their
threads, and the main thread apart, from /proc).

Each rep runs, per pool, one set of runs back to back: without tracking and with it as a user
installs it (and with ``--receivers``, with receivers that do nothing on the two task signals
tracking uses: what Celery's sending them costs, which no tracker's own code can save); the
order reverses from rep to rep. The summary gives each figure's median and range, and the change
from without, set by set (median and range), which a machine whose load drifts disturbs least.
Those runs carry no instruments in the worker. Then ``--timed`` runs per pool measure, with
instruments that cost a little themselves, the CPU of tracking's own code (its signal
handlers, less what timing them costs, and its writer thread; opening the store once per
process apart) and count the statements the worker sent (each a round trip: the store writes
outside transactions, and the pool's connection check is one statement too). Every run with
tracking reports the CPU of the worker's PostgreSQL sessions and checks that every run was
recorded ``succeeded``.

``--profile DIR`` attaches py-spy (``pip install py-spy``) to each run's worker over the timed
part and writes its samples as collapsed stacks, one file per run; the timed figures of such a
run include the sampling. ``BENCH_TRACK_NO_WRITES=1`` in the environment holds, in the timed
runs, every event in memory until the worker stops, to tell the handlers' cost from the writer's.

It needs Redis (``GOATBEAT_BENCH_REDIS_URL``, default redis://127.0.0.1:6379/13, flushed) and
PostgreSQL (``GOATBEAT_BENCH_PG_URL``, else ``GOATBEAT_TEST_PG_URL``; a database
``goatbeat_bench_tracking`` is created on it and dropped afterwards). A plain script that
prints figures, not a test.

The same file is the worker's Celery app (``celery -A tracking``), configured from the
environment by the driver.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TASK = "bench.track.noop"
QUEUE = "bench-tracking"
DATABASE = "goatbeat_bench_tracking"
STATS_KEY = "bench-tracking-stats"

# -- the worker's side ------------------------------------------------------------------------
if os.environ.get("BENCH_TRACK_BROKER_URL"):
    import redis
    from celery import Celery
    from celery import signals as signals_module
    from celery.signals import worker_process_shutdown, worker_ready, worker_shutdown

    app = Celery("bench_tracking", broker=os.environ["BENCH_TRACK_BROKER_URL"])
    app.conf.update(task_default_queue=QUEUE, broker_connection_retry_on_startup=True,
                    result_backend=None, worker_hijack_root_logger=False,
                    goatbeat_database_url=os.environ["BENCH_TRACK_DATABASE_URL"])

    #: The garbage collector's runs by generation and its CPU seconds in this process, once
    #: the worker is ready or the process ran a task (not the imports before), in whichever
    #: thread it ran.
    _gc_runs = [0, 0, 0]
    _gc_cpu = [0.0, 0.0]  # the total; the start of the collection under way
    _tasks = [0]

    def _gc_timer(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            _gc_cpu[1] = time.thread_time()
        elif _tasks[0]:
            _gc_cpu[0] += time.thread_time() - _gc_cpu[1]
            _gc_runs[info["generation"]] += 1

    gc.callbacks.append(_gc_timer)

    @worker_ready.connect(weak=False)
    def _ready(**_: Any) -> None:
        _tasks[0] += 1

    @app.task(name=TASK)
    def noop() -> None:
        """Nothing: what is measured is what the worker does around it."""
        _tasks[0] += 1

    # Outside mode ``receivers`` the benchmark connects no task signal receivers of its own:
    # without tracking, Celery then sends no task_prerun or task_postrun at all.
    def _nothing(**_: Any) -> None:
        """A receiver that does nothing (mode ``receivers``)."""

    _statements = [0]
    #: CPU seconds this process spent in tracking's signal handlers, on the tasks' threads
    #: (less what timing them costs), and in its writer thread's whole life.
    _handler_cpu = [0.0]
    _writer_cpu = [0.0]
    #: Of which opening the store, once per process (imports, engine, first connection): a
    #: fixed cost, reported apart from the cost per task.
    _opening_cpu = [0.0]
    _handler_calls = [0]

    def _clock_cost() -> float:
        """What reading the thread's CPU clock twice costs (a system call on some machines),
        taken off each timed handler call."""
        began = time.thread_time()
        for _ in range(2000):
            time.thread_time()
        return 2 * (time.thread_time() - began) / 2001

    _mode = os.environ.get("BENCH_TRACK_MODE", "off")
    if _mode == "receivers":
        # What Celery's sending task_prerun and task_postrun costs once anything receives
        # them: a part of tracking's cost that no receiver's own code can save.
        signals_module.task_prerun.connect(_nothing, weak=False)
        signals_module.task_postrun.connect(_nothing, weak=False)
    if _mode == "on":
        from goatbeat_celery import track_runs

        track_runs(app)
    if _mode == "timed":
        import psycopg

        import goatbeat_celery.worker.tracking as tracking_module
        from goatbeat_celery import track_runs

        def _timed(method: Any, into: list[float], calls: list[int] | None = None) -> Any:
            def timed(*args: Any, **kwargs: Any) -> Any:
                began = time.thread_time()
                try:
                    return method(*args, **kwargs)
                finally:
                    into[0] += time.thread_time() - began
                    if calls is not None:
                        calls[0] += 1
            return timed

        # Wrapped before track_runs connects the handlers.
        for _name in ("_on_prerun", "_on_postrun"):
            setattr(tracking_module.RunTracker, _name,
                    _timed(getattr(tracking_module.RunTracker, _name), _handler_cpu,
                           _handler_calls))
        tracking_module.RunWriter._run = _timed(  # type: ignore[method-assign]
            tracking_module.RunWriter._run, _writer_cpu)
        tracking_module.RunTracker._open_log = _timed(  # type: ignore[method-assign]
            tracking_module.RunTracker._open_log, _opening_cpu)

        # Count what reaches the server: every statement (the store's, and the pool's
        # connection check), the BEGIN psycopg sends before a statement outside autocommit,
        # and every commit or rollback of an open transaction.
        _IDLE = psycopg.pq.TransactionStatus.IDLE

        def _counting(method: Any) -> Any:
            def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
                connection = self.connection
                if not connection.autocommit and connection.info.transaction_status == _IDLE:
                    _statements[0] += 1
                _statements[0] += 1
                return method(self, *args, **kwargs)
            return counted

        psycopg.Cursor.execute = _counting(psycopg.Cursor.execute)  # type: ignore[method-assign]
        psycopg.Cursor.executemany = _counting(  # type: ignore[method-assign]
            psycopg.Cursor.executemany)

        def _ending(method: Any) -> Any:
            def ended(self: Any) -> Any:
                if self.info.transaction_status != _IDLE:
                    _statements[0] += 1
                return method(self)
            return ended

        psycopg.Connection.commit = _ending(psycopg.Connection.commit)  # type: ignore[method-assign]
        psycopg.Connection.rollback = _ending(  # type: ignore[method-assign]
            psycopg.Connection.rollback)
        _tracker = track_runs(app)
        if os.environ.get("BENCH_TRACK_NO_WRITES") == "1":  # diagnosis: the handlers alone
            _tracker._writer_options.update(batch_size=10**9, flush_interval=1e9,
                                            max_events=10**9)

    _reported = [False]

    def _report(**_: Any) -> None:
        if _reported[0]:
            return
        _reported[0] = True
        client = redis.Redis.from_url(os.environ["BENCH_TRACK_BROKER_URL"])
        client.rpush(STATS_KEY, json.dumps({"pid": os.getpid(),
                                            "statements": _statements[0],
                                            "handler_cpu": _handler_cpu[0] - _handler_calls[0]
                                            * _clock_cost(),
                                            "writer_cpu": _writer_cpu[0],
                                            "opening_cpu": _opening_cpu[0],
                                            "gc_runs": _gc_runs, "gc_cpu": _gc_cpu[0]}))
        client.close()

    # After track_runs connected its own shutdown handlers: its last writes are counted.
    worker_process_shutdown.connect(_report, weak=False)
    worker_shutdown.connect(_report, weak=False)
    atexit.register(_report)


# -- the driver -------------------------------------------------------------------------------
def cpu_seconds(root: int) -> float:
    """User + system CPU time of process ``root`` and its descendants so far (from /proc)."""
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(entry.name)] = fields
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        fields = stats.get(pid)
        if fields is not None:
            total += int(fields[11]) + int(fields[12])  # utime, stime (clock ticks)
        todo.extend(children.get(pid, []))
    return total / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[int, float]:
    """User + system CPU time of each thread of process ``pid`` so far, by thread id."""
    ticks = os.sysconf("SC_CLK_TCK")
    seconds: dict[int, float] = {}
    for entry in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds[int(entry.name)] = (int(fields[11]) + int(fields[12])) / ticks
    return seconds


def backend_cpu(engine: Any) -> float:
    """CPU time of the PostgreSQL sessions the store opens (application_name goatbeat_celery)
    on the benchmark's database: those of other goatbeat processes on a shared server are not
    the worker's."""
    import sqlalchemy as sa

    with engine.connect() as connection:
        pids = connection.execute(sa.text(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'goatbeat_celery' "
            "AND datname = current_database()"
        )).scalars().all()
    return sum(cpu_seconds(pid) for pid in pids)


def _pg_url() -> str:
    url = os.environ.get("GOATBEAT_BENCH_PG_URL") or os.environ.get(
        "GOATBEAT_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    return url


class Bench:
    def __init__(self, redis_url: str, pg_url: str, workdir: Path,
                 profile: Path | None = None) -> None:
        import redis
        import sqlalchemy as sa
        from celery import Celery

        from goatbeat_celery.store import upgrade_schema

        self.redis_url = redis_url
        self.redis = redis.Redis.from_url(redis_url)
        self.redis.flushdb()
        server = sa.make_url(pg_url)
        self.admin = sa.create_engine(server, isolation_level="AUTOCOMMIT",
                                      poolclass=sa.NullPool)
        with self.admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)'))
            connection.execute(sa.text(f'CREATE DATABASE "{DATABASE}"'))
        self.database_url = server.set(database=DATABASE).render_as_string(hide_password=False)
        upgrade_schema(self.database_url)
        self.engine = sa.create_engine(self.database_url, poolclass=sa.NullPool)
        self.app = Celery("bench_tracking_driver", broker=redis_url, set_as_current=False)
        self.app.conf.task_default_queue = QUEUE
        self.workdir = workdir
        self.profile = profile
        self.round = 0

    def close(self) -> None:
        import sqlalchemy as sa

        self.engine.dispose()
        with self.admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)'))
        self.admin.dispose()
        self.redis.flushdb()
        self.redis.close()

    def fill(self, count: int) -> list[str]:
        """``count`` submitted executions, and their messages in the queue."""
        import sqlalchemy as sa

        from goatbeat_celery.core.types.execution import idempotency_key
        from goatbeat_celery.headers import CELERY_BEAT, OCCURRENCE, SCHEDULE, TOKEN

        self.round += 1
        start = datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(days=self.round)
        points = [start + timedelta(seconds=index) for index in range(count)]
        keys = [idempotency_key("bench", at) for at in points]
        with self.engine.begin() as connection:
            connection.execute(sa.text("TRUNCATE goatbeat_execution"))
            connection.execute(sa.text(
                "INSERT INTO goatbeat_execution (key, schedule_name, occurrence_at, due_at, "
                "token, state, claimed_at, submitted_at, attempts, missed, manual) "
                "SELECT k, 'bench', o, o, 1, 'submitted', now(), now(), 1, 0, false "
                "FROM unnest(CAST(:keys AS text[]), CAST(:points AS timestamptz[])) AS u(k, o)"),
                {"keys": keys, "points": points})
        self.redis.delete(QUEUE, STATS_KEY, "unacked", "unacked_index")
        with self.app.producer_or_acquire() as producer:
            for key, at in zip(keys, points, strict=True):
                self.app.send_task(TASK, task_id=key, producer=producer, headers={
                    SCHEDULE: "bench", OCCURRENCE: at.isoformat(), TOKEN: 1,
                    CELERY_BEAT: True})
        assert self.redis.llen(QUEUE) == count
        return keys

    def _spy(self, pid: int, pool: str, mode: str) -> subprocess.Popen[bytes] | None:
        """With ``--profile``: py-spy sampling the worker (and its pool processes) over the
        timed part, as collapsed stacks (one file per run; the timed figures of such a run
        include py-spy's sampling and mean nothing)."""
        if self.profile is None:
            return None
        out = self.profile / f"{pool}-{mode}-{self.round}.txt"
        spy = subprocess.Popen(
            [str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(pid),
             "--subprocesses", "--threads", "--nonblocking", "--rate", "200", "--format", "raw",
             "--output", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)  # attached
        return spy

    def run(self, *, pool: str, concurrency: int, mode: str, count: int) -> dict[str, float]:
        """One run whose worker runs in ``mode``: ``off``, no tracking; ``receivers``, a
        receiver that does nothing on task_prerun and task_postrun (what Celery's sending them
        costs); ``on``, ``track_runs`` as a user installs it; ``timed``, the same with its
        handlers and writer thread timed and its statements counted (for the breakdown; the
        timing is not free, so throughput is compared between ``off`` and ``on``)."""
        import sqlalchemy as sa

        tracking = mode in ("on", "timed")
        self.fill(count)
        env = {**os.environ, "BENCH_TRACK_BROKER_URL": self.redis_url,
               "BENCH_TRACK_DATABASE_URL": self.database_url,
               "BENCH_TRACK_MODE": mode,
               "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT),
                                              os.environ.get("PYTHONPATH", "")])}
        log = (self.workdir / f"worker-{pool}-{mode}-{self.round}.log").open("wb")
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tracking", "worker", "--pool", pool,
             "--concurrency", str(concurrency), "-Q", QUEUE, "--without-heartbeat",
             "--without-gossip", "--without-mingle", "--loglevel", "WARNING",
             "-n", f"bench-{self.round}@%h"],
            cwd=self.workdir, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 600
            # Timed once a tenth of the tasks ran: the steady state, without what the worker
            # and its pool processes do once as they start (connections, the store's opening).
            warm = count - count // 10
            while self.redis.llen(QUEUE) > warm:
                if time.monotonic() > deadline or worker.poll() is not None:
                    raise RuntimeError(f"the worker did not start (see {log.name})")
                time.sleep(0.005)
            spy = self._spy(worker.pid, pool, mode)
            cpu_before = cpu_seconds(worker.pid)
            threads_before = thread_cpu(worker.pid)
            timed_from, left = time.monotonic(), self.redis.llen(QUEUE)
            while self.redis.llen(QUEUE) or self.redis.hlen("unacked"):
                if time.monotonic() > deadline or worker.poll() is not None:
                    raise RuntimeError(f"the worker did not drain the queue (see {log.name})")
                time.sleep(0.02)
            cpu = cpu_seconds(worker.pid) - cpu_before
            threads_after = thread_cpu(worker.pid)
            elapsed = time.monotonic() - timed_from
            if spy is not None:
                spy.send_signal(signal.SIGINT)  # py-spy writes its samples as it stops
                spy.wait(60)
            database_cpu = backend_cpu(self.engine) if tracking else 0.0
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(60)
            log.close()
        stats = [json.loads(item) for item in self.redis.lrange(STATS_KEY, 0, -1)]
        figures = {"rate": left / elapsed, "elapsed": elapsed,
                   "gc_cpu_per_task": sum(s["gc_cpu"] for s in stats) / count,
                   "gc_full_per_1000": 1000 * sum(s["gc_runs"][2] for s in stats) / count,
                   "cpu_per_task": cpu / left, "db_cpu_per_task": database_cpu / left,
                   # The worker's main thread (the consumer; under the threads pool the other
                   # threads are the pool's, and tracking's writer).
                   "main_cpu_per_task": (threads_after.get(worker.pid, 0.0)
                                         - threads_before.get(worker.pid, 0.0)) / left}
        if mode == "timed":
            figures["statements_per_task"] = sum(s["statements"] for s in stats) / count
            opening = sum(s["opening_cpu"] for s in stats)
            # The writer thread's life includes opening the store: counted once, apart.
            figures["handler_cpu_per_task"] = sum(s["handler_cpu"] for s in stats) / count
            figures["writer_cpu_per_task"] = (sum(s["writer_cpu"] for s in stats)
                                              - opening) / count
            figures["tracking_cpu_per_task"] = (figures["handler_cpu_per_task"]
                                                + figures["writer_cpu_per_task"])
            figures["opening_cpu_per_process"] = opening / len(stats)
        if tracking:
            with self.engine.connect() as connection:
                recorded = connection.execute(sa.text(
                    "SELECT count(*) FROM goatbeat_execution WHERE run_state = 'succeeded' "
                    "AND run_attempts = 1")).scalar_one()
            figures["recorded"] = recorded / count
        return figures


def _spread(values: Sequence[float], scale: float = 1.0, digits: int = 0) -> str:
    """The median and the range of ``values``: "median (min-max)"."""
    def fmt(value: float) -> str:
        return f"{scale * value:,.{digits}f}"
    return (f"{fmt(statistics.median(values))} "
            f"({fmt(min(values))}-{fmt(max(values))})")


def _change(pairs: Sequence[tuple[float, float]]) -> str:
    """The relative change from without to with, run pair by run pair: median (min-max)."""
    changes = [100 * (on - off) / off for off, on in pairs]
    return (f"{statistics.median(changes):+.1f}% "
            f"({min(changes):+.1f}% to {max(changes):+.1f}%)")


def _line(rep: str, pool: str, mode: str, figures: dict[str, float]) -> str:
    """One run's figures, as printed as it ends."""
    line = (f"{rep} {pool:8s} {mode:9s} {figures['rate']:6.0f} tasks/s, worker CPU "
            f"{1e6 * figures['cpu_per_task']:5.0f} us/task (main thread "
            f"{1e6 * figures['main_cpu_per_task']:4.0f}; garbage collection "
            f"{1e6 * figures['gc_cpu_per_task']:3.0f}, {figures['gc_full_per_1000']:.1f} full "
            "per 1000 tasks)")
    if mode == "timed":
        line += (f", tracking's own {1e6 * figures['tracking_cpu_per_task']:3.0f} us/task "
                 f"(handlers {1e6 * figures['handler_cpu_per_task']:3.0f}, writer "
                 f"{1e6 * figures['writer_cpu_per_task']:3.0f}) (+ "
                 f"{1e3 * figures['opening_cpu_per_process']:.0f} ms once per process to open "
                 f"the store), {figures['statements_per_task']:.3f} statements/task")
    if "recorded" in figures:
        line += f", {figures['recorded']:.0%} recorded"
    return line


def main(argv: Sequence[str] | None = None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=6,
                        help="sets of runs (without, with tracking) per pool")
    parser.add_argument("--pools", default="prefork,threads")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--receivers", action="store_true",
                        help="add to each set a run with receivers that do nothing: what "
                             "Celery's sending the two task signals costs")
    parser.add_argument("--timed", type=int, default=2,
                        help="runs per pool, after the sets, with tracking's own code timed")
    parser.add_argument("--profile", type=Path, default=None,
                        help="write py-spy's samples of each run's worker to this directory")
    args = parser.parse_args(argv)
    redis_url = os.environ.get("GOATBEAT_BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
    pools = args.pools.split(",")
    modes = ["off", "receivers", "on"] if args.receivers else ["off", "on"]
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-tracking-") as workdir:
        if args.profile is not None:
            args.profile.mkdir(parents=True, exist_ok=True)
        bench = Bench(redis_url, _pg_url(), Path(workdir), args.profile)
        try:
            runs = [(f"rep {rep + 1}", pool, mode) for rep in range(args.reps)
                    for pool in pools
                    # Each rep is one set of adjacent runs per pool, compared with each other;
                    # the order reverses from rep to rep (ABBA), so that a machine getting
                    # busier or quieter favours none.
                    for mode in (modes if rep % 2 == 0 else modes[::-1])]
            runs += [(f"timed {index + 1}", pool, "timed") for index in range(args.timed)
                     for pool in pools]
            for label, pool, mode in runs:
                figures = bench.run(pool=pool, concurrency=args.concurrency, mode=mode,
                                    count=args.tasks)
                results.setdefault((pool, mode), []).append(figures)
                print(_line(label, pool, mode, figures), flush=True)
        finally:
            bench.close()
    print(f"\n{args.tasks} no-op tasks per run, concurrency {args.concurrency}, {args.reps} "
          "sets of runs per pool; median (min-max), changes set by set:")
    for pool in pools:
        off = results[(pool, "off")]

        def both(name: str, mode: str, scale: float = 1.0, digits: int = 0,
                 off: list[dict[str, float]] = off, pool: str = pool) -> str:
            other = results[(pool, mode)]
            return (f"without {_spread([f[name] for f in off], scale, digits)}, "
                    f"{mode} {_spread([f[name] for f in other], scale, digits)}; change "
                    + _change([(a[name], b[name]) for a, b in zip(off, other, strict=True)]))

        print(f"  {pool}:")
        for mode in modes[1:]:
            print(f"    throughput (tasks/s)       {both('rate', mode)}\n"
                  f"    worker CPU (us/task)       {both('cpu_per_task', mode, 1e6)}\n"
                  f"    of which main thread       {both('main_cpu_per_task', mode, 1e6)}")
        on = results[(pool, "on")]
        print(f"    garbage collection         without "
              f"{_spread([f['gc_cpu_per_task'] for f in off], 1e6, 1)}, with "
              f"{_spread([f['gc_cpu_per_task'] for f in on], 1e6, 1)} us/task\n"
              f"    database                   "
              f"{_spread([f['db_cpu_per_task'] for f in on], 1e6)} us/task of session CPU")
        timed = results.get((pool, "timed"))
        if timed:
            own = [f["tracking_cpu_per_task"] for f in timed]
            base = statistics.median(f["cpu_per_task"] for f in off)
            print(f"    tracking's code (us/task)  {_spread(own, 1e6)} = "
                  f"{_spread([100 * value / base for value in own], digits=1)}% of the "
                  f"worker's CPU without tracking (handlers "
                  f"{_spread([f['handler_cpu_per_task'] for f in timed], 1e6)}, writer "
                  f"{_spread([f['writer_cpu_per_task'] for f in timed], 1e6)}), plus "
                  f"{_spread([f['opening_cpu_per_process'] for f in timed], 1e3)} ms once per "
                  "process to open the store\n"
                  f"    round trips                "
                  f"{_spread([f['statements_per_task'] for f in timed], digits=3)} per task")
    return 0


if __name__ == "__main__":
    sys.exit(main())
