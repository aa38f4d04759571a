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

#: The RabbitMQ ``--broker amqp`` publishes to, unless ``GOATBEAT_BENCH_AMQP_URL`` says another.
DEFAULT_AMQP = "amqp://guest:guest@127.0.0.1:5672//"

def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Broker:
    """Where the beat processes publish: the queues a run makes there and how full they are."""

    #: The Celery broker URL the beat processes and the ceiling loop are given.
    url: str
    #: ``broker_transport_options`` of every app publishing there (benchproj's, the ceiling's).
    transport_options: dict[str, Any]

    def describe(self) -> str:
        """The broker's product and version, for the report's machine line."""
        raise NotImplementedError

    def declare(self, queue: str) -> None:
        """Make ``queue`` exist before anything publishes to it, as Celery would declare it."""

    def count(self, queue: str) -> int:
        """Messages in ``queue`` (0 when it does not exist yet)."""
        raise NotImplementedError

    def delete(self, queue: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Delete what this run left on the broker; close the connections."""


class RedisBroker(Broker):
    """Redis as the broker: a database number of the run's own, each queue a list."""

    def __init__(self, client: redis.Redis, url: str) -> None:
        self.client, self.url = client, url
        self.transport_options = {}

    def describe(self) -> str:
        return f"Redis {self.client.info('server')['redis_version']}"

    def count(self, queue: str) -> int:
        return int(self.client.llen(queue))

    def delete(self, queue: str) -> None:
        self.client.delete(queue)


class AmqpBroker(Broker):
    """RabbitMQ as the broker: each queue declared and deleted by name, counted with a passive
    ``queue.declare`` on a connection of this process's own.

    Every app publishes with publisher confirms, for every scheduler: goatbeat's beat sets
    ``confirm_publish`` on AMQP on its own (a run counts as sent once RabbitMQ has taken it),
    and a scheduler publishing without waiting for that would be measured writing to a socket.
    """

    def __init__(self, url: str) -> None:
        from celery import Celery

        self.url = url
        self.transport_options = {"confirm_publish": True}
        self.connection = Celery("bench-broker", broker=url,
                                 set_as_current=False).connection_for_write()
        self.connection.connect()
        self.channel = self.connection.channel()
        #: queue -> the exchange Celery declared with it (its own, named after it).
        self._exchanges: dict[str, str] = {}

    def describe(self) -> str:
        version = self.connection.connection.server_properties.get("version", "?")
        return f"RabbitMQ {version.decode() if isinstance(version, bytes) else version}"

    def declare(self, queue: str) -> None:
        # Celery's own declaration of its default queue (durability, exchange, queue type), so
        # that the beat process's declare on its first publish finds the same queue; declared
        # here, the queue is counted from the start rather than missing until then.
        from celery import Celery

        app = Celery("bench-queue", broker=self.url, set_as_current=False)
        app.conf.task_default_queue = queue
        declared = app.amqp.queues[queue]
        declared(self.channel).declare()
        self._exchanges[queue] = declared.exchange.name

    def count(self, queue: str) -> int:
        from amqp.exceptions import NotFound

        try:
            return int(self.channel.queue_declare(queue=queue, passive=True).message_count)
        except NotFound:
            # RabbitMQ closes the channel on a passive declare of a missing queue.
            self.channel = self.connection.channel()
            return 0

    def delete(self, queue: str) -> None:
        # Both are no-ops on RabbitMQ when the entity is gone already.
        self.channel.queue_delete(queue)
        exchange = self._exchanges.pop(queue, None)
        if exchange:
            self.channel.exchange_delete(exchange)

    def close(self) -> None:
        try:
            for queue in list(self._exchanges):
                self.delete(queue)
        finally:
            self.connection.release()


class World:
    """The broker, the PostgreSQL server, Redis and the scratch directory of one benchmark run.

    The Redis database is the run's own whichever the broker: RedBeat keeps its schedules
    there, and on a Redis broker it holds the queues too.
    """

    def __init__(self, pg: URL, redis_url: str, redis_db: int, broker: str = "redis",
                 amqp_url: str = DEFAULT_AMQP) -> None:
        self.pg = pg
        self.run = f"{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.redis_url = f"{redis_url}/{redis_db}"
        self.redis = redis.Redis.from_url(self.redis_url)
        if self.redis.dbsize():
            raise SystemExit(f"Redis database {self.redis_url} is not empty: pick another "
                             "with --redis-db (this script only ever empties its own)")
        if broker == "redis":
            self.broker: Broker = RedisBroker(self.redis, self.redis_url)
        elif broker == "amqp":
            self.broker = AmqpBroker(amqp_url)
        else:
            raise ValueError(f"broker: redis or amqp, not {broker!r}")
        self.broker_url = self.broker.url
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
        """Drop the run's databases, delete its queues, empty its Redis database, remove its
        scratch directory."""
        with self.admin.connect() as conn:
            for name in self._databases:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        self.admin.dispose()
        self.broker.close()
        self.redis.flushdb()  # our own database number only
        self.redis.close()
        if not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)
        else:
            log(f"logs and publish records kept in {self.workdir}")

    def empty(self) -> None:
        """Empty the run's Redis database before a load: RedBeat's store, and on a Redis broker
        the queues. Queues on RabbitMQ are the run's own by name, each deleted after its
        measurement (and whatever is left at :meth:`close`)."""
        self.redis.flushdb()

    def fresh_queue(self) -> str:
        """A queue no message has gone to yet, declared on the broker where queues are."""
        self.counter += 1
        queue = f"bench-{self.run}-{self.counter}"
        self.broker.declare(queue)
        return queue

    def llen(self, queue: str) -> int:
        """Messages in ``queue`` (the name stays from when the broker was Redis only)."""
        return self.broker.count(queue)

    def delete_queue(self, queue: str) -> None:
        self.broker.delete(queue)


class Adapter:
    """One scheduler as the benchmark drives it: its store, its beat process, its limits.

    The runner calls :meth:`setup` once, then :meth:`load` before each scenario (after emptying
    the run's Redis database), launches ``celery -A benchproj beat -S`` :attr:`scheduler` with
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
