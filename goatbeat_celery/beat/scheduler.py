"""``celery beat -S goatbeat_celery.Scheduler``: the engine hosted inside Celery's beat service."""

from __future__ import annotations

import gc
import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from functools import partial
from typing import Any

from celery import beat

from goatbeat_celery import config as config_module
from goatbeat_celery import django_handover
from goatbeat_celery.beat import observability, webhooks
from goatbeat_celery.beat.declared import DeclaredSchedule
from goatbeat_celery.beat.entries import GoatbeatEntry
from goatbeat_celery.beat.health import HealthEndpoints, Liveness
from goatbeat_celery.beat.pace import Pace
from goatbeat_celery.beat.schedule_view import ScheduleView
from goatbeat_celery.beat.stopsignals import StopSignals
from goatbeat_celery.beat.submitter import CelerySubmitter, publish_entry
from goatbeat_celery.core.loop.engine import Engine
from goatbeat_celery.core.rules.misfire import describe_grace
from goatbeat_celery.core.rules.triggers import TriggerRegistry
from goatbeat_celery.core.types.errors import ConfigurationError, GoatbeatError
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.spec import ScheduleSpec
from goatbeat_celery.display import with_migrate_command
from goatbeat_celery.store import Store, mask_url

logger = logging.getLogger(__name__)

#: Socket timeouts set on the beat process's broker connections when the app sets none, so a
#: hung broker cannot hold the loop past the lease's local deadline.
BROKER_SOCKET_TIMEOUT = 5.0
#: Python's own threshold for the youngest generation, and what beat sets in its place.
PYTHON_GEN0_THRESHOLD = 700
BURST_GEN0_THRESHOLD = 10_000


def app_given(argv: Sequence[str]) -> str | None:
    """The app named with ``-A``/``--app`` on a celery command line, if any."""
    for index, word in enumerate(argv):
        if word in ("-A", "--app") and index + 1 < len(argv):
            return argv[index + 1]
        if word.startswith("--app="):
            return word[len("--app="):]
        if word.startswith("-A") and len(word) > 2:
            return word[2:]
    return None


