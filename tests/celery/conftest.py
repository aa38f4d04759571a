"""Fixtures shared by the Celery-facing tests: a Redis broker, and a SQLite store for
``celery_app`` (modules that need another store define their own ``celery_config``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from .support import REDIS_URL


@pytest.fixture
def broker() -> Iterator[tuple[Celery, redis.Redis, str]]:
    """A Celery app on the real Redis, a client to look in it, and a queue of this test's own."""
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.fail(f"Redis is required but unreachable at {REDIS_URL}: {exc}", pytrace=False)
    queue = f"goatbeat-test-{uuid.uuid4().hex}"
    app = Celery("submit", broker=REDIS_URL, set_as_current=False)
    app.conf.task_default_queue = queue
    yield app, client, queue
    client.delete(queue)
    client.close()
    app.close()


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'goatbeat.sqlite3'}"


@pytest.fixture
def celery_config(database_url: str) -> dict[str, Any]:
    return {
        "broker_url": "memory://",
        # A queue of this test's own: the memory transport's queues are shared by the whole
        # process, and a message an earlier test left in the default one reached this test's
        # worker (seen: another module's every-10s occurrence among every-second's).
        "task_default_queue": f"goatbeat-test-{uuid.uuid4().hex[:12]}",
        "result_backend": "cache+memory://",
        "goatbeat_database_url": database_url,
        "goatbeat_lease_ttl": 3,
        "goatbeat_lease_renew_interval": 1,
        "goatbeat_max_interval": 0.2,
        "beat_schedule": {"every-second": {"task": "rec.record", "schedule": 1.0,
                                           "args": ["tick"], "options": {"priority": 5}}},
    }
