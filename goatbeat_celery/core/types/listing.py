"""How schedules are listed: their order, the cursor a page ends on, and their counts."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.status import State


class ScheduleOrder(str, enum.Enum):
    """How a list of schedules is sorted."""

    NAME = "name"
    #: ``(next_run_at, name)``, those with no next run last.
    NEXT_RUN = "next_run"


@dataclass(frozen=True, kw_only=True)
class RunOrderCursor:
    """Where a page of schedules listed by next run ended: the next page starts after it."""

    next_run_at: datetime | None
    name: str


def list_order(order: ScheduleOrder, after: str | RunOrderCursor | None) -> ScheduleOrder:
    """``order``, checked against the kind of ``after`` it pages on from."""
    order = ScheduleOrder(order)
    wanted = RunOrderCursor if order is ScheduleOrder.NEXT_RUN else str
    if after is not None and not isinstance(after, wanted):
        raise TypeError(f"after: schedules listed by {order.value} page on from a "
                        f"{wanted.__name__}, got {type(after).__name__}")
    return order


def run_order_key(next_run_at: datetime | None, name: str) -> tuple[bool, datetime, str]:
    """The sort key of :attr:`ScheduleOrder.NEXT_RUN`: by next run, those with none last."""
    return (next_run_at is None, next_run_at or datetime.min.replace(tzinfo=UTC), name)


@dataclass(frozen=True, kw_only=True)
class ScheduleCounts:
    """How many schedules there are, in all and by state and source."""

    total: int
    paused: int
    set_aside: int
    config: int
    api: int
    #: How many are in each :class:`~goatbeat_celery.core.types.status.State` at the store's
    #: clock (every state present, 0 when none): a row unreadable as stored counts by its
    #: columns until the leader sets it aside.
    by_state: Mapping[State, int] = field(default_factory=dict)
