"""Celery submission: each claimed occurrence sent with its idempotency key as the task id."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from celery.beat import SchedulingError
from kombu.exceptions import OperationalError as KombuOperationalError
from sqlalchemy.exc import SQLAlchemyError

from goatbeat_celery import headers
from goatbeat_celery.beat import tracing
from goatbeat_celery.beat.context import app_current
from goatbeat_celery.beat.entries import GoatbeatEntry, ScheduleObjects
from goatbeat_celery.beat.presence import QueuePresence
from goatbeat_celery.config import LAZY_MARKER
from goatbeat_celery.core.rules.headers import without_reserved
from goatbeat_celery.core.rules.rotation import place
from goatbeat_celery.core.rules.validation import call_problems, options_problems
from goatbeat_celery.core.types.claims import Dispatch, SubmitResult
from goatbeat_celery.core.types.errors import ConfigurationError, GoatbeatError
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.spec import quoted_name

logger = logging.getLogger(__name__)

#: Message headers that tell a worker which occurrence a task run belongs to.
HEADER_SCHEDULE = headers.SCHEDULE
HEADER_OCCURRENCE = headers.OCCURRENCE
HEADER_TOKEN = headers.TOKEN
HEADER_MANUAL = headers.MANUAL
HEADER_CELERY_BEAT = headers.CELERY_BEAT
RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}


class CelerySubmitter:
    """Sends dispatches through the app's producer pool and routing.

    One producer (one broker connection) is used for a whole batch. Every broker call is bounded
    by the caller's ``timeout`` so a hung broker cannot outlive the lease's local deadline. A
    broker error stops the batch (the rest wait for the next try); any other error belongs to
    the one message that raised it, which fails alone.

    Each message goes the way Celery's beat sends one: ``scheduler.apply_entry(entry,
    producer=...)``, which calls the scheduler's ``apply_async(entry, ...)`` (see
    :func:`publish_entry`), so that code wrapping those methods sees every run. Without a
    scheduler (a submitter used on its own), :func:`publish_entry` is called directly.
    """

    def __init__(self, app: Any, *, lazy: Mapping[str, Mapping[str, Any]] | None = None,
                 scheduler: Any = None, entries: Mapping[str, Any] | None = None) -> None:
        self.app = app
        # Lazy arguments of this replica's config entries, called as each run is sent.
        self.lazy = {} if lazy is None else lazy  # the very mapping: entries may be added
        self.scheduler = scheduler
        self.schedules = ScheduleObjects(app, entries)
        # Schedules whose stored headers were dropped, each logged once by this process.
        self._dropped_from: set[str] = set()
        #: Who consumes the queues of rotated schedules that hand over (their handover asks);
        #: the scheduler sets its ``ttl`` from ``goatbeat_rotation_presence_ttl``.
        self.presence = QueuePresence(app)

    def submit(self, dispatches: Sequence[Dispatch], *, token: int,
               timeout: float) -> SubmitResult:
        deadline = time.monotonic() + timeout
        result = SubmitResult(accepted=[])
        sent = 0
        # Handed to a publish batch and not yet written to the broker: accepted at the next
        # flush, failed with the rest if the batch fails.
        pending: list[str] = []
        reason = "timed out before the lease's local deadline"
        # The queue each rotated message was sent to, by key.
        clusters: dict[str, str] = {}
        try:
            # Whatever thread sends (the submission's own, in beat), the beat's app is current.
            with app_current(self.app), self.app.producer_or_acquire() as producer:
                outage = _outage_errors(producer.connection)
                # One immediate retry: kombu's default waits 2 s before it, and the claim loop
                # waits for this batch, so a refusing broker would hold every claim that long.
                producer.connection.ensure_connection(
                    max_retries=1, interval_start=0, interval_step=0.2, interval_max=0.2,
                    timeout=max(0.1, min(timeout, 2.0)),
                )
                with _publish_batch(producer) as publishing, _declaring_once(producer):
                    # What every message of the batch shares, worked out once per batch.
                    batch = _Batch(self.app, producer, token, batched=publishing is not None)
                    batch.clusters = clusters
                    for dispatch in dispatches:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            break
                        try:
                            self._send(batch, dispatch, remaining)
                        except outage:
                            # Drop the connection without its closing handshake: a broker that
                            # stopped answering would hold each closing step for a read
                            # timeout. The pool connects anew next time.
                            producer.connection.collect()
                            raise
                        except Exception as exc:  # this message only: the batch goes on
                            result.rejected[dispatch.key] = _described(exc)
                        else:
                            pending.append(dispatch.key)
                        sent += 1
                        # As many as went before, up to FLUSH_EVERY: 1, 1, 2, 4, ... 100.
                        written = sent - len(pending)
                        if publishing is None or len(pending) >= min(FLUSH_EVERY,
                                                                     max(1, written)):
                            _flush(producer, publishing, pending, result, deadline)
                    _flush(producer, publishing, pending, result, deadline)
        except _OutOfTime:
            # What the publish batch held is dropped unwritten; it waits with the rest.
            logger.debug("submission ran out of time after %d of %d", sent, len(dispatches))
        except Exception as exc:  # the broker, unreachable or failing: the batch waits
            reason = _described(exc)
            logger.debug("submission stopped after %d of %d: %s", sent, len(dispatches), reason)
        # A batch that failed may have been written in part: its messages are sent again under
        # the same keys (at least once), as a publish whose reply was lost is.
        result.failed.update((key, reason) for key in pending)
        result.failed.update((d.key, reason) for d in dispatches[sent:])
        result.clusters.update((key, clusters[key]) for key in result.accepted if key in clusters)
        return result

    def _send(self, batch: _Batch, dispatch: Dispatch, remaining: float) -> None:
        execution = dispatch.execution
        options = self._without_reserved_headers(execution.schedule_name, dispatch.options)
        problems = [*call_problems(dispatch.args, dispatch.kwargs), *options_problems(options)]
        if problems:
            raise ConfigurationError(problems, subject="message")
        args, kwargs = _evaluated(self.lazy.get(execution.schedule_name, _NO_LAZY),
                                  list(dispatch.args), dict(dispatch.kwargs))
        own_headers = {
            HEADER_CELERY_BEAT: True,
            HEADER_SCHEDULE: execution.schedule_name,
            HEADER_OCCURRENCE: batch.iso(execution.occurrence_at),
            HEADER_TOKEN: batch.token,
            headers.SEND: execution.attempts,
        }
        if execution.manual:
            own_headers[HEADER_MANUAL] = True
        options["headers"] = {**(options.get("headers") or {}), **own_headers}
        if dispatch.rotate:
            # The rotation decides the queue, over any stored one (refused at the door).
            options["queue"] = batch.clusters[dispatch.key] = self._rotated_queue(dispatch)
        if execution.expires_at is not None:
            # The starting deadline, as an absolute instant; an expires of the schedule's own
            # (seconds from sending) still applies when it comes first.
            expires = execution.expires_at
            relative = options.pop("expires", None)
            if isinstance(relative, (int, float)):
                expires = min(expires, datetime.now(timezone.utc) + timedelta(seconds=relative))
            options["expires"] = expires
        entry = GoatbeatEntry(
            app=self.app, name=execution.schedule_name, task=dispatch.task, args=args,
            kwargs=kwargs, options=options,
            schedule=self.schedules.get(execution.schedule_name, dispatch.trigger),
            total_run_count=dispatch.total_runs, key=dispatch.key,
            occurrence_at=execution.occurrence_at, token=batch.token, manual=execution.manual)
        entry.own_headers = own_headers
        entry.call = {
            **batch.call,
            # A broker that stops answering without closing the connection (a frozen node, a
            # memory alarm) must not hold the publish, or the wait for its confirm, past the
            # time this batch has.
            "timeout": remaining,
            "confirm_timeout": remaining,
        }
        entry.batch = batch
        scheduler = self.scheduler
        with tracing.occurrence_span(execution, dispatch.task, batch.spans):
            try:
                if scheduler is not None:
                    scheduler.apply_entry(entry, producer=batch.producer)
                else:
                    publish_entry(self.app, entry, batch.producer)
            except Exception as exc:
                if entry.error is None and not entry.sent:
                    # Raised by code hooked around apply_entry, not by the publish: this
                    # message fails alone.
                    raise HookError(f"apply_entry raised {_described(exc)}") from exc
                if entry.error is None:
                    # The broker took the run: sending it again would run it twice.
                    logger.warning("occurrence %s was sent, then code hooked around "
                                   "apply_entry raised: %s", dispatch.key, _described(exc),
                                   extra={"action": "hook_failed"})
            # The publish's own error, which Celery's apply_entry logs and swallows: the
            # broker's stops the batch, any other fails this message.
            if entry.error is not None:
                raise entry.error
            if not entry.sent:
                raise HookError("apply_entry returned without calling apply_async: "
                                "the run was not sent")


    def _rotated_queue(self, dispatch: Dispatch) -> str:
        """The queue of a rotated schedule's occurrence: its owner's, or on a handover the
        next one somebody consumes (core.rules.rotation)."""
        if dispatch.rotation_index is None:
            raise ConfigurationError([Problem("rotate", "the occurrence's index on the trigger's "
                                              "grid could not be worked out")], subject="message")
        queues = dispatch.rotate
        placement = place(queues, dispatch.rotation_index, handover=dispatch.rotate_handover,
                          consumed=lambda queue: self.presence.consumed(queue, among=queues))
        if placement.handed_over:
            logger.info("occurrence %s handed from queue %s, which nobody consumes, to %s",
                        dispatch.key, placement.owner, placement.queue,
                        extra={"action": "rotation_handover"})
        return placement.queue

    def _without_reserved_headers(self, name: str, stored: Mapping[str, Any]
                                  ) -> dict[str, Any]:
        """A copy of a schedule's stored ``options`` without the headers only Celery and
        goatbeat set: a row written before they were refused must not rewrite the task or its
        id. Logged once per schedule."""
        options = dict(stored)
        given = options.get("headers")
        # None first: most schedules set no headers, and the ABC check costs more.
        if given is None or not isinstance(given, Mapping):
            return options
        options["headers"], dropped = without_reserved(given)
        if dropped and name not in self._dropped_from:
            self._dropped_from.add(name)
            logger.warning("schedule %s: its stored options.headers set %s, which only Celery "
                           "and goatbeat may set; sent without them. Remove them from the "
                           "schedule", quoted_name(name), ", ".join(map(repr, dropped)),
                           extra={"action": "reserved_headers_dropped", "schedule": name})
        return options


class HookError(GoatbeatError):
    """Code hooked around ``apply_entry`` (a monitoring tool, a Scheduler subclass) raised, or
    returned without sending: this message fails alone, as a message the broker refuses."""


def publish_entry(app: Any, entry: GoatbeatEntry, producer: Any,
                  send_task: Any = None) -> Any:
    """Send ``entry`` as Celery's ``Scheduler.apply_async`` does, with its key as the task id.

    A task this process knows goes through its own ``apply_async`` (a class that overrides it,
    to take a lock or add headers, keeps working, and its decorator's options apply); any other
    name through ``send_task``: the scheduler's own (a subclass's override is called, as
    Celery's beat calls it), the app's without a scheduler. ``entry.options`` as hooks left
    them are the message's options; goatbeat's own headers are set over whatever a hook put in
    their place. The publish's error is kept on the entry (Celery's ``apply_entry`` swallows
    it) and raised as Celery's ``SchedulingError``.
    """
    options = entry.options
    sent_headers = dict(options.get("headers") or {})
    sent_headers.update(entry.own_headers)
    # The key stays the task id whatever a hook wrote: a run sent again must be the same task.
    call = {**entry.call, **options, "task_id": entry.key, "headers": sent_headers}
    batch = getattr(entry, "batch", None)
    task = batch.task(entry.task) if batch is not None else app.tasks.get(entry.task)
    try:
        if task is not None:
            result = task.apply_async(entry.args, entry.kwargs, producer=producer, **call)
        else:
            result = (send_task or app.send_task)(entry.task, entry.args, entry.kwargs,
                                                  producer=producer, **call)
    except Exception as exc:
        entry.error = exc
        raise SchedulingError(f"Couldn't apply scheduled task {entry.name}: {exc}") from exc
    entry.sent = True
    return result


#: Messages written to the broker in one round trip where its transport batches publishes
#: (kombu's ``Producer.batch``: a Redis pipeline); each flush is also when they count as
#: accepted. Small enough that a failed flush leaves little to send again. A batch's first
#: flushes are smaller (1, 2, 4, ... messages: each flush holds as many as were sent before
#: it), so that its first messages do not wait for a hundred others.
FLUSH_EVERY = 100
#: The publish batch's own flush threshold, never reached: the submitter flushes by hand.
_NEVER_ON_ITS_OWN = 1 << 30
_NO_LAZY: Mapping[str, Any] = {}
_UNKNOWN = object()


class _Batch:
    """What the messages of one batch share: the producer and how to publish through it, the
    fencing token, and the tasks looked up so far."""

    __slots__ = ("app", "call", "clusters", "producer", "spans", "token", "_tasks", "_instant")

    def __init__(self, app: Any, producer: Any, token: int, *, batched: bool = False) -> None:
        self.app = app
        self.token = token
        self.producer = producer
        #: Whether each message's span is recorded (an SDK configured), asked once a batch.
        self.spans = tracing.recorded()
        self.call: dict[str, Any] = {
            # One quick retry rides out a dropped Redis connection; the socket timeouts set on
            # the beat process bound each attempt, so a dead broker fails fast and the claim
            # waits. On AMQP a retry reconnects, and a node that stopped answering would hold
            # that handshake for the connect timeout: the batch fails at once instead. In a
            # publish batch a publish writes nothing (its flush does, never retried by kombu):
            # a retry would only wrap each message, and its declare, in kombu's ensure, about
            # a tenth of the beat's CPU per message; the batch fails and is sent again instead.
            "retry": not batched and not _is_amqp(producer.connection),
            "retry_policy": RETRY_POLICY,
        }
        self._tasks: dict[str, Any] = {}
        self.clusters: dict[str, str] = {}
        self._instant: tuple[datetime, str] | None = None

    def iso(self, instant: datetime) -> str:
        """``instant.isoformat()``, worked out once for a run of equal instants in one zone:
        the messages of a batch are mostly occurrences of one instant."""
        last = self._instant
        if last is not None and last[0].tzinfo is instant.tzinfo and last[0] == instant:
            return last[1]
        text = instant.isoformat()
        self._instant = (instant, text)
        return text

    def task(self, name: str) -> Any:
        """The task registered under ``name`` (None: unknown here), looked up once a batch."""
        task = self._tasks.get(name, _UNKNOWN)
        if task is _UNKNOWN:
            task = self._tasks[name] = self.app.tasks.get(name)
        return task


def _evaluated(funcs: Mapping[str, Any], args: list[Any],
               kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Args and kwargs with each lazy placeholder replaced by its function's value now, as
    Celery's beat evaluates a BeatLazyFunc just before sending."""
    def value(where: str, given: Any) -> Any:
        if not (isinstance(given, dict) and set(given) == {LAZY_MARKER}):
            return given
        func = funcs.get(given[LAZY_MARKER])
        if func is None:
            raise ConfigurationError([Problem(where, "a lazy argument this replica's "
                                              "beat_schedule does not define")],
                                     subject="message")
        return func()
    return ([value(f"args.{i}", v) for i, v in enumerate(args)],
            {k: value(f"kwargs.{k}", v) for k, v in kwargs.items()})


