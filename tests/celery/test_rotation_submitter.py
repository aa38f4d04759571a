"""The Celery submitter sends a rotated schedule's occurrence to its owner's queue on a real
Redis broker, under its own key, and records the queue; an occurrence without an index is
refused alone; with handover and nobody consuming any queue, the owner keeps it."""

from __future__ import annotations

import base64
import json
from dataclasses import replace

import redis
from celery import Celery

from goatbeat_celery.beat.submitter import CelerySubmitter

from .support import dispatch


def delivered(client: redis.Redis, queue: str) -> list[dict[str, object]]:
    """The messages waiting in ``queue``, oldest first (kombu pushes on the left): each one's
    task id and the body's args."""
    found = []
    for raw in reversed(client.lrange(queue, 0, -1)):
        message = json.loads(raw)
        args = json.loads(base64.b64decode(message["body"]))[0]
        found.append({"id": message["headers"]["id"], "args": args})
    return found


def test_each_occurrence_goes_to_its_owners_queue_under_its_own_key(
        broker: tuple[Celery, redis.Redis, str]) -> None:
    app, client, queue = broker
    queues = (f"{queue}-eu", f"{queue}-us")
    batch = [replace(dispatch(f"r{index}", args=[index]), rotate=queues, rotation_index=index)
             for index in range(4)]
    plain = dispatch("plain")
    try:
        result = CelerySubmitter(app).submit([*batch, plain], token=1, timeout=5.0)

        assert result.accepted == [d.key for d in (*batch, plain)]
        assert result.clusters == {d.key: queues[i % 2] for i, d in enumerate(batch)}
        assert delivered(client, queues[0]) == [{"id": batch[i].key, "args": [i]}
                                                for i in (0, 2)]
        assert delivered(client, queues[1]) == [{"id": batch[i].key, "args": [i]}
                                                for i in (1, 3)]
        assert client.llen(queue) == 1  # the plain schedule's, routed as before
    finally:
        client.delete(*queues)


def test_an_occurrence_without_its_index_is_refused_alone(
        broker: tuple[Celery, redis.Redis, str]) -> None:
    app, client, queue = broker
    unknown = replace(dispatch("r"), rotate=(f"{queue}-eu", f"{queue}-us"))
    result = CelerySubmitter(app).submit([unknown, dispatch("ok")], token=1, timeout=5.0)

    assert list(result.rejected) == [unknown.key]
    assert "rotate: the occurrence's index" in result.rejected[unknown.key]
    assert len(result.accepted) == 1 and client.llen(queue) == 1


def test_with_handover_and_nobody_consuming_any_queue_the_owner_keeps_it(
        broker: tuple[Celery, redis.Redis, str]) -> None:
    app, client, queue = broker
    queues = (f"{queue}-eu", f"{queue}-us")
    submitter = CelerySubmitter(app)
    handed = replace(dispatch("r"), rotate=queues, rotate_handover=True, rotation_index=1)
    try:
        result = submitter.submit([handed], token=1, timeout=5.0)

        # Redis knows nothing of consumers: the workers were asked, and none answered.
        assert submitter.presence.asks >= 1
        assert result.clusters == {handed.key: queues[1]}
        assert [m["id"] for m in delivered(client, queues[1])] == [handed.key]
    finally:
        submitter.presence.close()
        client.delete(*queues)
