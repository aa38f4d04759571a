"""What the engine reports, turned into Celery signals, a user hook and metrics.

The engine calls one :class:`~goatbeat_celery.core.loop.observer.EngineObserver`; the scheduler
gives it a :class:`MultiObserver` of a :class:`CeleryObserver` (signals and the
``goatbeat_occurrence_hook``) and, when ``goatbeat_metrics_port`` is set, the Prometheus
observer of :mod:`goatbeat_celery.beat.metrics`.

Everything here runs inline in the scheduling loop. A receiver, a hook or an observer that
raises is logged and ignored: observability must never stop a replica from dispatching.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, Protocol

from goatbeat_celery import display, signals
from goatbeat_celery.beat.health import HealthEndpoints
from goatbeat_celery.beat.metrics import MetricsExporter, StatusReading
from goatbeat_celery.config import GoatbeatConfig, OccurrenceHook
from goatbeat_celery.core.loop.observer import EngineObserver, OccurrenceRecord
from goatbeat_celery.core.protocols import LeaseManager, ScheduleReads
from goatbeat_celery.core.rules.alerts import AlertEvent
from goatbeat_celery.core.rules.shards import Shard, shard_lease_name, sharding_prefix
from goatbeat_celery.core.types.claims import Dispatch
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.settings import Settings

logger = logging.getLogger(__name__)

__all__ = [
    "CeleryObserver",
    "MultiObserver",
    "Observability",
    "OccurrenceHook",
    "start",
]


#: The signal each alert change sends.
_ALERT_SIGNALS = {"open": signals.alert_opened, "repeat": signals.alert_repeated,
                  "resolve": signals.alert_resolved, "remind": signals.alert_repeated}


def _guarded(call: Callable[..., object], *args: Any, **kwargs: Any) -> None:
    try:
        call(*args, **kwargs)
    except Exception:  # observability must never break the scheduling loop
        logger.exception("%r raised; ignored", call, extra={"action": "observer_failed"})


class CeleryObserver:
    """Sends :mod:`goatbeat_celery.signals` and calls the occurrence hook, if any.

    ``sender`` is passed to every receiver (the Scheduler). Celery's ``Signal.send`` already logs
    and swallows a receiver's exception; the guard here also covers the hook and the rest.
    """

    def __init__(self, *, sender: object, hook: OccurrenceHook | None = None) -> None:
        self.sender = sender
        self.hook = hook

    def lease_acquired(self, grant: LeaseGrant) -> None:
        _guarded(signals.lease_acquired.send, sender=self.sender,
                 lease=grant.name, holder=grant.holder, token=grant.token,
                 expires_at=grant.expires_at)

    def lease_lost(self, name: str, holder: str, reason: str) -> None:
        _guarded(signals.lease_lost.send, sender=self.sender,
                 lease=name, holder=holder, reason=reason)

    def claimed(self, dispatches: Sequence[Dispatch]) -> None:
        if not signals.occurrence_claimed.receivers:
            return  # nothing listens: skip building the arguments of every claim
        for dispatch in dispatches:
            execution = dispatch.execution
            _guarded(signals.occurrence_claimed.send,
                     sender=self.sender, key=dispatch.key, schedule_name=execution.schedule_name,
                     task=dispatch.task, occurrence_at=execution.occurrence_at,
                     due_at=execution.due_at, claimed_at=execution.claimed_at,
                     token=execution.token, missed=execution.missed)

    def missed(self, schedule_name: str, count: int) -> None:
        _guarded(signals.occurrence_missed.send,
                 sender=self.sender, schedule_name=schedule_name, count=count)

    def submitted(self, records: Sequence[OccurrenceRecord]) -> None:
        if (self.hook is None and not signals.occurrence_submitted.receivers
                and not signals.occurrence_submit_failed.receivers):
            return  # nothing listens: skip a call per message
        for record in records:
            if record.error is None:
                _guarded(signals.occurrence_submitted.send,
                         sender=self.sender, key=record.key, schedule_name=record.schedule_name,
                         record=record)
            else:
                _guarded(signals.occurrence_submit_failed.send, sender=self.sender,
                         key=record.key, schedule_name=record.schedule_name, error=record.error,
                         record=record)
            if self.hook is not None:
                self._call_hook(self.hook, record)

    def set_aside(self, schedule_name: str, reason: str) -> None:
        _guarded(signals.schedule_set_aside.send, sender=self.sender,
                 schedule_name=schedule_name, reason=reason)

    def skipped(self, executions: Sequence[Execution]) -> None:
        for execution in executions:
            _guarded(signals.occurrence_skipped.send, sender=self.sender, key=execution.key,
                     schedule_name=execution.schedule_name,
                     occurrence_at=execution.occurrence_at, reason=execution.last_error)

    def paused(self, schedule_name: str, reason: str) -> None:
        _guarded(signals.schedule_paused.send, sender=self.sender,
                 schedule_name=schedule_name, reason=reason)

    def runs_resent(self, executions: Sequence[Execution]) -> None:
        for execution in executions:
            _guarded(signals.run_resent.send, sender=self.sender, key=execution.key,
                     schedule_name=execution.schedule_name, reason=execution.last_error,
                     attempt=execution.attempts)

    def runs_ended(self, executions: Sequence[Execution]) -> None:
        if not signals.run_ended.receivers and self.hook is None:
            return
        for execution in executions:
            record = OccurrenceRecord.of_run(execution)
            _guarded(signals.run_ended.send, sender=self.sender, key=record.key,
                     schedule_name=record.schedule_name, outcome=record.outcome, record=record)
            if self.hook is not None:
                self._call_hook(self.hook, record)

    def alerts_changed(self, events: Sequence[AlertEvent]) -> None:
        for event in events:
            if not event.told:  # acknowledged or silenced: as for its webhook, no signal
                continue
            alert = event.alert
            _guarded(_ALERT_SIGNALS[event.action].send, sender=self.sender, alert=alert,
                     schedule_name=alert.schedule_name, rule=alert.rule.value,
                     reason=alert.reason)

    @staticmethod
    def _call_hook(hook: OccurrenceHook, record: OccurrenceRecord) -> None:
        try:
            hook(record)
        except Exception:  # a user's hook must never break the scheduling loop
            logger.exception("goatbeat_occurrence_hook %r raised on %r; ignored", hook,
                             record.key, extra={"action": "hook_failed"})


class MultiObserver:
    """Passes every event to each observer in turn; one that raises does not stop the others."""

    def __init__(self, observers: Iterable[EngineObserver]) -> None:
        self.observers: tuple[EngineObserver, ...] = tuple(observers)

    def lease_acquired(self, grant: LeaseGrant) -> None:
        for observer in self.observers:
            _guarded(observer.lease_acquired, grant)

    def lease_lost(self, name: str, holder: str, reason: str) -> None:
        for observer in self.observers:
            _guarded(observer.lease_lost, name, holder, reason)

    def claimed(self, dispatches: Sequence[Dispatch]) -> None:
        for observer in self.observers:
            _guarded(observer.claimed, dispatches)

    def missed(self, schedule_name: str, count: int) -> None:
        for observer in self.observers:
            _guarded(observer.missed, schedule_name, count)

    def submitted(self, records: Sequence[OccurrenceRecord]) -> None:
        for observer in self.observers:
            _guarded(observer.submitted, records)

    def set_aside(self, schedule_name: str, reason: str) -> None:
        for observer in self.observers:
            _guarded(observer.set_aside, schedule_name, reason)

    def skipped(self, executions: Sequence[Execution]) -> None:
        for observer in self.observers:
            _guarded(observer.skipped, executions)

    def paused(self, schedule_name: str, reason: str) -> None:
        for observer in self.observers:
            _guarded(observer.paused, schedule_name, reason)

    def runs_resent(self, executions: Sequence[Execution]) -> None:
        for observer in self.observers:
            _guarded(observer.runs_resent, executions)

    def runs_ended(self, executions: Sequence[Execution]) -> None:
        for observer in self.observers:
            _guarded(observer.runs_ended, executions)

    def alerts_changed(self, events: Sequence[AlertEvent]) -> None:
        for observer in self.observers:
            _guarded(observer.alerts_changed, events)


class StatusStore(ScheduleReads, LeaseManager, Protocol):
    """A store that is its own lease manager, as every store shipped is."""


def read_status(store: StatusStore, settings: Settings) -> StatusReading:
    """The schedules by state and the live standbys, as ``status`` shows them."""
    counts = store.count_schedules()
    rows = store.list_leases(sharding_prefix(settings.lease_name))
    info = store.inspect(shard_lease_name(settings.lease_name, Shard(0, settings.shards)))
    return counts.by_state, len(display.standby_replicas(rows, info, settings))


class Observability:
    """A scheduler's observer and the metrics exporter it may run; :meth:`close` stops it."""

    def __init__(self, observer: EngineObserver, exporter: MetricsExporter | None = None) -> None:
        self.observer = observer
        self.exporter = exporter

    def close(self) -> None:
        """Stop the metrics exporter, if any (idempotent)."""
        exporter, self.exporter = self.exporter, None
        if exporter is not None:
            exporter.close()


def start(sender: object, config: GoatbeatConfig,
          store: StatusStore | None = None,
          health: HealthEndpoints | None = None) -> Observability:
    """Build the observer for a scheduler and start its metrics exporter when a port is set
    (with ``store``, it reads the schedules' states and the standbys from it when scraped;
    with ``health``, it answers ``/healthz`` and ``/readyz`` too).

    Raises ConfigurationError when the exporter cannot start (client missing, port taken).
    """
    observers: list[EngineObserver] = [CeleryObserver(sender=sender, hook=config.occurrence_hook)]
    exporter = None
    if config.metrics_port is not None:
        settings = config.settings
        exporter = MetricsExporter.start(
            port=config.metrics_port, addr=config.metrics_address, lease_ttl=settings.lease_ttl,
            shard_leases=() if settings.shards == 1 else [
                shard_lease_name(settings.lease_name, Shard(k, settings.shards))
                for k in range(settings.shards)],
            read_status=None if store is None else partial(read_status, store, settings),
            health=health)
        observers.append(exporter.observer)
    return Observability(MultiObserver(observers), exporter)
