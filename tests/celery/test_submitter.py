"""The Celery submitter on a real Redis broker: a message that cannot be sent fails alone."""

from __future__ import annotations

import base64
import json
import sqlite3
import time
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
import redis
from celery import Celery, Task
from celery.beat import BeatLazyFunc
from celery.signals import after_task_publish
from kombu import Exchange, Queue

from goatbeat_celery.beat.submitter import FLUSH_EVERY, CelerySubmitter
from goatbeat_celery.config import LAZY_MARKER
from goatbeat_celery.core.types.claims import Dispatch

from .support import dispatch


def test_messages_that_cannot_be_sent_fail_alone_and_the_rest_reach_the_broker(
        broker: tuple[Celery, redis.Redis, str]) -> None:
    app, client, queue = broker
    good = [dispatch(f"good-{index}") for index in range(3)]
    bad = [
        dispatch("retry", {"retry": False}),
        dispatch("countdown", {"countdown": "soon"}),
        dispatch("serializer", {"serializer": "nope"}),
        dispatch("queue", {"queue": 5}),
        dispatch("task-id", {"task_id": "mine"}),
        dispatch("headers", {"headers": [1]}),
        dispatch("kwargs", kwargs=[1]),
        dispatch("args", args=5),
    ]
    # The bad ones first: a message that fails must not stop the ones after it.
    batch = [*bad, *good]

    result = CelerySubmitter(app).submit(batch, token=1, timeout=5.0)

    assert result.accepted == [d.key for d in good]
    assert result.failed == {}, "the broker was up: nothing waits for an outage"
    assert set(result.rejected) == {d.key for d in bad}
    assert "options.retry" in result.rejected[bad[0].key]
    assert client.llen(queue) == len(good)


def test_a_serializer_unknown_to_kombu_is_rejected_by_kombu_itself(
        broker: tuple[Celery, redis.Redis, str]) -> None:
    """A row edited by hand to a serializer the door would refuse: kombu's own error, alone."""
    app, client, queue = broker
    result = CelerySubmitter(app).submit([dispatch("s", {"serializer": "nope"}),
                                          dispatch("ok")], token=1, timeout=5.0)

    assert len(result.accepted) == 1 and len(result.rejected) == 1
    assert "nope" in next(iter(result.rejected.values()))
    assert client.llen(queue) == 1


def test_a_registered_task_is_sent_through_its_own_apply_async_as_celery_beat_does(
        broker: tuple[Celery, redis.Redis, str]) -> None:
    app, client, queue = broker
    calls: list[str] = []

    class Locked(Task):  # type: ignore[misc]
        def apply_async(self, *args: Any, **options: Any) -> Any:
            calls.append(options["task_id"])  # where celery-once would take its lock
            return super().apply_async(*args, **options)

    special = f"{queue}-special"
    app.conf.task_routes = {"app.locked": {"queue": special}}

    @app.task(base=Locked, name="app.locked", shared=False)
    def locked(x: int, a: int) -> None:  # pragma: no cover - never run here
        pass

    one = dispatch("locked-schedule")
    one = Dispatch(execution=one.execution, task="app.locked", args=(1,), kwargs={"a": 2},
                   options={})
    try:
        result = CelerySubmitter(app).submit([one], token=7, timeout=5.0)

        assert result.accepted == [one.key]
        assert calls == [one.key], "apply_async called once, with the key as the task id"
        [raw] = client.lrange(special, 0, -1)
        message = json.loads(raw)
        headers = message["headers"]
        assert headers["id"] == one.key and headers["task"] == "app.locked"
        assert headers["celery_beat_task"] is True
        assert headers["goatbeat_schedule"] == "locked-schedule"
        assert headers["goatbeat_token"] == 7
        # Which send of the run this is: the execution's attempts.
        assert headers["goatbeat_send"] == one.execution.attempts
    finally:
        client.delete(special)


