"""Real processes for system tests: ``celery beat`` replicas, a worker, PostgreSQL and Redis.

Every process is started and ended by the test, by pid. Verdicts come from the executions
table and the worker's records, never from log text (logs are kept for diagnosis only).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis
import sqlalchemy as sa

from tests.support.waiting import wait_for
from tests.system.outcome import Outcome

HERE = Path(__file__).resolve().parent
T = TypeVar("T")

TTL = 3.0
RENEW = 1.0
MAX_INTERVAL = 1.0
#: The lease the fault scenarios run with: a failover well inside a scenario's seconds.
FAST_LEASE = {"lease_ttl": TTL, "lease_renew_interval": RENEW, "max_interval": MAX_INTERVAL}
#: The longest a change of leader may leave an occurrence waiting after a crash: the lease runs
#: out (ttl after the last renewal), a standby notices at its next attempt (renew interval),
#: plus a second for starting the claim on a busy two-core machine.
TAKEOVER_BOUND = TTL + RENEW + 1.0
STEP = timedelta(seconds=1)
#: On RabbitMQ, the broker back-off is kept short, so that the backlog's resend after an outage
#: is bounded by the time RabbitMQ takes to come back rather than by a 30 s back-off step.
RETRY_BACKOFF, RETRY_BACKOFF_MAX = 0.5, 2.0
RABBITMQ_SETTINGS = {**FAST_LEASE, "retry_backoff": RETRY_BACKOFF,
                     "retry_backoff_max": RETRY_BACKOFF_MAX}


@dataclass
class Process:
    """One child process and its log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, signum: int) -> None:
        if self.alive():
            os.kill(self.pid, signum)

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then SIGKILL if it does not exit in time; returns the exit code."""
        self.terminate()
        return self.reap(timeout)

    def terminate(self) -> None:
        """Ask it to stop (woken first, if it was frozen), without waiting."""
        if self.alive():
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)

    def reap(self, timeout: float = 10.0) -> int:
        """Wait for it to exit, SIGKILL when it does not in time; returns the exit code."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
        return self.popen.wait(timeout)

    def kill_tree(self) -> None:
        """SIGKILL the process and every process under it at once (a prefork worker's pool
        processes), as when its host dies."""
        for pid in [self.pid, *descendants(self.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.popen.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def descendants(pid: int) -> list[int]:
    """The processes under ``pid``, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


@dataclass
class World:
    """The processes of one scenario, the database and the Redis they share: each process is
    started here and ended by pid in :meth:`stop_all`, its output kept in a log file."""

    workdir: Path
    database_url: str
    redis_url: str
    #: The broker's Redis when it is not ``redis_url`` (a private one a scenario stops); the
    #: worker's records always go to ``redis_url``, so they survive a broker restart.
    broker_url: str | None = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:10])
    processes: list[Process] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.broker_url = self.broker_url or self.redis_url
        self.redis = redis.Redis.from_url(self.redis_url)
        self.engine = sa.create_engine(self.database_url, poolclass=sa.NullPool)

    def spawn(self, name: str, command: Sequence[str], env: dict[str, str]) -> Process:
        """Start ``command`` in the work directory, its output to ``<name>.log``."""
        log_path = self.workdir / f"{name}.log"
        with log_path.open("ab") as handle:
            popen = subprocess.Popen(
                command, cwd=self.workdir, env=env, stdout=handle, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        process = Process(name=name, popen=popen, log_path=log_path)
        self.processes.append(process)
        return process

    def stop_all(self) -> None:
        """SIGKILL every process still running, with its children, then :meth:`clean_up` and
        disconnect. Nothing is judged after a test (a scenario stops what it judges itself:
        :func:`finish` stops the replicas with SIGTERM), so a graceful stop here only cost
        time: about a second a test for a worker's warm shutdown, up to the whole grace for a
        worker reconnecting to a restarted broker."""
        for process in self.processes:
            if process.alive():
                process.kill_tree()
        self.clean_up()
        self.redis.close()
        self.engine.dispose()

    def clean_up(self) -> None:
        """Delete what the scenario left on the shared Redis."""

    def logs(self) -> str:
        return "\n".join(f"===== {p.name} (pid {p.pid}) =====\n{p.log()[-6000:]}"
                         for p in self.processes)

    def db_now(self) -> datetime:
        with self.engine.connect() as connection:
            return connection.execute(sa.text("SELECT now()")).scalar_one()  # type: ignore[no-any-return]

    def sql(self, statement: str, **params: Any) -> list[dict[str, Any]]:
        with self.engine.begin() as connection:
            result = connection.execute(sa.text(statement), params)
            return [dict(r._mapping) for r in result] if result.returns_rows else []


W = TypeVar("W", bound=World)


@contextmanager
def running(request: pytest.FixtureRequest, world: W) -> Iterator[W]:
    """``world`` for one test: every process stopped at the end, logs shown if it failed."""
    try:
        yield world
    finally:
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            print(world.logs())
        world.stop_all()


@dataclass
class Cluster(World):
    """A scenario's world running ``sysproj``: one database, one queue, one record list."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.config_path = self.workdir / "sysproj.json"
        self.queue = f"sys-{self.run_id}"
        self.record_key = f"sys-records-{self.run_id}"

    # -- configuration -------------------------------------------------------------------
    def write_config(self, *, schedules: dict[str, Any], settings: dict[str, Any] | None = None,
                     timezone: str = "UTC") -> None:
        self.config_path.write_text(json.dumps(
            {"schedules": schedules, "settings": settings or {}, "timezone": timezone}))

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "PYTHONPATH": os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]),
            "SYS_CONFIG": str(self.config_path),
            "SYS_QUEUE": self.queue,
            "SYS_RECORD_KEY": self.record_key,
            "SYS_RECORD_URL": self.redis_url,
            "SYS_BROKER_URL": f"{self.broker_url}/0",
            "SYS_DATABASE_URL": self.database_url,
        })
        env.update(extra or {})
        return env

    # -- processes -----------------------------------------------------------------------
    def start(self, name: str, args: Sequence[str], *, prefix: Sequence[str] = (),
              env: dict[str, str] | None = None) -> Process:
        return self.spawn(name, [*prefix, sys.executable, "-m", "celery", "-A", "sysproj", *args],
                          self.env(env))

    def goatbeat(self, *args: str) -> str:
        """A ``celery -A sysproj goatbeat`` command's output; it must succeed."""
        done = subprocess.run([sys.executable, "-m", "celery", "-A", "sysproj", "goatbeat",
                               *args], cwd=self.workdir, env=self.env(), capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def start_beat(self, name: str, *, prefix: Sequence[str] = (),
                   env: dict[str, str] | None = None) -> Process:
        return self.start(name, ["beat", "-S", "goatbeat_celery.Scheduler", "--loglevel",
                                 "INFO", "-s", str(self.workdir / f"{name}.schedule")],
                          prefix=prefix, env=env)

    def start_worker(self, name: str = "worker") -> Process:
        return self.start(name, ["worker", "--pool", "threads", "--concurrency", "8", "-Q",
                                 self.queue, "-n", f"{name}-{self.run_id}@%h",
                                 "--without-heartbeat", "--without-gossip", "--without-mingle",
                                 "--loglevel", "WARNING"])

    def clean_up(self) -> None:
        self.redis.delete(self.record_key, self.queue)

    # -- what happened -------------------------------------------------------------------
    def executions(self) -> list[dict[str, Any]]:
        with self.engine.connect() as connection:
            rows = connection.execute(sa.text(
                "SELECT key, schedule_name, occurrence_at, due_at, token, state, claimed_at, "
                "submitted_at, attempts, missed, manual FROM goatbeat_execution "
                "ORDER BY occurrence_at, key"))
            return [dict(row._mapping) for row in rows]

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(item) for item in self.redis.lrange(self.record_key, 0, -1)]

    def lease(self) -> dict[str, Any] | None:
        """The lease row (``default``), not the member rows every replica renews beside it."""
        with self.engine.connect() as connection:
            row = connection.execute(sa.text(
                "SELECT name, holder, token, acquired_at, expires_at, "
                "expires_at > now() AS live FROM goatbeat_lease WHERE name = 'default'")).first()
            return None if row is None else dict(row._mapping)

    def leader_pid(self) -> int | None:
        """The pid in the live lease holder's identity (``host:pid:suffix``)."""
        lease = self.lease()
        if not lease or not lease["live"] or not lease["holder"]:
            return None
        return int(lease["holder"].split(":")[-2])

    def listening_replicas(self) -> int:
        """Replicas connected and waiting for notifications: each opens one LISTEN session on
        start, so this counts the standbys ready to take over (and the leader)."""
        rows = self.sql("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = "
                        "current_database() AND application_name = 'goatbeat_celery:listen'")
        return int(rows[0]["n"])

    def wait_for_replicas(self, count: int, timeout: float = 30) -> None:
        wait_for(lambda: self.listening_replicas() >= count, timeout=timeout,
                 what=f"{count} replicas connected")

    def wait_for_leader(self, timeout: float = 30) -> Process:
        """The replica process holding the live lease."""
        def found() -> Process | None:
            pid = self.leader_pid()
            return next((p for p in self.processes if p.pid == pid), None)
        return wait_for(found, timeout=timeout, what="a leader")

