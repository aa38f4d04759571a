"""What sending through ``Task.apply_async`` costs against ``send_task``, on a real Redis, and
what RabbitMQ's publisher confirms cost.

    .venv/bin/python benchmarks/submit.py [--messages 20000] [--reps 5]
    .venv/bin/python benchmarks/submit.py --broker all [--messages 5000]

goatbeat sends a task registered in the beat process through its own ``apply_async`` (as
Celery's beat does) and any other name through ``send_task``. This script submits the same
batch of dispatches through :class:`goatbeat_celery.beat.submitter.CelerySubmitter` both ways,
alternating within the run (registered: apply_async; the same name unregistered: send_task,
which is what every message took before), and prints messages per second for each with the
median over ``--reps`` repetitions and the cost of apply_async as a percentage.

It needs Redis (``GOATBEAT_BENCH_REDIS_URL``, default redis://127.0.0.1:6379/13); the
database is emptied before and after. A plain script that prints figures, not a test.

``--broker`` picks the brokers: ``redis`` (the default), ``amqp`` (RabbitMQ,
``GOATBEAT_BENCH_AMQP_URL``, default amqp://guest:guest@127.0.0.1:5672//, measured twice:
with publisher confirms, as goatbeat's beat publishes on AMQP, and without), or ``all``. Each
is measured the same way and printed one after the other, then the rates side by side. The
RabbitMQ runs publish persistent messages to a durable queue of their own, deleted afterwards.
Without confirms a publish returns once written to the socket, so that rate is what the client
can write; the queue's count is checked (untimed) before the next run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

import kombu
import redis
from celery import Celery

from goatbeat_celery.beat.submitter import CelerySubmitter
from goatbeat_celery.core.types.claims import Dispatch
from goatbeat_celery.core.types.execution import Execution, ExecutionState, idempotency_key

TASK = "bench.noop"
QUEUE = "bench-submit"


def make_app(url: str, *, registered: bool, queue: str = QUEUE,
             transport_options: dict[str, object] | None = None) -> Celery:
    app = Celery("bench_submit", broker=url, set_as_current=False)
    app.conf.task_default_queue = queue
    if transport_options:
        app.conf.broker_transport_options = transport_options
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


class RedisQueue:
    """The benchmark's queue on Redis: a list."""

    def __init__(self, url: str) -> None:
        self.url, self.name = url, QUEUE
        self.client = redis.Redis.from_url(url)
        self.client.flushdb()

    def drain(self, expected: int) -> None:
        assert self.client.llen(self.name) == expected
        self.client.delete(self.name)

    def close(self) -> None:
        self.client.flushdb()
        self.client.close()


class AmqpQueue:
    """The benchmark's queue on RabbitMQ: durable, of this run's own, deleted at the end."""

    def __init__(self, url: str) -> None:
        self.url, self.name = url, f"{QUEUE}-{os.getpid()}"
        self.connection = kombu.Connection(url)
        self.channel = self.connection.channel()

    def drain(self, expected: int) -> None:
        # Unconfirmed publishes may still be on their way: poll, with a deadline.
        deadline = time.monotonic() + 60
        while True:
            count = self.channel.queue_declare(self.name, durable=True,
                                               passive=True).message_count
            if count >= expected or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert count == expected, (count, expected)
        self.channel.queue_purge(self.name)

    def close(self) -> None:
        try:
            self.channel.queue_delete(self.name)
        finally:
            self.connection.release()


def rate(app: Celery, batch: Sequence[Dispatch], queue: RedisQueue | AmqpQueue) -> float:
    submitter = CelerySubmitter(app)
    started = time.perf_counter()
    for offset in range(0, len(batch), 500):  # the engine's batch size
        result = submitter.submit(batch[offset:offset + 500], token=1, timeout=30.0)
        assert not result.failed and not result.rejected, (result.failed, result.rejected)
    elapsed = time.perf_counter() - started
    queue.drain(len(batch))
    return len(batch) / elapsed


def measure(label: str, queue: RedisQueue | AmqpQueue, messages: int, reps: int,
            transport_options: dict[str, object] | None = None) -> dict[str, float]:
    """Both ways of sending on one broker, alternated; prints and returns the medians."""
    apps = {name: make_app(queue.url, registered=registered, queue=queue.name,
                           transport_options=transport_options)
            for name, registered in (("send_task", False), ("apply_async", True))}
    rates: dict[str, list[float]] = {name: [] for name in apps}
    try:
        for round_ in range(reps):
            # Alternate which goes first, so neither always meets a warmer server.
            order = list(apps) if round_ % 2 == 0 else list(reversed(apps))
            for name in order:
                rates[name].append(rate(apps[name], dispatches(messages, round_), queue))
    finally:
        for app in apps.values():
            app.pool.force_close_all()
    medians = {name: statistics.median(values) for name, values in rates.items()}
    print(f"-- {label}")
    for name, values in rates.items():
        print(f"{name:12s} median {medians[name]:8,.0f} messages/s  "
              f"(runs: {', '.join(f'{v:,.0f}' for v in values)})")
    cost = 1 - medians["apply_async"] / medians["send_task"]
    print(f"apply_async costs {cost:.1%} of send_task's rate "
          f"({messages:,} messages x {reps} reps, load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)")
    return medians


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--broker", choices=("redis", "amqp", "all"), default="redis",
                        help="redis (default); amqp: RabbitMQ with and without publisher "
                             "confirms; all: the three")
    args = parser.parse_args(argv)
    redis_url = os.environ.get("GOATBEAT_BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
    amqp_url = os.environ.get("GOATBEAT_BENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")
    results: dict[str, dict[str, float]] = {}
    if args.broker in ("redis", "all"):
        redis_queue = RedisQueue(redis_url)
        try:
            results["redis"] = measure("Redis", redis_queue, args.messages, args.reps)
        finally:
            redis_queue.close()
    if args.broker in ("amqp", "all"):
        amqp_queue = AmqpQueue(amqp_url)
        try:
            # As goatbeat's beat publishes on AMQP: each publish waits for RabbitMQ's ack.
            results["rabbitmq, confirms"] = measure(
                "RabbitMQ, publisher confirms (goatbeat's setting)", amqp_queue, args.messages,
                args.reps, transport_options={"confirm_publish": True})
            results["rabbitmq, no confirms"] = measure(
                "RabbitMQ, no confirms (confirm_publish=False)", amqp_queue, args.messages,
                args.reps, transport_options={"confirm_publish": False})
        finally:
            amqp_queue.close()
    if len(results) > 1:
        print("-- side by side (median messages/s; send_task / apply_async)")
        for label, medians in results.items():
            print(f"{label:22s} {medians['send_task']:8,.0f} / {medians['apply_async']:8,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
