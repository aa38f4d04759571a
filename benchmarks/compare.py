"""goatbeat against the beat schedulers a Celery user would pick instead, as real processes.

    .venv/bin/python benchmarks/compare.py [--quick] [--reps 3] [--only goatbeat,redbeat]
                                           [--bench dispatch,idle,lateness,burst,edit,failover]
                                           [--broker redis|amqp]
                                           [--lateness-size 1000] [--edits 20] [--lead 40]

Every scenario runs a real ``celery -A benchproj beat`` process per scheduler, alternating the
schedulers within the run, against a Redis broker (a database number of its own, emptied at the
end; nothing consumes the queue, messages are counted with LLEN):

* ``goatbeat``  — goatbeat_celery.Scheduler on PostgreSQL;
* ``default``   — Celery's PersistentScheduler (shelve file, schedules from ``beat_schedule``);
* ``django``    — django-celery-beat's DatabaseScheduler on PostgreSQL;
* ``redbeat``   — RedBeat on Redis;
* ``goatbeat-mysql`` — goatbeat on MySQL / MariaDB (``GOATBEAT_BENCH_MYSQL_URL``), only when
  ``--only`` names it.

Each is an adapter in ``schedulers/`` (its store, how schedules are loaded and edited, what its
beat process needs, what it cannot do); this script is the command line and the measurements,
and talks to the schedulers only through the adapters.

Scenarios (medians over ``--reps`` repetitions; see docs/performance.md):

1. dispatch — N schedules all due at one instant: seconds until all N are in the broker,
   messages per second, time from the due instant to the first message;
2. idle — N schedules none due for an hour: RSS, start-up time, CPU seconds per idle minute,
   and the store time of one idle tick;
3. lateness — 10,000 schedules every minute, first runs spread over a minute: p50/p99/max of
   (handed to the broker - due); and a burst: 10,000 sharing one instant, seconds until the
   last is in the broker and that rate against the publish ceiling (``--bench burst``);
4. edit — a schedule edited to be due now: seconds until its message is in the broker;
5. failover — two replicas, SIGKILL or SIGTERM of the leader: seconds until the standby publishes;
6. shards — goatbeat alone: N schedules due at one instant, dispatched by 1, 2 and 4 replicas
   with as many shards (``--bench shards``): the aggregate rate until all N are in the broker,
   and the CPU each replica spent meanwhile.

Plus the publish ceiling: a bare loop of ``send_task`` through one pooled producer, run right
before each of goatbeat's dispatch runs (``--bench ceiling,dispatch``).

``--broker amqp`` runs the ceiling, dispatch and lateness scenarios against RabbitMQ instead
(``GOATBEAT_BENCH_AMQP_URL``, default amqp://guest:guest@127.0.0.1:5672//): each measurement
publishes to a queue of its own, declared as Celery declares it, counted by its message count
(a passive ``queue.declare``) and deleted afterwards. Every app publishing there, each
scheduler's beat process and the ceiling loop, sets ``confirm_publish=True`` in its
``broker_transport_options``: goatbeat's beat publishes with publisher confirms on AMQP on its
own, and the others are held to the same promise (a run counts as sent once RabbitMQ took it),
not measured writing to a socket. kombu's AMQP transport has no publish batches: goatbeat sends
one message at a time there, and the table has no batched ceiling. Redis is still needed, as
RedBeat's store.

PostgreSQL databases are created for the run and dropped after it. A plain script that prints
figures, not a test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil
import sqlalchemy as sa
from sqlalchemy.engine import make_url

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import populate  # noqa: E402
from schedulers import ADAPTERS, KINDS, ON_REQUEST, Adapter, World, log  # noqa: E402
from schedulers.base import DEFAULT_AMQP, RedisBroker  # noqa: E402
from schedulers.goatbeat import Goatbeat  # noqa: E402

#: The scheduler the table compares with the best of the others, and the publish ceiling's.
SUBJECT = "goatbeat"
DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS = "redis://127.0.0.1:6379"
#: What runs on each broker: the rest counts on Redis alone so far.
BENCHES = {"redis": "ceiling,dispatch,idle,lateness,burst,edit,failover",
           "amqp": "ceiling,dispatch,lateness"}
#: What a publish of the ceiling loop may take, as goatbeat bounds one by its batch's time left.
PUBLISH_TIMEOUT = 30.0
#: Failover settings, the same for goatbeat and RedBeat: ttl 10 s, polled every 3 s.
FAILOVER_TTL = 10
FAILOVER_POLL = 3
#: The idle bench's second setting, the same for goatbeat and RedBeat: goatbeat's defaults
#: (lease ttl 30 s, renewed every 10 s), so that both promise the same failover bound.
IDLE_TTL = 30
IDLE_POLL = 10
#: The sharded dispatch's lease: short, so that the replicas share the shards soon after start.
SHARD_TTL = 9
SHARD_RENEW = 3
#: (replicas, shards) of the sharded dispatch.
SHARD_LAYOUTS = ((1, 1), (2, 2), (4, 4))
POLL = 0.01


# -- processes ------------------------------------------------------------------------------
@dataclass
class Beat:
    kind: str
    popen: subprocess.Popen[bytes]
    proc: psutil.Process
    launched: float
    log_path: Path
    publish_log: Path | None = None

    def cpu(self) -> float:
        times = self.proc.cpu_times()
        return times.user + times.system

    def idle_cpu(self) -> float:
        """CPU seconds its live threads used so far, from the kernel scheduler's nanosecond
        count where Linux keeps one (each thread's ``schedstat``): the 10 ms steps of
        :meth:`cpu` are most of what an idle beat uses in a minute. Threads that ended are
        not counted, which an idle beat's measurement window does not see."""
        try:
            return sum(int(path.read_text().split()[0])
                       for path in Path(f"/proc/{self.popen.pid}/task").glob("*/schedstat")) / 1e9
        except (OSError, ValueError, IndexError):
            return self.cpu()

    def rss(self) -> int:
        return self.proc.memory_info().rss

    def alive(self) -> bool:
        return self.popen.poll() is None

    def demand(self) -> float:
        """Seconds the main thread ran or stood ready to run (the kernel's ``schedstat``: time
        on a CPU plus time waiting in a run queue); :meth:`cpu` where Linux keeps no such count.
        A process starved of CPU by a loaded machine runs little, but is not idle: it waits in
        the run queue, which a process sleeping in its loop does not."""
        try:
            fields = Path(f"/proc/{self.popen.pid}/schedstat").read_text().split()
            return (int(fields[0]) + int(fields[1])) / 1e9
        except (OSError, ValueError, IndexError):
            return self.cpu()

    def wait_ready(self, timeout: float, quiet: float = 0.5, busy: float = 0.03) -> float:
        """Seconds from launch until the process first stays (almost) idle for ``quiet``
        seconds: it has started and is sleeping in its loop. Idle means neither running nor
        waiting for a CPU (:meth:`demand`): on a saturated machine a process still starting
        gets too little CPU to look busy by its CPU time alone, and an edit made then would
        time its start-up, not the edit. Raises on timeout or exit."""
        deadline = self.launched + timeout
        samples: list[tuple[float, float]] = []
        while time.time() < deadline:
            if not self.alive():
                raise RuntimeError(f"{self.kind} beat exited: {self.tail()}")
            now, used = time.time(), self.demand()
            samples.append((now, used))
            window = [s for s in samples if s[0] >= now - quiet]
            first = window[0]
            if now - first[0] >= quiet * 0.9 and used - first[1] < busy and now - self.launched > 1:
                return first[0] - self.launched
            time.sleep(0.05)
        raise TimeoutError(f"{self.kind} beat not idle within {timeout:.0f}s")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> None:
        if self.alive():
            with suppress(ProcessLookupError):
                os.kill(self.popen.pid, sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()

    def tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def published(self) -> list[tuple[str, float]]:
        if self.publish_log is None or not self.publish_log.exists():
            return []
        out = []
        for line in self.publish_log.read_text().splitlines():
            name, _, at = line.partition(" ")
            with suppress(ValueError):
                out.append((name, float(at)))
        return out


@contextmanager
def running(beats: list[Beat]) -> Iterator[list[Beat]]:
    try:
        yield beats
    finally:
        for beat in beats:
            beat.stop()


# -- results --------------------------------------------------------------------------------
@dataclass
class Metric:
    """One row of the table: samples per scheduler; how to show and compare them."""

    title: str
    unit: str
    higher_is_better: bool
    fmt: str = "{:.2f}"
    samples: dict[str, list[float | None]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)

    def add(self, kind: str, value: float | None) -> None:
        self.samples.setdefault(kind, []).append(value)

    def median(self, kind: str) -> float | None:
        values = self.samples.get(kind)
        if not values:
            return None
        if any(v is None for v in values):
            return None
        return statistics.median(v for v in values if v is not None)

    def cell(self, kind: str) -> str:
        if kind in self.notes:
            return self.notes[kind]
        value = self.median(kind)
        if value is None:
            return "n/a" if kind not in self.samples else "—"
        values = [v for v in self.samples[kind] if v is not None]
        spread = ""
        if len(values) > 1 and value:
            low, high = min(values), max(values)
            spread = f" ({self.fmt.format(low)}–{self.fmt.format(high)})"
        return self.fmt.format(value) + spread

    def ratio(self, kind: str = SUBJECT) -> str:
        """How many times better goatbeat is than the best other (> 1: goatbeat better)."""
        mine = self.median(kind)
        others = [m for k in KINDS if k != kind and k not in self.notes
                  and (m := self.median(k)) is not None]
        if mine is None or not others:
            return "n/a"
        best = max(others) if self.higher_is_better else min(others)
        if self.higher_is_better:
            return "∞" if best == 0 else f"{mine / best:.2f}×"
        return "∞" if mine == 0 else f"{best / mine:.2f}×"


class Report:
    def __init__(self) -> None:
        self.metrics: dict[str, Metric] = {}
        self.lines: list[str] = []

    def metric(self, key: str, title: str, unit: str, higher: bool,
               fmt: str = "{:.2f}") -> Metric:
        if key not in self.metrics:
            self.metrics[key] = Metric(title=title, unit=unit, higher_is_better=higher, fmt=fmt)
        return self.metrics[key]

    def table(self, adapters: Sequence[Adapter]) -> str:
        kinds = [adapter.kind for adapter in adapters]
        head = ["metric", *(adapter.label for adapter in adapters), f"{SUBJECT} vs best other"]
        rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for metric in self.metrics.values():
            cells = [f"{metric.title} ({metric.unit})", *(metric.cell(k) for k in kinds),
                     metric.ratio()]
            rows.append("| " + " | ".join(cells) + " |")
        return "\n".join(rows)

    def dump(self) -> dict[str, Any]:
        return {key: {"title": m.title, "unit": m.unit, "samples": m.samples, "notes": m.notes}
                for key, m in self.metrics.items()}


# -- the scenarios ----------------------------------------------------------------------------
class Bench:
    def __init__(self, world: World, adapters: Sequence[Adapter], reps: int, quick: bool,
                 ) -> None:
        self.world = world
        self.adapters = {adapter.kind: adapter for adapter in adapters}
        self.kinds = list(self.adapters)
        self.reps = reps
        self.quick = quick
        self.report = Report()
        #: (kind, count) -> seconds from launch to idle, to place due instants after start-up.
        self.startup: dict[tuple[str, int], float] = {}
        #: (kind, count) -> seconds a load took.
        self.load_time: dict[tuple[str, int], float] = {}
        #: Measure the publish ceiling next to each of goatbeat's dispatch runs.
        self.with_ceiling = False
        #: The least lead of a scenario's first due instant over its load (--lead).
        self.min_lead = 0.0

    def load(self, kind: str, plan: populate.Plan) -> float:
        """Put ``plan`` into ``kind``'s store, after emptying the run's Redis database (the
        broker's on Redis); returns seconds taken."""
        started = time.perf_counter()
        self.world.empty()
        self.adapters[kind].load(plan)
        return time.perf_counter() - started

    def launch(self, kind: str, queue: str, *, settings: dict[str, Any] | None = None,
               publish_log: bool = False, tag: str = "") -> Beat:
        """``celery -A benchproj beat`` with ``kind``'s scheduler, publishing to ``queue``."""
        world, adapter = self.world, self.adapters[kind]
        world.counter += 1
        name = f"{kind}{tag}-{world.counter}"
        env = dict(os.environ)
        env.update({
            "PYTHONPATH": os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]),
            "BENCH_KIND": kind,
            "BENCH_QUEUE": queue,
            "BENCH_BROKER_URL": world.broker_url,
            "BENCH_TRANSPORT_OPTIONS": json.dumps(world.broker.transport_options),
            "BENCH_REDBEAT_REDIS_URL": world.redis_url,
            "BENCH_SETTINGS": json.dumps(settings or {}),
        })
        env.update(adapter.env())
        publish_path = None
        if publish_log:
            publish_path = world.workdir / f"{name}.published"
            env["BENCH_PUBLISH_LOG"] = str(publish_path)
        log_path = world.workdir / f"{name}.log"
        with log_path.open("wb") as handle:
            launched = time.time()
            popen = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "benchproj", "beat",
                 "-S", adapter.scheduler, "--loglevel", "WARNING",
                 "-s", str(world.workdir / f"{name}.schedule")],
                cwd=world.workdir, env=env, stdout=handle, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL)
        return Beat(kind=kind, popen=popen, proc=psutil.Process(popen.pid), launched=launched,
                    log_path=log_path, publish_log=publish_path)

    def rotation(self, rep: int) -> list[str]:
        """The schedulers in a different order each repetition (alternating, no fixed first)."""
        shift = rep % len(self.kinds)
        return self.kinds[shift:] + self.kinds[:shift]

    # 0. the publish ceiling ------------------------------------------------------------------
    def ceiling(self, count: int) -> float:
        """One bare ``send_task`` loop; run inside each dispatch repetition, next to goatbeat's
        run, so that both see the same load on the machine. Then the same loop in kombu's
        publish batches, flushed every ``submitter.FLUSH_EVERY`` messages as goatbeat's
        submitter flushes them (where the transport has batches, Redis, and kombu 5.7 on): the
        ceiling of the publishing goatbeat does, for its own overhead. On a transport without
        batches goatbeat publishes as the bare loop does, and that row says so rather than
        show a figure. Returns the bare loop's rate, the ceiling the targets are stated
        against."""
        rates: dict[str, float | None] = {}
        for key, label, batched in (
                ("ceiling", "bare send_task loop, one pooled producer", False),
                ("ceiling-batched", "the same loop in kombu publish batches", True)):
            rates[key] = rate = self._publish_loop(count, batched=batched)
            metric = self.report.metric(key, f"publish ceiling: {label}", "messages/s", True,
                                        "{:,.0f}")
            metric.notes.update({k: "" for k in self.kinds if k != SUBJECT})
            if rate is None:
                metric.notes[SUBJECT] = "n/a (no publish batches on this broker)"
            else:
                metric.add(SUBJECT, rate)
        bare, batched_rate = rates["ceiling"], rates["ceiling-batched"]
        assert bare is not None
        log(f"ceiling: {bare:,.0f}/s, " + ("no publish batches on this broker"
                                           if batched_rate is None
                                           else f"in publish batches {batched_rate:,.0f}/s"))
        return bare

    def _publish_loop(self, count: int, *, batched: bool) -> float | None:
        """Messages per second of ``count`` published as goatbeat's submitter publishes on this
        broker (its message shape, its retry setting, the broker's confirms); None when
        ``batched`` and the transport has no publish batches."""
        from contextlib import nullcontext

        from celery import Celery

        from goatbeat_celery import headers
        from goatbeat_celery.beat.submitter import FLUSH_EVERY, _Batch

        world = self.world
        app = Celery("bench-ceiling", broker=world.broker_url, set_as_current=False)
        app.conf.broker_transport_options = dict(world.broker.transport_options)
        app.conf.task_default_queue = queue = world.fresh_queue()
        try:
            started = time.perf_counter()
            with app.producer_or_acquire() as producer:
                if batched and not getattr(producer, "supports_batch_publish", False):
                    return None
                # What the submitter passes with every message: its retry setting for this
                # transport (none on AMQP) and a bound on the publish and its confirm.
                call = {**_Batch(app, producer, 1, batched=batched).call,
                        "timeout": PUBLISH_TIMEOUT,
                        "confirm_timeout": PUBLISH_TIMEOUT}
                with (producer.batch(max_size=1 << 30) if batched else nullcontext()) as batch:
                    for index in range(count):
                        name = f"s-{index:07d}"
                        app.send_task("bench.noop", args=[name],
                                      task_id=f"{name}:2026-01-01T00:00:00+00:00",
                                      producer=producer,
                                      headers={headers.CELERY_BEAT: True,
                                               headers.SCHEDULE: name,
                                               headers.OCCURRENCE: "2026-01-01T00:00:00+00:00",
                                               headers.TOKEN: 1, headers.SEND: 1},
                                      **call)
                        if batch is not None and index % FLUSH_EVERY == FLUSH_EVERY - 1:
                            batch.flush()
            elapsed = time.perf_counter() - started
            # Untimed: every publish has returned (confirmed, on AMQP); the count only checks.
            _wait(lambda: world.llen(queue) >= count, 30, "the ceiling's messages counted")
            assert world.llen(queue) == count
        finally:
            world.delete_queue(queue)
            app.close()
        return count / elapsed

    # 1. dispatch -------------------------------------------------------------------------------
    def dispatch(self, count: int, cap: float) -> None:
        label = f"{count:,} due"
        total = self.report.metric(f"dispatch-{count}", f"dispatch {label}: all in broker",
                                   "s after due", False)
        rate = self.report.metric(f"rate-{count}", f"dispatch {label}: rate", "messages/s",
                                  True, "{:,.0f}")
        first = self.report.metric(f"first-{count}", f"dispatch {label}: first message",
                                   "s after due", False, "{:.3f}")
        share = self.report.metric(f"dispatch-share-{count}", f"dispatch {label}: rate / "
                                   "publish ceiling", "%", True, "{:.0f}")
        for rep in range(self.reps):
            for kind in self.rotation(rep):
                ceiling = None
                if kind == SUBJECT and self.with_ceiling:
                    ceiling = self.ceiling(min(count, 10_000))
                outcome = self._dispatch_once(kind, count, cap)
                if outcome is None:
                    continue
                t_all, r, t_first, got = outcome
                total.add(kind, t_all)
                rate.add(kind, r)
                first.add(kind, t_first)
                if ceiling is not None:
                    share.add(kind, 100 * r / ceiling)
                if t_all is None:
                    total.notes[kind] = f"> {cap:.0f} ({got:,} sent by then)"

    def _warmup(self, kind: str, count: int) -> float:
        known = self.startup.get((kind, count))
        guess = 3.0 + (2.0 * known if known is not None else 2.0 + count / 5_000)
        # On a machine busy with other work a start-up may take several times its guess.
        return max(self.min_lead, guess)

    def _dispatch_once(self, kind: str, count: int, cap: float,
                       ) -> tuple[float | None, float, float | None, int] | None:
        world = self.world
        for _attempt in range(3):
            queue = world.fresh_queue()
            plan = self._load_due(kind, lambda due: populate.Plan(
                count=count, every=3600, first_due=due), count)
            due = plan.first_due
            beat = self.launch(kind, queue)
            with running([beat]):
                try:
                    ready = beat.wait_ready(timeout=max(due - time.time(), 1.0) + 60)
                except (TimeoutError, RuntimeError) as exc:
                    log(f"dispatch {kind} {count}: {exc}")
                    return None
                self.startup[(kind, count)] = max(self.startup.get((kind, count), 0), ready)
                if beat.launched + ready > due - 0.3:
                    log(f"dispatch {kind} {count}: started {ready:.1f}s after launch, after the "
                        f"due instant; again with a longer warm-up")
                    world.delete_queue(queue)
                    continue
                t_first = None
                got = 0
                while time.time() < due + cap:
                    got = world.llen(queue)
                    now = time.time()
                    if got and t_first is None:
                        t_first = now - due
                    if got >= count:
                        break
                    time.sleep(POLL)
                now = time.time()
            world.delete_queue(queue)
            if got >= count:
                elapsed = now - due
                log(f"dispatch {kind} {count}: {elapsed:.2f}s, {count / elapsed:,.0f}/s, "
                    f"first {t_first:.3f}s")
                return elapsed, count / elapsed, t_first, got
            log(f"dispatch {kind} {count}: {got:,} in {cap:.0f}s")
            return None, got / cap, t_first, got
        return None

    def _load_due(self, kind: str, make: Callable[[float], populate.Plan],
                  count: int) -> populate.Plan:
        """Load a plan whose first due instant leaves the scheduler time to start after the
        load: (load time + start-up) estimated from earlier runs, checked after loading."""
        for _attempt in range(4):
            load_guess = self.load_time.get((kind, count), 1.0 + count / 10_000)
            due = float(math.ceil(time.time() + load_guess + self._warmup(kind, count)))
            plan = make(due)
            took = self.load(kind, plan)
            self.load_time[(kind, count)] = took * 1.2
            if due - time.time() >= self._warmup(kind, count) * 0.8:
                return plan
        return plan

    # 2. idle -----------------------------------------------------------------------------------
    def idle(self, count: int, window: float, startup_cap: float) -> None:
        label = f"idle {count:,}"
        rss = self.report.metric(f"rss-{count}", f"{label}: RSS", "MB", False, "{:.0f}")
        start = self.report.metric(f"start-{count}", f"{label}: start-up", "s", False)
        # Four decimals: an idle beat uses a few milliseconds a minute.
        cpu = self.report.metric(f"cpu-{count}", f"{label}: CPU per idle minute", "s/min",
                                 False, "{:.4f}")
        bounded = self.report.metric(
            f"cpu-bounded-{count}", f"{label}: CPU per idle minute, failover within "
            f"{IDLE_TTL} s (renewed every {IDLE_POLL} s)", "s/min", False, "{:.4f}")
        tick = self.report.metric(f"tick-{count}", f"{label}: store time of one idle tick",
                                  "ms", False)
        for kind in self.kinds:
            adapter = self.adapters[kind]
            # Loaded once per scheduler and size; every repetition is a fresh process.
            plan = populate.Plan(count=count, every=7200, first_due=time.time() + 3600,
                                 spread=3600)
            seconds = self.load(kind, plan)
            log(f"idle {kind} {count}: loaded in {seconds:.1f}s")
            for _rep in range(self.reps):
                # Each scheduler's defaults first; then, where a failover bound can be set,
                # the same bound for all, since how often a leader renews is most of its
                # idle cost.
                measured = self._idle_once(kind, count, window, startup_cap)
                if measured is None:
                    start.notes[kind] = f"> {startup_cap:.0f}"
                    rss.notes[kind] = cpu.notes[kind] = bounded.notes[kind] = "—"
                    break
                ready, peak, used = measured
                start.add(kind, ready)
                rss.add(kind, peak / 2**20)
                cpu.add(kind, used)
                log(f"idle {kind} {count}: start {ready:.2f}s, RSS {peak / 2**20:.0f} MB, "
                    f"CPU {used:.4f} s/min")
                if adapter.no_failover is not None:
                    bounded.notes[kind] = adapter.no_failover
                    continue
                measured = self._idle_once(kind, count, window, startup_cap,
                                           adapter.failover_settings(IDLE_TTL, IDLE_POLL))
                if measured is not None:
                    bounded.add(kind, measured[2])
                    log(f"idle {kind} {count}, failover within {IDLE_TTL} s: "
                        f"CPU {measured[2]:.4f} s/min")
            if adapter.no_idle_tick is not None:
                tick.notes[kind] = adapter.no_idle_tick
                continue
            with adapter.idle_tick() as call:
                ms = _median_ms(call, rounds=200)
            tick.add(kind, ms)
            log(f"idle {kind} {count}: store time of one idle tick {ms:.2f} ms")

    def _idle_once(self, kind: str, count: int, window: float, startup_cap: float,
                   settings: dict[str, Any] | None = None) -> tuple[float, float, float] | None:
        """One fresh beat process left idle for ``window`` s: its start-up time, peak RSS
        (bytes) and CPU per minute; None when it did not start within ``startup_cap``."""
        beat = self.launch(kind, self.world.fresh_queue(), settings=settings)
        with running([beat]):
            try:
                ready = beat.wait_ready(timeout=startup_cap)
            except (TimeoutError, RuntimeError) as exc:
                log(f"idle {kind} {count}: {exc}")
                return None
            if settings is None:
                self.startup[(kind, count)] = ready
            time.sleep(1.0)
            cpu0, t0 = beat.idle_cpu(), time.time()
            peak = beat.rss()
            while time.time() < t0 + window:
                time.sleep(0.5)
                peak = max(peak, beat.rss())
            used = (beat.idle_cpu() - cpu0) * 60 / (time.time() - t0)
        return ready, peak, used

    # 3. lateness ---------------------------------------------------------------------------------
    def lateness(self, count: int) -> None:
        label = f"lateness, {count:,} every minute"
        metrics = {q: self.report.metric(f"late-{q}", f"{label}: {q}", "ms", False, "{:.0f}")
                   for q in ("p50", "p99", "max")}
        for rep in range(self.reps):
            for kind in self.rotation(rep):
                plan = self._load_due(kind, lambda due: populate.Plan(
                    count=count, every=60, first_due=due, spread=60), count)
                due = plan.first_due
                queue = self.world.fresh_queue()
                beat = self.launch(kind, queue, publish_log=True)
                with running([beat]):
                    try:
                        ready = beat.wait_ready(timeout=max(due - time.time(), 1.0) + 60)
                    except (TimeoutError, RuntimeError) as exc:
                        log(f"lateness {kind}: {exc}")
                        continue
                    if beat.launched + ready > due:
                        log(f"lateness {kind}: start-up ({ready:.1f}s) overran the first due "
                            "instant; figures include it")
                    end = due + 60 + 5
                    while time.time() < end:
                        time.sleep(0.5)
                time.sleep(0.3)  # the flush thread writes every 0.2 s
                firsts: dict[str, float] = {}
                for name, at in beat.published():
                    firsts.setdefault(name, at)
                self.world.delete_queue(queue)
                late = sorted((firsts[plan.name(i)] - plan.due(i)) * 1000
                              for i in range(count) if plan.name(i) in firsts)
                missing = count - len(late)
                if not late:
                    log(f"lateness {kind}: nothing published")
                    continue
                p50 = late[len(late) // 2]
                p99 = late[min(len(late) - 1, math.ceil(len(late) * 0.99) - 1)]
                worst = late[-1]
                if missing:
                    # Not sent within 65 s of its due instant: at least that late.
                    p99 = p99 if missing < count * 0.01 else 65_000
                    worst = 65_000
                    metrics["max"].notes[kind] = f"> 65,000 ({missing:,} unsent)"
                for q, value in (("p50", p50), ("p99", p99), ("max", worst)):
                    metrics[q].add(kind, value)
                log(f"lateness {kind}: p50 {p50:.0f} ms, p99 {p99:.0f} ms, max {worst:.0f} ms,"
                    f" {missing} unsent")

    def burst(self, count: int) -> None:
        """``count`` schedules sharing one instant (no offset): how long until the last of
        them is in the broker, and that rate against the publish ceiling of the same run."""
        label = f"burst, {count:,} due at one instant"
        took = self.report.metric(f"burst-{count}", f"{label}: last message", "s after due",
                                  False)
        share = self.report.metric(f"burst-share-{count}", f"{label}: rate / publish ceiling",
                                   "%", True, "{:.0f}")
        for rep in range(self.reps):
            for kind in self.rotation(rep):
                ceiling = self.ceiling(count) if kind == SUBJECT and self.with_ceiling else None
                plan = self._load_due(kind, lambda due: populate.Plan(
                    count=count, every=3600, first_due=due), count)
                queue = self.world.fresh_queue()
                beat = self.launch(kind, queue, publish_log=True)
                with running([beat]):
                    try:
                        beat.wait_ready(timeout=max(plan.first_due - time.time(), 1.0) + 60)
                    except (TimeoutError, RuntimeError) as exc:
                        log(f"burst {kind}: {exc}")
                        continue
                    end = plan.first_due + 65
                    while time.time() < end and self.world.llen(queue) < count:
                        time.sleep(0.2)
                time.sleep(0.3)  # the flush thread writes every 0.2 s
                published = [at for _name, at in beat.published()]
                self.world.delete_queue(queue)
                if len(published) < count:
                    took.notes[kind] = f"> 65 ({count - len(published):,} unsent)"
                    log(f"burst {kind}: {count - len(published):,} unsent after 65 s")
                    continue
                last = max(published) - plan.first_due
                took.add(kind, last)
                if ceiling is not None:
                    share.add(kind, 100 * count / last / ceiling)
                log(f"burst {kind}: last message {last:.2f} s after due ({count / last:,.0f}/s"
                    + ("" if ceiling is None else f", ceiling {ceiling:,.0f}/s") + ")")

    # 4. edit propagation ---------------------------------------------------------------------
    def edit(self, background: int, edits: int) -> None:
        metric = self.report.metric("edit", "edit → message in broker", "s", False, "{:.3f}")
        for kind in self.kinds:
            adapter = self.adapters[kind]
            if adapter.no_edit is not None:
                metric.notes[kind] = adapter.no_edit
                continue
            plan = populate.Plan(count=background, every=7200, first_due=time.time() + 3600,
                                 spread=3600)
            self.load(kind, plan)
            queue = self.world.fresh_queue()
            beat = self.launch(kind, queue)
            with running([beat]):
                try:
                    beat.wait_ready(timeout=60)
                except (TimeoutError, RuntimeError) as exc:
                    log(f"edit {kind}: {exc}")
                    continue
                for index in range(edits):
                    time.sleep(1.0 + 0.37 * index)  # land at different points of the loop
                    before = self.world.llen(queue)
                    started = time.time()
                    due = adapter.edit_due_now(plan.name(index))
                    # From the edit, or from the later instant it made the schedule due at.
                    started = max(started, due or started)
                    cap = 30.0
                    while time.time() < started + cap and self.world.llen(queue) <= before:
                        time.sleep(POLL)
                    took = time.time() - started
                    if took >= cap:
                        metric.notes[kind] = f"> {cap:.0f}"
                        log(f"edit {kind}: no message within {cap:.0f}s")
                        break
                    metric.add(kind, took)
                    log(f"edit {kind}: {took:.3f}s")
            self.world.delete_queue(queue)

    # 5. failover --------------------------------------------------------------------------------
    def failover(self) -> None:
        kill = self.report.metric("failover-kill", f"failover after SIGKILL of the leader "
                                  f"(ttl {FAILOVER_TTL} s)", "s", False)
        term = self.report.metric("failover-term", "failover after SIGTERM of the leader",
                                  "s", False)
        for kind in self.kinds:
            adapter = self.adapters[kind]
            if adapter.no_failover is not None:
                kill.notes[kind] = term.notes[kind] = adapter.no_failover
                continue
            settings = adapter.failover_settings(FAILOVER_TTL, FAILOVER_POLL)
            plan = populate.Plan(count=1, every=1, first_due=time.time(), prefix="tick-")
            self.load(kind, plan)
            queue = self.world.fresh_queue()
            beats: list[Beat] = []
            try:
                leader = self.launch(kind, queue, settings=settings, publish_log=True,
                                           tag="-a")
                beats.append(leader)
                _wait(lambda b=leader: len(b.published()) >= 2, 60, f"{kind} leader publishing")
                for rep in range(self.reps * 2):
                    sig = signal.SIGKILL if rep % 2 == 0 else signal.SIGTERM
                    standby = self.launch(kind, queue, settings=settings,
                                                publish_log=True, tag=f"-{rep}")
                    beats.append(standby)
                    standby.wait_ready(timeout=60)
                    time.sleep(2.0)
                    if standby.published():
                        raise RuntimeError(f"{kind}: the standby published while the leader "
                                           "was alive")
                    killed_at = time.time()
                    os.kill(leader.popen.pid, sig)
                    _wait(lambda s=standby: s.published(), FAILOVER_TTL * 3,
                          f"{kind} standby publishing")
                    took = standby.published()[0][1] - killed_at
                    (kill if sig == signal.SIGKILL else term).add(kind, took)
                    log(f"failover {kind} {signal.Signals(sig).name}: {took:.2f}s")
                    leader.stop()
                    leader = standby
            except (TimeoutError, RuntimeError) as exc:
                log(f"failover {kind}: {exc}")
            finally:
                for beat in beats:
                    beat.stop()
                self.world.delete_queue(queue)


    # 6. shards --------------------------------------------------------------------------------
    def shards(self, count: int, cap: float) -> None:
        if SUBJECT not in self.adapters:
            return
        for replicas, shards in SHARD_LAYOUTS:
            label = f"sharded dispatch {count:,} due, {replicas} replicas x {shards} shards"
            rate = self.report.metric(f"shards-rate-{replicas}x{shards}",
                                      f"{label}: aggregate rate", "messages/s", True,
                                      "{:,.0f}")
            cpu = self.report.metric(f"shards-cpu-{replicas}x{shards}",
                                     f"{label}: CPU per replica", "s", False)
            for metric in (rate, cpu):
                metric.notes.update({k: "" for k in self.kinds if k != SUBJECT})
            for _rep in range(self.reps):
                outcome = self._sharded_once(count, replicas, shards, cap)
                if outcome is not None:
                    rate.add(SUBJECT, outcome[0])
                    cpu.add(SUBJECT, outcome[1])

    def _sharded_once(self, count: int, replicas: int, shards: int,
                      cap: float) -> tuple[float, float] | None:
        world, adapter = self.world, self.adapters[SUBJECT]
        assert isinstance(adapter, Goatbeat)
        settings = adapter.shard_settings(shards, SHARD_TTL, SHARD_RENEW)
        # Start-up, then up to two looks at the sharding before the shares settle.
        warmup = self._warmup(SUBJECT, count) + 2 * SHARD_RENEW
        load_guess = self.load_time.get((SUBJECT, count), 1.0 + count / 10_000)
        due = float(math.ceil(time.time() + load_guess + warmup))
        self.load(SUBJECT, populate.Plan(count=count, every=3600, first_due=due))
        queue = world.fresh_queue()
        beats = [self.launch(SUBJECT, queue, settings=settings, tag=f"-r{i}")
                 for i in range(replicas)]
        with running(beats):
            try:
                _wait(lambda: adapter.shards_shared(replicas, shards), due - time.time() - 0.2,
                      f"{replicas} replicas to share {shards} shards")
            except TimeoutError as exc:
                log(f"shards {replicas}x{shards}: {exc}")
                return None
            time.sleep(max(0.0, due - 0.1 - time.time()))
            before = [beat.cpu() for beat in beats]
            got = 0
            while time.time() < due + cap:
                got = world.llen(queue)
                if got >= count:
                    break
                time.sleep(POLL)
            elapsed = time.time() - due
            spent = [beat.cpu() - used for beat, used in zip(beats, before, strict=True)]
        world.delete_queue(queue)
        per_replica = statistics.mean(spent)
        # Short of all N within the cap, the rate is what was sent by then.
        sent = f"{count:,}" if got >= count else f"{got:,} of {count:,} (cap)"
        log(f"shards {replicas}x{shards}: {sent} in {elapsed:.2f}s, {got / elapsed:,.0f}/s, "
            f"CPU per replica {per_replica:.2f}s ({', '.join(f'{s:.2f}' for s in spent)})")
        return min(got, count) / elapsed, per_replica


def _wait(condition: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.01)


def _median_ms(call: Callable[[], None], rounds: int) -> float:
    for _ in range(20):
        call()
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


# -- the machine ------------------------------------------------------------------------------
def machine(world: World) -> str:
    cpu = "unknown CPU"
    with suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with world.admin.connect() as conn:
        pg_version = conn.execute(sa.text("SHOW server_version")).scalar_one()
    redis_version = world.redis.info("server")["redis_version"]
    # Redis is there whichever the broker (RedBeat's store); the broker is named either way.
    stores = (f"Redis {redis_version} (broker)" if isinstance(world.broker, RedisBroker)
              else f"Redis {redis_version}; {world.broker.describe()} (broker)")
    import celery

    return (f"{cpu}, {psutil.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB"
            f" RAM; Linux {platform.release()}; Python {platform.python_version()}; "
            f"PostgreSQL {pg_version}; {stores}; Celery {celery.__version__}")


def _sizes(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--only", default=",".join(k for k in KINDS if k not in ON_REQUEST),
                        help="schedulers, comma-separated (also: goatbeat-mysql, goatbeat on "
                             "MySQL / MariaDB at GOATBEAT_BENCH_MYSQL_URL)")
    parser.add_argument("--bench", help=f"scenarios, comma-separated (default on Redis: "
                        f"{BENCHES['redis']}; on RabbitMQ: {BENCHES['amqp']}; also: shards)")
    parser.add_argument("--broker", choices=tuple(BENCHES), default="redis",
                        help="where the beat processes publish: redis (default) or amqp "
                             "(RabbitMQ, GOATBEAT_BENCH_AMQP_URL; Redis is still RedBeat's store)")
    parser.add_argument("--dispatch-sizes", type=_sizes, help="e.g. 10000,100000")
    parser.add_argument("--idle-sizes", type=_sizes, help="e.g. 10000,100000,1000000")
    parser.add_argument("--idle-window", type=float,
                        help="seconds of idle CPU measured (default 10; the kernel counts CPU "
                             "time in 10 ms steps, so a longer window resolves a quieter one)")
    parser.add_argument("--shard-size", type=int,
                        help="schedules due at once in the sharded dispatch (default 100000)")
    parser.add_argument("--lateness-size", type=int,
                        help="schedules every minute in the lateness scenario (default 10000)")
    parser.add_argument("--edits", type=int,
                        help="edits per scheduler in the edit scenario (default --reps)")
    parser.add_argument("--lead", type=float, default=0.0,
                        help="seconds at least between loading the schedules and their first "
                             "due instant (a busy machine starts a beat process slowly)")
    parser.add_argument("--redis-db", type=int, default=13)
    parser.add_argument("--json", type=Path, help="also write the raw samples here")
    parser.add_argument("--keep", action="store_true",
                        help="keep the beat processes' logs and publish records")
    args = parser.parse_args(argv)

    only = args.only.split(",")
    benches = set((args.bench or BENCHES[args.broker]).split(","))
    if args.broker == "amqp" and benches - set(BENCHES["amqp"].split(",")):
        parser.error(f"--bench: on --broker amqp only {BENCHES['amqp']}, not "
                     f"{','.join(sorted(benches - set(BENCHES['amqp'].split(','))))}")
    pg = make_url(os.environ.get("GOATBEAT_BENCH_PG_URL", DEFAULT_PG)).set(
        drivername="postgresql+psycopg")
    redis_url = os.environ.get("GOATBEAT_BENCH_REDIS_URL", DEFAULT_REDIS)
    world = World(pg, redis_url, args.redis_db, broker=args.broker,
                  amqp_url=os.environ.get("GOATBEAT_BENCH_AMQP_URL", DEFAULT_AMQP))
    world.keep = args.keep
    with ExitStack() as cleanup:  # whatever was set up is closed, last first
        cleanup.callback(world.close)
        adapters: list[Adapter] = []
        for adapter_class in ADAPTERS:
            if adapter_class.kind in only:
                adapter = adapter_class(world)
                adapter.setup()
                cleanup.callback(adapter.teardown)
                adapters.append(adapter)
        bench = Bench(world, adapters, args.reps, args.quick)
        bench.min_lead = args.lead
        started = time.time()
        description = machine(world)
        log(description)
        dispatch_sizes = args.dispatch_sizes or ((1_000, 5_000) if args.quick
                                                 else (10_000, 100_000))
        idle_sizes = args.idle_sizes or ((1_000, 10_000) if args.quick
                                         else (10_000, 100_000, 1_000_000))
        steps: list[tuple[str, Callable[[], None]]] = []
        bench.with_ceiling = "ceiling" in benches and SUBJECT in bench.kinds
        if "idle" in benches:
            for size in idle_sizes:
                steps.append(("idle", lambda n=size: bench.idle(  # type: ignore[misc]
                    n, window=args.idle_window or (5.0 if args.quick else 10.0),
                    startup_cap=60.0 if args.quick else 120.0)))
        if "dispatch" in benches:
            for size in dispatch_sizes:
                steps.append(("dispatch", lambda n=size: bench.dispatch(  # type: ignore[misc]
                    n, cap=20.0 if args.quick else 30.0)))
        if "lateness" in benches:
            steps.append(("lateness", lambda: bench.lateness(
                args.lateness_size or (1_000 if args.quick else 10_000))))
        if "burst" in benches:
            steps.append(("burst", lambda: bench.burst(1_000 if args.quick else 10_000)))
        if "edit" in benches:
            steps.append(("edit", lambda: bench.edit(background=1_000,
                                                     edits=args.edits or args.reps)))
        if "failover" in benches:
            steps.append(("failover", bench.failover))
        if "shards" in benches:
            shard_size = args.shard_size or (10_000 if args.quick else 100_000)
            steps.append(("shards", lambda: bench.shards(shard_size,
                                                         cap=30.0 if args.quick else 60.0)))
        for name, step in steps:
            try:
                step()
            except Exception:  # report what was measured; say what broke
                log(f"{name} failed:\n{traceback.format_exc()}")
            if args.json:
                args.json.write_text(json.dumps({"machine": description, "results":
                                                 bench.report.dump()}, indent=1))
    minutes = (time.time() - started) / 60
    print(f"\nMachine: {description}")
    print(f"Run: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {minutes:.0f} min, "
          f"{args.reps} repetitions, medians (min–max)\n")
    print(bench.report.table(adapters))
    return 0


if __name__ == "__main__":
    sys.exit(main())