@dataclass
class StoreCluster(Cluster):
    """A scenario's world on a database other than PostgreSQL: what PostgreSQL's ``now()``,
    sessions and columns answer there is read through goatbeat's own store (the database's
    clock, the replicas' member rows, instants as aware UTC)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        from goatbeat_celery.store import open_store

        self.store = open_store(self.database_url)  # on SQLite, creates the schema

    def db_now(self) -> datetime:
        return self.store.now()

    def lease(self) -> dict[str, Any] | None:
        info = self.store.inspect("default")
        return None if info is None else {
            "name": info.name, "holder": info.holder, "token": info.token,
            "acquired_at": info.acquired_at, "expires_at": info.expires_at,
            "live": info.held}

    def listening_replicas(self) -> int:
        """The replicas heartbeating: each does before it first asks for the lease."""
        return sum(1 for row in self.store.list_leases("default.replicas-of-") if row.held)

    def executions(self) -> list[dict[str, Any]]:
        from goatbeat_celery.store.schema import execution_table as table

        columns = ("key", "schedule_name", "occurrence_at", "due_at", "token", "state",
                   "claimed_at", "submitted_at", "attempts", "missed", "manual")
        with self.engine.connect() as connection:
            rows = connection.execute(sa.select(*(table.c[name] for name in columns))
                                      .order_by(table.c.occurrence_at, table.c.key))
            return [dict(row._mapping) for row in rows]

    def stop_all(self) -> None:
        super().stop_all()
        self.store.close()


@dataclass
class SQLiteCluster(StoreCluster):
    """A scenario's world on a SQLite file (the replicas of one host)."""


