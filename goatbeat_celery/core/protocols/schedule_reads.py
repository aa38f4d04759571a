"""Schedules as they are read: one, a page of them, how many."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from goatbeat_celery.core.types.listing import RunOrderCursor, ScheduleCounts, ScheduleOrder
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSource


class ScheduleReads(Protocol):
    """Reading schedules: one by name, a filtered page, the counts."""

    def get_schedule(self, name: str) -> Schedule:
        """The schedule named ``name``. Raises ScheduleNotFound.

        Reading never fails on what a row holds: a column that cannot be read as stored (JSON
        or numbers edited by hand) is replaced by a harmless stand-in and named in
        ``Schedule.damage``, so such a row can still be listed, shown and deleted."""
        ...

    def list_schedules(
        self, *, paused: bool | None = None, source: ScheduleSource | None = None,
        prefix: str | None = None, limit: int | None = None, set_aside: bool | None = None,
        after: str | RunOrderCursor | None = None, order: ScheduleOrder = ScheduleOrder.NAME,
        tags: Sequence[str] = (),
    ) -> list[Schedule]:
        """Schedules filtered as asked (``paused``: those paused at the store's clock, disabled
        or within a pause with an end, :meth:`Schedule.paused_at`, or those not; ``set_aside``:
        those with a fault recorded, or without; ``tags``: those carrying every one of them,
        :func:`~goatbeat_celery.core.rules.controls.has_tags`) in ``order``. ``after`` pages on: a
        name with :attr:`ScheduleOrder.NAME`, a :class:`RunOrderCursor` with
        :attr:`ScheduleOrder.NEXT_RUN` (either other way round is a ``TypeError``). Cost grows
        with ``limit`` and what the filters skip, not with the rows before ``after``; with
        ``tags``, not with the schedules carrying none of them (a tag index, kept in step with
        every write of a schedule's tags, finds those carrying them). Rows are read as
        :meth:`get_schedule` reads them."""
        ...

    def count_schedules(self) -> ScheduleCounts:
        """How many schedules there are, in all, paused, set aside and by source, in one
        read."""
        ...