def test_an_unregistered_task_name_goes_through_send_task_with_the_same_headers(
        broker: tuple[Celery, redis.Redis, str]) -> None:
    app, client, queue = broker

    result = CelerySubmitter(app).submit([dispatch("remote")], token=1, timeout=5.0)

    assert len(result.accepted) == 1
    [raw] = client.lrange(queue, 0, -1)
    headers = json.loads(raw)["headers"]
    assert headers["task"] == "app.job" and headers["celery_beat_task"] is True


def test_a_starting_deadline_is_sent_as_the_messages_absolute_expires(
        broker: tuple[Celery, redis.Redis, str]) -> None:
    app, client, queue = broker
    one = dispatch("deadline")
    deadline = one.execution.due_at + timedelta(minutes=5)
    one = Dispatch(execution=replace(one.execution, expires_at=deadline), task="app.job",
                   args=(), kwargs={}, options={"expires": 3600})

    result = CelerySubmitter(app).submit([one], token=1, timeout=5.0)

    assert result.accepted == [one.key]
    [raw] = client.lrange(queue, 0, -1)
    expires = datetime.fromisoformat(json.loads(raw)["headers"]["expires"])
    assert expires == deadline, "the earlier of the deadline and the schedule's own expires"


def test_lazy_arguments_are_called_as_each_run_is_sent(
        broker: tuple[Celery, redis.Redis, str]) -> None:
    app, client, queue = broker
    calls: list[int] = []

    def counter() -> int:
        calls.append(1)
        return len(calls)

    funcs = {"lazy": {"args.0": BeatLazyFunc(counter), "kwargs.n": BeatLazyFunc(counter)}}
    first, second = dispatch("lazy"), dispatch("lazy")
    placeholder = {LAZY_MARKER: "args.0"}
    first, second = (Dispatch(execution=d.execution, task="app.job", args=(placeholder,),
                              kwargs={"n": {LAZY_MARKER: "kwargs.n"}}, options={})
                     for d in (first, second))

    result = CelerySubmitter(app, lazy=funcs).submit([first, second], token=1, timeout=5.0)

    assert len(result.accepted) == 2
    bodies = [json.loads(base64.b64decode(json.loads(raw)["body"]))
              for raw in reversed(client.lrange(queue, 0, -1))]
    assert [(body[0], body[1]) for body in bodies] == [([1], {"n": 2}), ([3], {"n": 4})]


def test_a_lazy_argument_this_replica_does_not_know_fails_its_message_alone(
        broker: tuple[Celery, redis.Redis, str]) -> None:
    app, _, _ = broker
    unknown = dispatch("other")
    unknown = Dispatch(execution=unknown.execution, task="app.job",
                       args=({LAZY_MARKER: "args.0"},), kwargs={}, options={})

    result = CelerySubmitter(app, lazy={"other": {}}).submit([unknown, dispatch("ok")],
                                                             token=1, timeout=5.0)

    assert len(result.accepted) == 1
    assert "lazy argument" in result.rejected[unknown.key]


def _while_published(each: Any) -> Any:
    """``each(index)`` called from after_task_publish for every message, in order; a receiver
    held strongly and disconnected by the caller."""
    count = [0]

    def receiver(**_: Any) -> None:
        each(count[0])
        count[0] += 1

    after_task_publish.connect(receiver, weak=False)
    return receiver


#: How many messages of a batch the broker holds after each flush: a first message alone,
#: then each flush as large as all before it, then FLUSH_EVERY at a time.
WRITTEN_AFTER = (0, 1, 2, 4, 8, 16, 32, 64, 128, 128 + FLUSH_EVERY)


