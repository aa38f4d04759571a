"""Where a schedule's messages go and what the broker says of those queues: the queue Celery
routes a task to, and each queue's depth (messages waiting) and consumer count.

What a broker cannot tell is said to be unknown, never guessed: AMQP answers both a queue's
depth and its consumers; Redis and the other virtual transports keep messages in lists or
tables whose length is the depth, and know nothing of consumers; the in-memory transport lives
in each process, so the dashboard's tells nothing of the workers'.

Every function here talks to the broker synchronously: call it in the thread pool.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kombu.transport.virtual import Transport as VirtualTransport

logger = logging.getLogger(__name__)

#: Seconds to wait for the broker's connection before saying it cannot be reached.
CONNECT_TIMEOUT = 2.0


@dataclass(frozen=True)
class Route:
    """Where Celery sends a task's message: its queue, and the exchange and routing key the
    message's options set (None: the queue's own)."""

    queue: str
    exchange: str | None = None
    routing_key: str | None = None

    @property
    def by_binding(self) -> bool:
        """Whether an exchange or routing key of the options' own decides where the message
        lands (the broker's bindings, not the queue named)."""
        return self.exchange is not None or self.routing_key is not None


@dataclass(frozen=True)
class QueueState:
    """One queue as the broker describes it. ``depth``: messages waiting (None: unknown);
    ``consumers``: consumers attached (None: this broker does not say); ``note``: why
    something is unknown, or what the broker answered instead."""

    name: str
    depth: int | None
    consumers: int | None
    note: str | None = None


@dataclass(frozen=True)
class BrokerReport:
    """What the broker said of the queues asked about: its transport's name, each queue's
    state, and the reason none could be read (None when it answered)."""

    transport: str
    queues: list[QueueState]
    problem: str | None = None

    def of(self, name: str) -> QueueState | None:
        return next((queue for queue in self.queues if queue.name == name), None)


def route_of(app: Any, task: str, options: Mapping[str, Any]) -> Route:
    """The route Celery gives a message of ``task`` sent with ``options`` (a schedule's): its
    options' ``queue``, else the app's ``task_routes``, else the default queue."""
    exchange = _text(options.get("exchange"))
    routing_key = _text(options.get("routing_key"))
    queue: Any = options.get("queue")
    routed = {key: value for key, value in options.items()
              if key in ("queue", "exchange", "routing_key") and isinstance(value, str)}
    try:
        queue = app.amqp.router.route(routed, task).get("queue", queue)
    # A route Celery cannot expand is still shown by the name the options give.
    except Exception:  # noqa: BLE001
        logger.debug("routing %s failed", task, exc_info=True, extra={"action": "route"})
    name = getattr(queue, "name", queue)
    if not isinstance(name, str) or not name:
        name = str(app.conf.task_default_queue)
    return Route(queue=name, exchange=exchange, routing_key=routing_key)


def known_queues(app: Any, tasks_and_options: Iterable[tuple[str, Mapping[str, Any]]],
                 consumed: Iterable[str] = ()) -> list[str]:
    """The queues the app routes to: those it declares (``task_queues``, the default queue),
    those its schedules' tasks are routed to, and those workers say they consume; sorted."""
    names = set(app.amqp.queues)
    names.update(route_of(app, task, options).queue for task, options in tasks_and_options)
    names.update(consumed)
    return sorted(names)


def read_queues(app: Any, names: Iterable[str]) -> BrokerReport:
    """The broker's word on each queue of ``names``: a passive declare on a channel of its
    own (a queue the broker does not hold closes the channel it was asked on)."""
    names = list(names)
    try:
        with app.connection_for_read() as connection:
            connection.ensure_connection(max_retries=1, timeout=CONNECT_TIMEOUT)
            transport = str(connection.transport.driver_type)
            if transport == "memory":
                return BrokerReport(transport, [QueueState(
                    name, None, None, "the memory transport lives inside each process: the "
                    "dashboard cannot see the workers' queues") for name in names])
            virtual = isinstance(connection.transport, VirtualTransport)
            return BrokerReport(transport, [_declare(connection, name, virtual)
                                            for name in names])
    # The broker may be anything, down or refusing: the page says so instead of failing.
    except Exception as exc:  # noqa: BLE001
        logger.warning("reading the broker's queues failed: %s", exc,
                       extra={"action": "read_queues"})
        return BrokerReport("?", [], f"the broker could not be read ({type(exc).__name__}: "
                                     f"{exc})")


def _declare(connection: Any, name: str, virtual: bool) -> QueueState:
    unknown = None if not virtual else (
        f"the {connection.transport.driver_type} transport does not report consumers")
    channel = connection.channel()
    try:
        _, depth, consumers = channel.queue_declare(queue=name, passive=True)
    except connection.channel_errors as exc:
        if virtual:
            # A virtual transport drops an emptied queue's list: not found is empty.
            return QueueState(name, 0, None, unknown)
        return QueueState(name, None, None, f"the broker holds no such queue ({exc})")
    finally:
        try:
            channel.close()
        except Exception:  # noqa: BLE001  # already closed by the broker's refusal
            pass
    return QueueState(name, int(depth), None if virtual else int(consumers), unknown)


def _text(value: object) -> str | None:
    if isinstance(value, str) and value:
        return value
    name = getattr(value, "name", None)
    return name if isinstance(name, str) and name else None
