"""What sending through ``Task.apply_async`` costs against ``send_task``, on a real Redis.

    .venv/bin/python benchmarks/submit.py [--messages 20000] [--reps 5]

goatbeat sends a task registered in the beat process through its own ``apply_async`` (as
Celery's beat does) and any other name through ``send_task``. This script submits the same
batch of dispatches through :class:`goatbeat_celery.submitter.CelerySubmitter` both ways,
alternating within the run (registered: apply_async; the same name unregistered: send_task,
which is what every message took before), and prints messages per second for each with the
median over ``--reps`` repetitions and the cost of apply_async as a percentage.

It needs Redis (``GOATBEAT_BENCH_REDIS_URL``, default redis://127.0.0.1:6379/13); the
database is emptied before and after. A plain script that prints figures, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

import redis
from celery import Celery

from goatbeat_celery.core.model import Dispatch, Execution, ExecutionState, idempotency_key
from goatbeat_celery.submitter import CelerySubmitter

TASK = "bench.noop"
QUEUE = "bench-submit"


def make_app(url: str, *, registered: bool) -> Celery:
    app = Celery("bench_submit", broker=url, set_as_current=False)
    app.conf.task_default_queue = QUEUE
    if registered:
        @app.task(name=TASK, shared=False)
        def noop(index: int, label: str = "") -> None:  # pragma: no cover - never run here
            pass
    app.finalize()
    return app


def dispatches(count: int, round_: int) -> list[Dispatch]:
    start = datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(days=round_)
    out = []
    for index in range(count):
        at = start + timedelta(seconds=index)
        execution = Execution(key=idempotency_key(f"s{index % 1000}", at),
                              schedule_name=f"s{index % 1000}", occurrence_at=at, due_at=at,
                              token=1, state=ExecutionState.CLAIMED, claimed_at=at, attempts=1)
        out.append(Dispatch(execution=execution, task=TASK, args=(index,),
                            kwargs={"label": "x"}, options={}))
    return out


def rate(app: Celery, batch: Sequence[Dispatch], client: redis.Redis) -> float:
    submitter = CelerySubmitter(app)
    started = time.perf_counter()
    for offset in range(0, len(batch), 500):  # the engine's batch size
        result = submitter.submit(batch[offset:offset + 500], token=1, timeout=30.0)
        assert not result.failed and not result.rejected, (result.failed, result.rejected)
    elapsed = time.perf_counter() - started
    assert client.llen(QUEUE) == len(batch)
    client.delete(QUEUE)
    return len(batch) / elapsed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args(argv)
    url = os.environ.get("GOATBEAT_BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
    client = redis.Redis.from_url(url)
    client.flushdb()
    apps = {"send_task": make_app(url, registered=False),
            "apply_async": make_app(url, registered=True)}
    rates: dict[str, list[float]] = {name: [] for name in apps}
    try:
        for round_ in range(args.reps):
            # Alternate which goes first, so neither always meets a warmer server.
            order = list(apps) if round_ % 2 == 0 else list(reversed(apps))
            for name in order:
                rates[name].append(rate(apps[name], dispatches(args.messages, round_), client))
    finally:
        client.flushdb()
        client.close()
    medians = {name: statistics.median(values) for name, values in rates.items()}
    for name, values in rates.items():
        print(f"{name:12s} median {medians[name]:8,.0f} messages/s  "
              f"(runs: {', '.join(f'{v:,.0f}' for v in values)})")
    cost = 1 - medians["apply_async"] / medians["send_task"]
    print(f"apply_async costs {cost:.1%} of send_task's rate "
          f"({args.messages:,} messages x {args.reps} reps, load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