@dataclass
class MySQLCluster(StoreCluster):
    """A scenario's world on a MySQL / MariaDB database (migrated beforehand)."""


@dataclass(frozen=True)
class Verdict:
    """The checks every scenario makes, from the executions table and the worker's record."""

    executions: int
    keys_claimed_twice: int
    unsubmitted: int
    not_delivered: tuple[str, ...]
    duplicates_delivered: int
    foreign_deliveries: tuple[str, ...]

    @classmethod
    def of(cls, executions: list[dict[str, Any]], records: list[dict[str, Any]]) -> Verdict:
        keys = Counter(row["key"] for row in executions)
        delivered = Counter(record["id"] for record in records)
        return cls(
            executions=len(executions),
            keys_claimed_twice=sum(1 for count in keys.values() if count > 1),
            unsubmitted=sum(1 for row in executions if row["state"] != "submitted"),
            not_delivered=tuple(sorted(k for k in keys if k not in delivered)),
            duplicates_delivered=sum(count - 1 for count in delivered.values() if count > 1),
            foreign_deliveries=tuple(sorted(k for k in delivered if k not in keys)),
        )


@dataclass(frozen=True)
class Broker:
    """A broker a shared scenario runs on: the fixture of a cluster on it, how many replicas
    the scenario starts there and the settings they run with."""

    fixture: str
    replicas: int
    settings: dict[str, Any]

    def cluster(self, request: pytest.FixtureRequest) -> Cluster:
        return request.getfixturevalue(self.fixture)  # type: ignore[no-any-return]