def new_holder_id() -> str:
    """A lease holder identity unique to this process: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Scheduler(beat.Scheduler):  # type: ignore[misc]
    """A drop-in beat scheduler that several replicas can run at once.

    Celery builds it twice: lazily for the banner (no connection, no lease), then for real.
    ``close()`` may be called twice on shutdown; it releases the lease so a standby takes over.
    """

    def __init__(self, app: Any, *args: Any, lazy: bool = False, **kwargs: Any) -> None:
        self._engine: Engine | None = None
        self._observability: observability.Observability | None = None
        self._delivery: webhooks.WebhookDelivery | None = None
        self._handover: django_handover.HandoverWatch | None = None
        self._liveness = Liveness(stale_after=timedelta(0))  # replaced when set up
        self._closed = False
        self._ticking_thread: int | None = None
        self._stop_signals = StopSignals()
        self._frozen = False
        # The collector's thresholds before _freeze_heap raised them, restored by close().
        self._gc_thresholds: tuple[int, ...] | None = None
        try:
            self.goatbeat = config_module.load(app)
        except ConfigurationError as exc:
            # The exit message is the report (printed once, every problem listed).
            raise SystemExit(f"goatbeat: {exc}") from exc
        # max_interval is Celery's, read by Celery's __init__ (the argument, --max-interval,
        # beat_max_loop_interval, else its 300 s default). The engine ends its own waits
        # sooner where it must (goatbeat_max_interval where it cannot hear a change); capping
        # them at 5 s woke an idle leader on PostgreSQL twice between renewals.
        self._pace = Pace()
        super().__init__(app, *args, lazy=lazy, **kwargs)

    #: The class that sends each claimed run to the broker, built by :meth:`make_engine` as
    #: ``submitter_class(app, lazy=..., scheduler=self, entries=...)``. A subclass of this
    #: scheduler sets a subclass of :class:`~goatbeat_celery.beat.submitter.CelerySubmitter`
    #: here to change how runs are sent, as django-celery-beat's ``Entry`` is set.
    submitter_class: type[CelerySubmitter] = CelerySubmitter

    def make_engine(self, store: Store, holder: str) -> Engine:
        """The engine this replica runs, on the open ``store`` under the lease holder id
        ``holder``; called once, by :meth:`setup_schedule` on the non-lazy instance, after
        metrics are started. Its submitter is a :attr:`submitter_class`. What a subclass
        declares before :meth:`setup_schedule` (``add``, ``update_from_dict``, ...) is synced
        first; what it declares after, at the next tick."""
        config = self.goatbeat.config
        declared = self._view().declared
        submitter = self.submitter_class(self.app, lazy=declared.lazy, scheduler=self,
                                         entries=declared.entries)
        submitter.presence.ttl = config.settings.rotation_presence_ttl.total_seconds()
        return Engine(
            store=store,
            lease=store,
            submitter=submitter,
            settings=config.settings,
            holder=holder,
            triggers=declared.triggers,
            config_schedules=tuple(declared.specs.values()),
            task_allowed=config.task_allowed,
            observer=None if self._observability is None else self._observability.observer,
            runs=store,
            alerts=store,
        )

    # -- Celery's hooks ------------------------------------------------------------------
    def setup_schedule(self) -> None:
        if self._engine is not None:
            return  # set up once: a second call (Celery's own tests make one) changes nothing
        loaded = self.goatbeat
        config = loaded.config
        _bound_broker_sockets(self.app)
        try:
            store = config.open_store()
        except GoatbeatError as exc:
            # A hint to migrate names the app this beat was started with.
            message = with_migrate_command(str(exc), app_given(sys.argv))
            raise SystemExit(f"goatbeat: cannot open {mask_url(config.database_url)}: "
                             f"{message}") from exc
        settings = config.settings
        # Every replica ticks at least each renew interval, and no call in a tick outlives the
        # lease's local validity: a loop silent for longer is stuck.
        self._liveness = Liveness(stale_after=settings.lease_ttl + settings.lease_renew_interval)
        health = HealthEndpoints(
            liveness=self._liveness, leading=self._leading,
            read_database=partial(store.inspect, settings.lease_name))
        try:
            # Only the real (non-lazy) instance gets here: it alone serves metrics.
            self._observability = observability.start(self, config, store, health)
        except GoatbeatError as exc:
            store.close()
            raise SystemExit(f"goatbeat: {exc}") from exc
        holder = new_holder_id()
        self._engine = self.make_engine(store, holder)
        if config.webhooks is not None:
            # Off the scheduling path: a thread of its own, on the store's pool.
            exporter = self._observability.exporter
            self._delivery = webhooks.start(
                store, config.webhooks, holder=holder,
                report=None if exporter is None else exporter.metrics.webhook_attempted)
        # A DatabaseScheduler left running beside the leader sends each task a second time.
        self._handover = django_handover.start_watch(
            config.database_url, store, settings.lease_name, leading=self._leading)
        logger.info("goatbeat: replica %s on %s, lease %r%s", holder,
                    mask_url(config.database_url), settings.lease_name,
                    "" if settings.shards == 1 else f" in {settings.shards} shards",
                    extra={"action": "started"})
        warning = config.store_warning()
        if warning is not None:
            logger.warning("goatbeat: %s", warning, extra={"action": "one_host_store"})
        unconfirmed = broker_warning(self.app)
        if unconfirmed is not None:
            logger.warning("goatbeat: %s", unconfirmed, extra={"action": "unconfirmed_broker"})
        for warning in config_module.policy_warnings(
                loaded.schedules, config.settings, config.settings.run_start_timeout):
            logger.warning("goatbeat: %s", warning, extra={"action": "needs_run_tracking"})
        for warning in config_module.never_run_warnings(loaded, datetime.now(timezone.utc)):
            logger.warning("goatbeat: %s", warning, extra={"action": "config_never_runs"})
        for warning in config_module.legacy_entry_warnings(dict(self.app.conf.beat_schedule or {})):
            logger.warning("goatbeat: %s", warning, extra={"action": "config_deprecated"})

    #: Whether :meth:`tick` waits for the next thing to do itself, woken early by a change the
    #: store announces (PostgreSQL's NOTIFY), and returns 0.0; Celery's ``Service`` sleeps
    #: with ``time.sleep``, which nothing can cut short. False: ``tick`` returns at once with
    #: the seconds to sleep, as Celery's does, for a loop that sleeps them (or calls
    #: :meth:`wait`). Either way no wait lasts longer than ``max_interval``.
    tick_waits = True

    def tick(self, *args: Any, **kwargs: Any) -> float:
        """Do what is due, then wait for the next thing to do (see :attr:`tick_waits`)."""
        engine = self._engine
        if engine is None:
            return float(self.max_interval)
        self._ticking_thread = threading.get_ident()
        self._liveness.ticked()
        try:
            if self._pace.due():
                with self._stop_signals.held():
                    self._pace.planned(engine.tick())
                if not self._frozen:
                    self._freeze_heap()
            seconds = min(self._pace.left(), float(self.max_interval))
            if not self.tick_waits:
                return seconds
            self.wait(seconds)
        finally:
            self._ticking_thread = None
        # The wait is over (the instant came, or max_interval, or a change was heard).
        return 0.0

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds`` (at most ``max_interval``), woken early by a change the store
        announces; True when woken (the next :meth:`tick` then looks at once)."""
        seconds = min(seconds, float(self.max_interval))
        engine = self._engine
        if engine is None:
            time.sleep(max(0.0, seconds))
            return False
        woken = engine.wait(seconds)
        if woken:
            self._pace.planned(0.0)
        return woken

    def _freeze_heap(self) -> None:
        """After the first tick, the objects start-up built (Celery, the app, the store's
        statements: 135,000 of them) go to the collector's permanent generation: a full
        collection, which an idle beat runs every few minutes, then traverses only what came
        since (2 ms, not 70). Garbage left by start-up is collected first; close() gives them
        back to the collector.

        The youngest generation is then collected every 10,000 allocations rather than
        Python's 700, unless the application chose its own thresholds: a burst makes a few
        dozen short-lived objects per message, which die without cycles, and each collection
        of the youngest generations traversed the whole batch in flight (about a tenth of the
        claim loop's CPU)."""
        self._frozen = True
        gc.collect()
        gc.freeze()
        thresholds = gc.get_threshold()
        if thresholds[0] == PYTHON_GEN0_THRESHOLD:
            self._gc_thresholds = thresholds
            gc.set_threshold(BURST_GEN0_THRESHOLD, *thresholds[1:])

    # apply_entry is Celery's own, never overridden here: tools that watch beat wrap it on
    # celery.beat.Scheduler, and the submitter calls it once per claimed occurrence.
    def apply_async(self, entry: Any, producer: Any = None, advance: bool = True,
                    **kwargs: Any) -> Any:
        """Send one claimed occurrence, as Celery's ``apply_async`` sends a due entry.

        ``advance`` is ignored: the claim advanced the schedule in the store already. An entry
        that is not goatbeat's (one a subclass built) is sent as Celery would send it.
        """
        if isinstance(entry, GoatbeatEntry):
            return publish_entry(self.app, entry, producer, self.send_task)
        return super().apply_async(entry, producer=producer, advance=False, **kwargs)

    def reserve(self, entry: Any) -> Any:
        """The entry of the run after ``entry`` (``next(entry)``), as Celery's ``reserve``.

        A claimed occurrence's schedule was advanced in the store when it was claimed: its next
        entry is returned and ``schedule`` is left as it is.
        """
        if isinstance(entry, GoatbeatEntry):
            return next(entry)
        return super().reserve(entry)

    def close(self) -> None:
        if self._ticking_thread == threading.get_ident():
            # Called from a signal handler in the middle of a tick. Celery raises SystemExit
            # next, which rolls back whatever the tick had open, and then calls close() again.
            return
        if self._closed:
            return
        self._closed = True
        delivery, self._delivery = self._delivery, None
        engine, self._engine = self._engine, None
        if engine is not None:
            # The lease first: a request to a hanging webhook never delays it. After a second
            # stop signal nothing waits on the database, which may be what the tick hung on.
            insisted = self._stop_signals.insisted
            if insisted:
                logger.warning("stopping at once on a second stop signal: the lease is not "
                               "released, a standby takes it when this process's session ends "
                               "or the lease expires", extra={"action": "stop_insisted"})
            engine.close(release=not insisted)
            presence = getattr(engine.submitter, "presence", None)
            if presence is not None:
                presence.close()  # the rotation's asks of the broker stop with it
        if delivery is not None:
            delivery.close()  # before the store it uses is closed
        watch_handover, self._handover = self._handover, None
        if watch_handover is not None:
            watch_handover.close()
        if engine is not None:
            engine.store.close()
        watch, self._observability = self._observability, None
        if watch is not None:
            watch.close()  # after engine.close(): the release still reaches the observers
        self._stop_signals.restore()
        if self._frozen:
            gc.unfreeze()
        if self._gc_thresholds is not None:
            gc.set_threshold(*self._gc_thresholds)
            self._gc_thresholds = None
        super().close()

    def sync(self) -> None:
        """Nothing to persist (every claim is written when it is made): the view of the
        schedule reads the store again when next read."""
        view = self.__dict__.get("_schedule_view")
        if view is not None:
            view.stale()

    # -- the schedule: a view of what this replica would send, and the door to its config ----
    def get_schedule(self) -> ScheduleView:
        """Every schedule this replica would send (:mod:`goatbeat_celery.beat.schedule_view`)."""
        return self._view().current()

    def set_schedule(self, schedule: Mapping[str, Any]) -> None:
        """Declare ``schedule`` as the config entries, in place of all the others."""
        self.merge_inplace(schedule)

    schedule = property(get_schedule, set_schedule)

    def add(self, **kwargs: Any) -> Any:
        """Declare one config entry, as ``beat_schedule`` gives one (``name``, ``task``,
        ``schedule``, ``args``, ``kwargs``, ``options``); returns its entry. Raises
        ConfigurationError naming every problem, and declares nothing then."""
        name = kwargs.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigurationError([Problem("name", f"expected the entry's name, got {name!r}")],
                                     subject="schedule entry")
        view = self._view()
        view.declare({name: kwargs})
        return dict.get(view, name)

    def update_from_dict(self, dict_: Mapping[str, Any]) -> None:
        """Declare these config entries (``beat_schedule``-shaped dicts or Celery entries),
        all at once, beside the others."""
        self._view().declare(dict_)

    def merge_inplace(self, b: Mapping[str, Any]) -> None:
        """Declare these config entries, all at once, in place of all the others: those left
        out are disabled as a removed ``beat_schedule`` entry is."""
        self._view().declare(b, replace=True)

    def _view(self) -> ScheduleView:
        view: ScheduleView | None = self.__dict__.get("_schedule_view")
        if view is None:
            view = ScheduleView(self, DeclaredSchedule(self.app, self.goatbeat))
            view.declared.watch(self._on_declared)
            self.__dict__["_schedule_view"] = view
        return view

    def _on_declared(self, specs: tuple[ScheduleSpec, ...], triggers: TriggerRegistry) -> None:
        engine = self._engine
        if engine is not None:
            engine.declare(specs, triggers)

    @property
    def info(self) -> str:
        config = self.goatbeat.config
        settings = config.settings
        scope = " (one host only)" if config.store_warning() else ""
        return (
            f"    . goatbeat store -> {mask_url(config.database_url)}{scope}\n"
            f"    . goatbeat lease -> {settings.lease_name!r} ttl "
            f"{settings.lease_ttl.total_seconds()}s, "
            f"renew every {settings.lease_renew_interval.total_seconds()}s\n"
            f"    . goatbeat misfire -> {settings.misfire_policy.value}, "
            f"{describe_grace(settings.misfire_grace, _seconds)}, "
            f"max catch-up {settings.max_catchup}\n"
            f"    . goatbeat config schedules -> {len(self.goatbeat.schedules)}"
        )

    # -- helpers -------------------------------------------------------------------------
    @property
    def engine(self) -> Engine | None:
        return self._engine

    def _leading(self) -> bool:
        engine = self._engine
        return engine is not None and engine.is_leader()