def _publish_batch(producer: Any) -> Any:
    """The producer's publish batch where its transport buffers publishes (Redis, kombu 5.7 and
    later); elsewhere none (``nullcontext``), and each message is written as it is sent."""
    if not getattr(producer, "supports_batch_publish", False):
        return contextlib.nullcontext()
    # Flushed by hand every FLUSH_EVERY messages, never on its own: a message counts as
    # accepted only once the flush that wrote it returned.
    return producer.batch(max_size=_NEVER_ON_ITS_OWN)


@contextlib.contextmanager
def _declaring_once(producer: Any) -> Any:
    """While a batch is sent: a queue (or exchange) that kombu may cache as declared is passed
    to ``producer.maybe_declare`` once per channel, not once per message. kombu binds a copy of
    the entity to the channel before it finds the declaration cached, about a tenth of beat's
    CPU per message; it declares anew what it may not cache (an auto-delete queue), and after
    a reconnection (a new channel)."""
    declare = producer.maybe_declare
    seen: dict[tuple[int, int], Any] = {}

    def maybe_declare(entity: Any, retry: bool = False, **retry_policy: Any) -> Any:
        key = (id(entity), id(producer.channel))
        if key in seen:
            return False
        declared = declare(entity, retry, **retry_policy)
        if getattr(entity, "can_cache_declaration", False):
            seen[key] = entity  # kept: its id is not reused by another entity meanwhile
        return declared

    own = vars(producer).get("maybe_declare", _UNKNOWN)
    producer.maybe_declare = maybe_declare
    try:
        yield
    finally:  # as it was, for the pool's next user
        if own is _UNKNOWN:
            del producer.maybe_declare
        else:
            producer.maybe_declare = own