#: The brokers the shared scenarios are parametrised over, with their ids: the shared Redis
#: (three replicas) and a private RabbitMQ node (two).
BROKERS = [
    pytest.param(Broker("cluster", replicas=3, settings=FAST_LEASE), id="redis"),
    pytest.param(Broker("rabbitmq_cluster", replicas=2, settings=RABBITMQ_SETTINGS),
                 id="rabbitmq"),
]


# -- steps the scenarios share ----------------------------------------------------------------
def every_second(count: int, prefix: str = "s", **goatbeat: Any) -> dict[str, Any]:
    """``count`` schedules every second. Policy ``all`` unless told otherwise: the suite checks
    that no point is lost, and ``all`` runs every point (no grace is set: each may run however
    late), where ``latest`` would coalesce a second-schedule's points into one run."""
    entry: dict[str, Any] = {"every": 1, "goatbeat": {"misfire_policy": "all", **goatbeat}}
    return {f"{prefix}{i:02d}": dict(entry) for i in range(count)}


def run_for(seconds: float) -> None:
    """Let the scenario run this long (its duration, not a synchronisation)."""
    time.sleep(seconds)


def start_replicas(cluster: Cluster, count: int = 3, *,
                   first_env: dict[str, str] | None = None) -> list[Process]:
    """The first replica becomes the leader (waited for), then the standbys join."""
    first = cluster.start_beat("beat-1", env=first_env)
    leader = cluster.wait_for_leader()
    assert leader is first
    others = [cluster.start_beat(f"beat-{i}") for i in range(2, count + 1)]
    cluster.wait_for_replicas(count)
    return [first, *others]


def wait_for_takeover(cluster: Cluster, old_token: int, timeout: float = 30) -> dict[str, Any]:
    """The lease row once a new holder (a higher token) holds it live."""
    def taken() -> dict[str, Any] | None:
        lease = cluster.lease()
        return lease if lease and lease["live"] and lease["token"] > old_token else None
    try:
        return wait_for(taken, timeout=timeout, what="a standby to take the lease over")
    except AssertionError as exc:
        # What each session of the database was doing, and who blocked whom: a takeover held
        # back by a lock is explained by the session that held it.
        raise AssertionError(f"{exc}; sessions: {database_sessions(cluster)}") from None


def database_sessions(cluster: Cluster) -> list[dict[str, Any]]:
    """The database's sessions but this one, on PostgreSQL (none elsewhere): application, state,
    wait, how long in it, the pids blocking it, and its statement."""
    if cluster.engine.dialect.name != "postgresql":
        return []
    return cluster.sql(
        "SELECT pid, application_name AS app, state, wait_event_type, wait_event, "
        "now() - state_change AS in_state, pg_blocking_pids(pid) AS blocked_by, "
        "left(query, 160) AS query FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()")


def settle(cluster: Cluster, timeout: float = 60) -> datetime:
    """Wait until every execution due over a second ago is submitted and reached the worker;
    returns that cut-off (later ones may still be in flight when the replicas are stopped)."""
    def settled() -> datetime | None:
        cutoff = cluster.db_now() - timedelta(seconds=1.5)
        delivered = {r["id"] for r in cluster.records()}
        # A skipped row records an occurrence given up (a misfire rule, an overlap policy):
        # it is never sent.
        late = [row for row in cluster.executions() if row["due_at"] <= cutoff
                and row["state"] != "skipped"
                and (row["state"] != "submitted" or row["key"] not in delivered)]
        return None if late else cutoff
    return wait_for(settled, timeout=timeout, what="every due execution to reach the worker",
                    interval=0.25)


def finish(cluster: Cluster, replicas: list[Process]) -> Outcome:
    """Settle, stop the replicas, and join the executions with the worker's records."""
    cutoff = settle(cluster)
    # All at once: each exits in its own time, none waits for the one before.
    for replica in replicas:
        replica.terminate()
    for replica in replicas:
        replica.reap()
    return Outcome.of(cluster.executions(), cluster.records(), until=cutoff)


def assert_alive(*replicas: Process) -> None:
    for replica in replicas:
        assert replica.alive(), f"{replica.name} died:\n{replica.log()[-3000:]}"


def lease_pid(lease: dict[str, Any]) -> int:
    return int(lease["holder"].split(":")[-2])