def _bound_broker_sockets(app: Any) -> None:
    """Options on the beat process's own broker connections: bounded socket timeouts on Redis,
    publisher confirms on AMQP (see :func:`broker_warning`)."""
    scheme = broker_scheme(app)
    options = dict(app.conf.broker_transport_options or {})
    if scheme in REDIS_SCHEMES:
        # Only the Redis transports take these; AMQP keeps broker_connection_timeout.
        options.setdefault("socket_timeout", BROKER_SOCKET_TIMEOUT)
        options.setdefault("socket_connect_timeout", BROKER_SOCKET_TIMEOUT)
    elif scheme in AMQP_SCHEMES:
        # Without confirms a publish returns once the bytes are written: a RabbitMQ that dies
        # then loses a run goatbeat has marked submitted. With them, "accepted" means RabbitMQ
        # took responsibility for the message.
        options.setdefault("confirm_publish", True)
        # A node that stops answering without closing the connection must not hold a read
        # (a channel opening, a confirm) past the lease's local deadline.
        options.setdefault("read_timeout", BROKER_SOCKET_TIMEOUT)
        options.setdefault("write_timeout", BROKER_SOCKET_TIMEOUT)
    else:
        return
    app.conf.broker_transport_options = options


REDIS_SCHEMES = frozenset({"redis", "rediss", "sentinel"})
AMQP_SCHEMES = frozenset({"amqp", "amqps", "pyamqp"})


def broker_scheme(app: Any) -> str:
    """The transport of the app's broker URL (``redis``, ``amqp``, …)."""
    return str(app.conf.broker_url or "").split("://", 1)[0].split("+")[-1].lower()


def broker_warning(app: Any) -> str | None:
    """Why the broker cannot confirm what goatbeat marks submitted, if it cannot."""
    options = app.conf.broker_transport_options or {}
    if broker_scheme(app) in AMQP_SCHEMES and options.get("confirm_publish", True) is False:
        return ("broker_transport_options sets confirm_publish=False: an AMQP publish then "
                "counts as sent once written to the socket, and a RabbitMQ that fails at that "
                "moment loses a run goatbeat has marked submitted; remove the option")
    return None


def _seconds(duration: timedelta) -> str:
    return f"{duration.total_seconds()}s"