class _OutOfTime(Exception):
    """The batch's time ran out with messages still held in its publish batch."""


def _flush(producer: Any, publishing: Any, pending: list[str], result: SubmitResult,
           deadline: float) -> None:
    """Write what ``publishing`` holds; on success its messages are accepted (at once, with no
    publish batch: the broker already took them). Past ``deadline`` nothing is written: a
    leader frozen past its lease must not send, once it wakes, what it held before."""
    if publishing is not None and pending:
        if time.monotonic() >= deadline:
            raise _OutOfTime
        try:
            publishing.flush()
        except Exception:
            # A pipeline that failed may have lost its connection half-way: connect anew.
            producer.connection.collect()
            raise
    result.accepted.extend(pending)
    pending.clear()


def _is_amqp(connection: Any) -> bool:
    return getattr(getattr(connection, "transport", None), "driver_type", None) == "amqp"


def _outage_errors(connection: Any) -> tuple[type[BaseException], ...]:
    """The exceptions that mean the broker, not the message, failed. kombu's database
    transport (``sqla+…``) lists none of its own: a database error there is the broker's, and
    it leaves the channel's session unusable (a queue two processes declared at once broke
    every later publish), so the connection is dropped and the batch waits like any outage."""
    return (OSError, TimeoutError, KombuOperationalError, SQLAlchemyError,
            *connection.connection_errors, *connection.channel_errors)


def _described(exc: BaseException) -> str:
    if isinstance(exc, ConfigurationError):
        return "; ".join(exc.problems)
    if isinstance(exc, HookError):
        return str(exc)
    text = f"{type(exc).__name__}: {exc}"
    if exc.__cause__ is not None:
        # kombu's failed publish batch says only that delivery is uncertain; the broker's
        # own error is its cause.
        text += f" ({_described(exc.__cause__)})"
    return text