def test_messages_reach_redis_in_growing_flushes_of_at_most_a_hundred_in_order(
        broker: tuple[Celery, redis.Redis, str]) -> None:
    """On Redis the messages go in kombu's publish batches: each flush holds as many as were
    written before it (1, 1, 2, 4, ...) up to FLUSH_EVERY, each written before the next
    message is built, the order kept."""
    app, client, queue = broker
    batch = [dispatch(f"bulk-{index:03d}") for index in range(FLUSH_EVERY + FLUSH_EVERY // 2)]
    seen: list[int] = []
    receiver = _while_published(lambda _index: seen.append(client.llen(queue)))
    try:
        result = CelerySubmitter(app).submit(batch, token=1, timeout=10.0)
    finally:
        after_task_publish.disconnect(receiver)

    assert result.accepted == [d.key for d in batch] and not result.failed
    # When message i was handed over, the flushes before it had written every earlier batch.
    assert seen == [max(b for b in WRITTEN_AFTER if b <= index) for index in range(len(batch))]
    ids = [json.loads(raw)["headers"]["id"] for raw in reversed(client.lrange(queue, 0, -1))]
    assert ids == [d.key for d in batch]


def test_a_batch_redis_refuses_counts_as_failed_and_the_batches_before_it_as_accepted(
        broker: tuple[Celery, redis.Redis, str]) -> None:
    """A flush that fails leaves its messages uncertain: they fail with the rest (sent again
    under their keys after the backoff), and only the batches already written are accepted."""
    app, client, queue = broker
    batch = [dispatch(f"cut-{index:03d}") for index in range(FLUSH_EVERY + FLUSH_EVERY // 2)]
    breaking_at = FLUSH_EVERY + 10

    def each(index: int) -> None:
        if index == breaking_at:
            # The queue's key becomes a string: every LPUSH of the next flush is refused.
            client.delete(queue)
            client.set(queue, "not a list")

    receiver = _while_published(each)
    try:
        result = CelerySubmitter(app).submit(batch, token=1, timeout=10.0)
    finally:
        after_task_publish.disconnect(receiver)
    client.delete(queue)

    written = max(b for b in WRITTEN_AFTER if b < breaking_at)
    assert result.accepted == [d.key for d in batch[:written]]
    assert list(result.failed) == [d.key for d in batch[written:]]
    assert not result.rejected, "the broker failed, not the messages"
    assert "WRONGTYPE" in result.failed[batch[-1].key], "the broker's own error is shown"


@pytest.mark.parametrize("transport", ["memory", "redis"])
def test_an_outage_mid_batch_keeps_accepted_exactly_what_the_broker_holds(
        broker: tuple[Celery, redis.Redis, str], transport: str) -> None:
    """Where the transport publishes at once (kombu's memory transport, as RabbitMQ's) every
    message written before the outage is accepted; on Redis, those still held in the publish
    batch are dropped with it and fail. Either way the accepted keys are those in the queue."""
    redis_app, client, queue = broker
    app = redis_app
    if transport == "memory":
        app = Celery("submit-memory", broker="memory://", set_as_current=False)
        app.conf.task_default_queue = queue

    def unreachable() -> int:
        raise ConnectionResetError("the broker went away")

    batch = [dispatch(f"outage-{index}") for index in range(8)]
    cut = batch[5]
    batch[5] = Dispatch(execution=cut.execution, task="app.job",
                        args=({LAZY_MARKER: "args.0"},), kwargs={}, options={})
    lazy = {cut.execution.schedule_name: {"args.0": BeatLazyFunc(unreachable)}}

    result = CelerySubmitter(app, lazy=lazy).submit(batch, token=1, timeout=5.0)

    if transport == "memory":
        with app.connection_for_write() as conn, conn.SimpleQueue(queue) as simple:
            held = [simple.get(timeout=1).headers["id"] for _ in range(simple.qsize())]
        app.close()
    else:
        held = [json.loads(raw)["headers"]["id"] for raw in reversed(client.lrange(queue, 0, -1))]
    assert result.accepted == held
    # On Redis, those the growing flushes wrote before the sixth message.
    written = 5 if transport == "memory" else max(b for b in WRITTEN_AFTER if b <= 5)
    assert held == [d.key for d in batch[:written]]
    assert list(result.failed) == [d.key for d in batch if d.key not in held]
    assert "ConnectionResetError" in result.failed[batch[-1].key]


def test_messages_held_in_a_publish_batch_past_the_deadline_are_dropped_unwritten(
        broker: tuple[Celery, redis.Redis, str]) -> None:
    """A leader frozen while it builds a batch wakes past its lease's deadline: what it held
    must not reach the broker (the next leader sends those claims), and all of it fails."""
    app, client, queue = broker
    timeout = 0.2

    def slow() -> int:
        time.sleep(timeout * 2)  # the time the batch has runs out while this message is built
        return 1

    first = dispatch("frozen")
    first = Dispatch(execution=first.execution, task="app.job", args=({LAZY_MARKER: "args.0"},),
                     kwargs={}, options={})
    batch = [first, dispatch("after")]

    result = CelerySubmitter(app, lazy={"frozen": {"args.0": BeatLazyFunc(slow)}}).submit(
        batch, token=1, timeout=timeout)

    assert client.llen(queue) == 0, "nothing written after the deadline"
    assert result.accepted == [] and not result.rejected
    assert list(result.failed) == [d.key for d in batch]
    assert "deadline" in result.failed[first.key]


def test_queues_first_met_mid_batch_on_an_exchange_of_their_own_are_declared_and_reached(
        broker: tuple[Celery, redis.Redis, str]) -> None:
    """Queues are declared (bound to their exchange) once a batch, not once a message: a queue
    first met after others were sent still gets its binding, so its messages reach it."""
    app, client, queue = broker
    exchange = Exchange(f"{queue}-x", type="topic")  # direct ones need no binding on Redis
    names = [f"{queue}-a", f"{queue}-b", f"{queue}-c"]
    app.conf.task_queues = [Queue(names[0], exchange, routing_key="a"),
                            Queue(names[1], exchange, routing_key="b"),
                            Queue(names[2], exchange, routing_key="c", auto_delete=True)]
    order = [0, 0, 1, 0, 1, 2, 2, 0]
    batch = [dispatch(f"job-{i}", {"queue": names[which]}) for i, which in enumerate(order)]
    try:
        result = CelerySubmitter(app).submit(batch, token=1, timeout=5.0)
        lengths = [client.llen(name) for name in names]
    finally:
        client.delete(*names, f"_kombu.binding.{exchange.name}")

    assert result.accepted == [d.key for d in batch]
    assert lengths == [order.count(which) for which in range(3)]


# kombu's database transport maps its tables in a way SQLAlchemy 2.1 warns about.
@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SADeprecationWarning")
def test_a_database_broker_that_fails_a_publish_is_an_outage_not_the_message_s_fault(
        tmp_path: Any) -> None:
    """kombu's database transport raises SQLAlchemy's errors, and its session is unusable after
    one (two processes declaring a queue at once broke every later publish, and each schedule
    was set aside in turn): the batch waits, and the next connection sends it."""
    database = tmp_path / "broker.sqlite3"
    app = Celery("submit", broker=f"sqla+sqlite:///{database}", set_as_current=False)
    try:
        assert len(CelerySubmitter(app).submit([dispatch("first")], token=1,
                                               timeout=5.0).accepted) == 1
        # The database refuses the next messages with a constraint error, as it refused the
        # second of two processes inserting the same queue.
        with sqlite3.connect(database) as conn:
            conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON kombu_message "
                         "BEGIN SELECT RAISE(ABORT, 'refused'); END")
        batch = [dispatch("a"), dispatch("b")]
        result = CelerySubmitter(app).submit(batch, token=1, timeout=5.0)

        assert result.accepted == [] and result.rejected == {}
        assert set(result.failed) == {d.key for d in batch}
        assert "IntegrityError" in result.failed[batch[0].key]
        with sqlite3.connect(database) as conn:
            conn.execute("DROP TRIGGER refuse")
        again = CelerySubmitter(app).submit(batch, token=1, timeout=5.0)
        assert again.accepted == [d.key for d in batch]
    finally:
        app.close()
