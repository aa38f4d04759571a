"""A benchmarked scheduler's interface (:class:`Adapter`), and what they share (:class:`World`)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, ClassVar

import populate
import redis
import sqlalchemy as sa
from sqlalchemy.engine import URL


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class World:
    """The broker, the PostgreSQL server and the scratch directory of one benchmark run."""

    def __init__(self, pg: URL, redis_url: str, redis_db: int) -> None:
        self.pg = pg
        self.run = f"{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.broker_url = f"{redis_url}/{redis_db}"
        self.redis = redis.Redis.from_url(self.broker_url)
        if self.redis.dbsize():
            raise SystemExit(f"Redis database {self.broker_url} is not empty: pick another "
                             "with --redis-db (this script only ever empties its own)")
        self.workdir = Path(tempfile.mkdtemp(prefix="goatbeat-bench-"))
        self.admin = sa.create_engine(pg, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
        self.counter = 0
        self._databases: list[str] = []
        #: Keep the scratch directory (beat logs, publish records) after the run.
        self.keep = False

    def create_database(self, prefix: str) -> URL:
        """A fresh PostgreSQL database for this run, dropped by :meth:`close`."""
        name = f"{prefix}_{self.run}"
        with self.admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        self._databases.append(name)
        return self.pg.set(database=name)

    def close(self) -> None:
        """Drop the run's databases, empty its Redis database, remove its scratch directory."""
        with self.admin.connect() as conn:
            for name in self._databases:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        self.admin.dispose()
        self.redis.flushdb()  # our own database number only
        self.redis.close()
        if not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)
        else:
            log(f"logs and publish records kept in {self.workdir}")

    def fresh_queue(self) -> str:
        self.counter += 1
        return f"bench-{self.run}-{self.counter}"

    def llen(self, queue: str) -> int:
        return int(self.redis.llen(queue))


class Adapter:
    """One scheduler as the benchmark drives it: its store, its beat process, its limits.

    The runner calls :meth:`setup` once, then :meth:`load` before each scenario (after emptying
    the broker's database), launches ``celery -A benchproj beat -S`` :attr:`scheduler` with
    :meth:`env` added to the environment, and :meth:`teardown` at the end. A scenario the
    scheduler cannot take part in is named by its ``no_*`` attribute: the table's cell text.
    """

    #: The name ``--only`` takes and ``benchproj`` reads from ``BENCH_KIND``.
    kind: ClassVar[str]
    #: The column heading of the table.
    label: ClassVar[str]
    #: What ``celery beat -S`` is given.
    scheduler: ClassVar[str]
    #: Why an edit cannot be measured (None: :meth:`edit_due_now` works).
    no_edit: ClassVar[str | None] = None
    #: Why failover cannot be measured (None: :meth:`failover_settings` works).
    no_failover: ClassVar[str | None] = None
    #: Why an idle tick cannot be timed (None: :meth:`idle_tick` works).
    no_idle_tick: ClassVar[str | None] = None

    def __init__(self, world: World) -> None:
        self.world = world

    def setup(self) -> None:
        """Create and prepare the scheduler's store, once per run."""

    def teardown(self) -> None:
        """Close what :meth:`setup` and later calls opened (the world drops the databases)."""

    def load(self, plan: populate.Plan) -> None:
        """Replace the schedules in the store with ``plan``'s."""
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        """What the beat process needs in its environment, besides the common ``BENCH_*``."""
        return {}

    def failover_settings(self, ttl: int, poll: int) -> dict[str, Any]:
        """Celery settings of a replica: leadership lost ``ttl`` s after the leader's last
        renewal, a standby trying every ``poll`` s."""
        raise NotImplementedError(self.no_failover)

    def edit_due_now(self, name: str) -> float | None:
        """Edit schedule ``name`` to be due now, through the scheduler's own interface; returns
        the instant (epoch seconds) it is due at when that is later than now."""
        raise NotImplementedError(self.no_edit)

    def idle_tick(self) -> AbstractContextManager[Callable[[], None]]:
        """A call making the store requests of one idle tick of the beat process, from this
        process (open while the context lasts)."""
        raise NotImplementedError(self.no_idle_tick)
