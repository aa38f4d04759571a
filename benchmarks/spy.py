"""Where a goatbeat beat process spends its time while it dispatches a burst, by py-spy.

    .venv/bin/python benchmarks/spy.py [--due 20000] [--gil] [--out profile.txt]

Loads ``--due`` schedules due at one instant (``populate``, as ``compare.py --bench dispatch``
does), starts ``celery -A benchproj beat -S goatbeat_celery.Scheduler`` the same way, attaches
``py-spy record`` to it once it is idle, stops it when every message is in the broker, and
prints each part's share of the samples and, from the beat process's CPU time between
start-up and the last message, of the CPU per message. ``--gil`` keeps only the samples of the
thread holding the GIL (the process's Python work; without it, threads waiting on a socket
count too). The raw stacks (py-spy's collapsed format) stay in ``--out``. Needs py-spy (in the
``bench`` extra) and the same PostgreSQL and Redis as ``compare.py`` (``--redis-db``, default
12, must be empty).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from sqlalchemy.engine import make_url

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import populate  # noqa: E402
from compare import DEFAULT_PG, DEFAULT_REDIS, Bench, running  # noqa: E402
from schedulers import World, log  # noqa: E402
from schedulers.goatbeat import Goatbeat  # noqa: E402

#: Parts of the process, each named by the frames that mark it; a sample counts for the first
#: part one of its frames matches, in this order (the innermost parts first). A frame reads
#: ``Class.function`` in some versions of py-spy and ``function (path:line)`` in others: each
#: part is marked both ways.
PARTS = (
    ("kombu: a new Redis client object per publish",
     ("Channel._create_client", "_create_client (kombu/transport/redis.py")),
    ("kombu and redis-py: writing a publish batch (one pipeline per flush)",
     ("_ProducerBatch.flush", "PublishBatch.flush", "flush (kombu/")),
    ("redis-py: the LPUSH command (send, read the reply)",
     ("Redis.execute_command", "execute_command (redis/client.py")),
    ("kombu: the rest of the publish", ("Producer.publish", "publish (kombu/messaging.py")),
    ("Celery: building the message (amqp.as_task_v2)",
     ("AMQP.as_task_v2", "as_task_v2 (celery/app/amqp.py")),
    ("Celery: the rest of send_task", ("Celery.send_task", "send_task (celery/app/base.py")),
    ("Celery: Task.apply_async itself", ("Task.apply_async", "apply_async (celery/app/task.py")),
    ("goatbeat: marking the batch submitted", ("mark_submitted",)),
    ("goatbeat: the submitter (headers, options, checks)",
     ("CelerySubmitter.", "(goatbeat_celery/beat/submitter.py")),
    ("goatbeat: reading and decoding the due rows", ("due_schedules",)),
    ("goatbeat: the claim (lock, executions, advance)",
     ("SQLClaims.claim", "SQLStore.claim", "claim (goatbeat_celery/store/")),
    ("goatbeat: judging alerts",
     ("AlertWatcher.look", "look (goatbeat_celery/core/loop/alerts.py")),
    ("goatbeat: planning (validation, trigger, misfires)",
     ("Planner.plan", "plan (goatbeat_celery/core/loop/planner.py")),
    ("goatbeat: recording the batch (observers)",
     ("SubmissionPipeline.settle", "SubmissionPipeline._record",
      "settle (goatbeat_celery/core/loop/submission.py",
      "_record (goatbeat_celery/core/loop/submission.py")),
    ("goatbeat: waiting for the next wake-up",
     ("Engine.wait", "wait (goatbeat_celery/core/loop/engine.py")),
    ("goatbeat: the rest of the loop", ("Engine._dispatch", "Engine.tick",
                                        "(goatbeat_celery/core/loop/")),
)


def shares(path: Path) -> tuple[int, Counter[str]]:
    """The samples of a py-spy raw file, and how many fell in each part."""
    found: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        samples = int(count)
        total += samples
        frames = stack.split(";")
        part = next((name for name, marks in PARTS
                     if any(mark in frame for mark in marks for frame in frames)), "other")
        found[part] += samples
    return total, found


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--due", type=int, default=20_000)
    parser.add_argument("--gil", action="store_true", help="only the thread holding the GIL")
    parser.add_argument("--rate", type=int, default=200, help="samples per second")
    parser.add_argument("--out", type=Path, default=Path("profile.txt"))
    parser.add_argument("--redis-db", type=int, default=12)
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    pg = make_url(os.environ.get("GOATBEAT_BENCH_PG_URL", DEFAULT_PG))
    world = World(pg.set(drivername="postgresql+psycopg"),
                  os.environ.get("GOATBEAT_BENCH_REDIS_URL", DEFAULT_REDIS), args.redis_db)
    adapter = Goatbeat(world)
    try:
        adapter.setup()
        bench = Bench(world, [adapter], 1, False)
        queue = world.fresh_queue()
        plan = bench._load_due("goatbeat", lambda due: populate.Plan(
            count=args.due, every=3600, first_due=due), args.due)
        beat = bench.launch("goatbeat", queue)
        with running([beat]):
            beat.wait_ready(timeout=60)
            idle_cpu = beat.cpu()
            command = [spy, "record", "--pid", str(beat.popen.pid), "--rate", str(args.rate),
                       "--threads", "--format", "raw", "-o", str(args.out)]
            recorder = subprocess.Popen(command + (["--gil"] if args.gil else []),
                                        stdout=subprocess.DEVNULL)
            while time.time() < plan.first_due + 120 and world.llen(queue) < args.due:
                time.sleep(0.05)
            took = time.time() - plan.first_due
            cpu = beat.cpu() - idle_cpu
            recorder.send_signal(signal.SIGINT)
            recorder.wait(60)
        sent = world.llen(queue)
        log(f"{sent:,} of {args.due:,} in the broker {took:.2f} s after the due "
            f"instant ({args.due / took:,.0f}/s); beat process CPU {cpu:.1f} s from start-up "
            f"to the last message, {1e6 * cpu / max(1, sent):,.0f} µs per message")
        world.delete_queue(queue)
    finally:
        adapter.teardown()
        world.close()
    total, found = shares(args.out)
    print(f"{total:,} samples{' (GIL holder only)' if args.gil else ''}; raw stacks in "
          f"{args.out}")
    # Each part's share of the process's CPU per message: shares of the GIL holder's samples
    # apply to its Python work; CPU spent with the GIL released (socket calls) falls on the
    # part that made the call.
    per_message = 1e6 * cpu / max(1, sent)
    for name, samples in sorted(found.items(), key=lambda item: -item[1]):
        share = samples / total
        print(f"{100 * share:5.1f} %  {per_message * share:6.0f} µs/message  {name}")
    for group in ("goatbeat", "other"):
        share = sum(samples for name, samples in found.items()
                    if (name.split(":")[0] == "goatbeat") == (group == "goatbeat")) / total
        label = "goatbeat, in all" if group == "goatbeat" else "Celery, kombu, redis-py and other"
        print(f"{100 * share:5.1f} %  {per_message * share:6.0f} µs/message  {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
