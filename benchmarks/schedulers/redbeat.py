"""RedBeat on Redis (the run's Redis database, the broker's on Redis, under the ``redbeat:`` key
prefix)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from functools import cached_property
from typing import Any

import populate

from .base import Adapter


class RedBeat(Adapter):
    kind = "redbeat"
    label = "RedBeat (Redis)"
    scheduler = "redbeat.RedBeatScheduler"

    @cached_property
    def app(self) -> Any:
        """A Celery app configured as the beat process's is, for RedBeat's own helpers."""
        from celery import Celery

        app = Celery("bench-loader", broker=self.world.broker_url, set_as_current=False)
        app.conf.redbeat_redis_url = self.world.redis_url
        return app

    def load(self, plan: populate.Plan) -> None:
        # The runner has emptied the Redis database: no entries are left from an earlier plan.
        populate.redbeat(self.world.redis, self.app, plan)

    def failover_settings(self, ttl: int, poll: int) -> dict[str, Any]:
        # A standby retries the lock every loop interval.
        return {"redbeat_lock_timeout": ttl, "beat_max_loop_interval": poll}

    def edit_due_now(self, name: str) -> None:
        from redbeat.schedulers import RedBeatSchedulerEntry, ensure_conf

        conf = ensure_conf(self.app)
        entry = RedBeatSchedulerEntry.from_key(conf.key_prefix + name, app=self.app)
        entry.reschedule(last_run_at=datetime.now(timezone.utc) - timedelta(seconds=7200))

    @contextmanager
    def idle_tick(self) -> Iterator[Callable[[], None]]:
        from redbeat.schedulers import ensure_conf

        conf = ensure_conf(self.app)
        client = self.world.redis
        lock = client.lock("bench-idle-lock", timeout=60)
        lock.acquire()

        def call() -> None:
            # What RedBeatScheduler.tick() sends when nothing is due: the lock extension and
            # the pipeline of two range reads.
            lock.extend(60, replace_ttl=True)
            now = time.time()
            with client.pipeline() as pipe:
                pipe.zrangebyscore(conf.schedule_key, 0, now)
                pipe.zrangebyscore(conf.schedule_key, f"({now}", now + 300, start=0, num=1)
                pipe.execute()

        try:
            yield call
        finally:
            lock.release()
