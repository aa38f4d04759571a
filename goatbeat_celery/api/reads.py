"""Reading schedules: one by name, a page of them, their counts and their next runs."""

from __future__ import annotations

import builtins
from datetime import datetime

from goatbeat_celery.api.arguments import (
    _after_problems,
    _choice,
    _count_problem,
    _limit_problems,
    _schedule_name,
    _text_problems,
)
from goatbeat_celery.api.base import SchedulesBase
from goatbeat_celery.api.preconditions import _require_repair
from goatbeat_celery.core.rules.calendars import resolve
from goatbeat_celery.core.rules.controls import tag_filter_problems, upcoming_runs
from goatbeat_celery.core.rules.misfire import first_occurrence
from goatbeat_celery.core.rules.validation import shown_value
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.listing import RunOrderCursor, ScheduleCounts, ScheduleOrder
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSource


class ScheduleReads(SchedulesBase):
    """Reads of the stored schedules."""

    def now(self) -> datetime:
        """The database's clock (PostgreSQL's ``now()``; the injected clock of a SQLite or
        memory store): what the leader judges due, late and paused against, so what a face
        shows ages and countdowns from."""
        return self.store.now()

    def next_due_at(self) -> datetime | None:
        """The earliest next run of any enabled schedule (one due already included), as the
        leader reads it; None when no schedule has a next run."""
        return self.store.due_schedules(1).next_due_at

    def get(self, name: str) -> Schedule:
        return self.store.get_schedule(_schedule_name(name))

    def list(self, *, enabled: bool | None = None, source: ScheduleSource | str | None = None,
             prefix: str | None = None, limit: int | None = None,
             set_aside: bool | None = None, after: str | RunOrderCursor | None = None,
             order: ScheduleOrder | str = ScheduleOrder.NAME,
             tags: builtins.list[str] | tuple[str, ...] = ()) -> builtins.list[Schedule]:
        """Schedules by name, or by next run (``order="next_run"``, those with none last);
        ``after`` pages on from the last of the previous page: its name, or by next run a
        :class:`RunOrderCursor` of its next run and name; ``tags``: only those carrying every
        one of them; ``enabled``: only those not paused (True) or paused (False), a pause with
        an end included. A bad argument raises ConfigurationError naming it and what it
        takes."""
        problems: builtins.list[Problem] = []
        wanted = None if source is None else _choice(ScheduleSource, source, "source",
                                                     "source", problems)
        chosen = _choice(ScheduleOrder, order, "order", "order", problems)
        for label, flag in (("enabled", enabled), ("set_aside", set_aside)):
            if flag is not None and not isinstance(flag, bool):
                problems.append(Problem(label, "expected true, false or None, got "
                                        f"{shown_value(flag)}"))
        if isinstance(tags, str):
            tags = (tags,)  # one tag given bare is still one tag, not its characters
        problems.extend(_text_problems(prefix, "prefix"))
        problems.extend(_limit_problems(limit, optional=True))
        problems.extend(tag_filter_problems(tags))
        problems.extend(_after_problems(after, chosen))
        if problems:
            raise ConfigurationError(problems, subject="list arguments")
        assert chosen is not None
        return self.store.list_schedules(paused=None if enabled is None else not enabled,
                                         source=wanted, prefix=prefix,
                                         limit=limit, set_aside=set_aside, after=after,
                                         order=chosen, tags=tuple(tags))

    def counts(self) -> ScheduleCounts:
        """How many schedules there are, in all, paused, set aside and by source."""
        return self.store.count_schedules()

    def next_runs(self, name: str, count: int = 5) -> builtins.list[datetime]:
        """The instants (UTC) the schedule's next ``count`` runs are due, as the leader will
        send them when on time: after its offset or jitter, within ``start_at``, ``end_at``
        and a pause with an end, no more than the runs ``max_runs`` leaves, none on a date its
        calendars exclude. Empty for a paused
        or ended schedule. A fixed-delay schedule's are estimates: each run is taken to end at
        once."""
        problem = _count_problem(count)
        if problem is not None:
            raise ConfigurationError([problem])
        schedule = self.store.get_schedule(_schedule_name(name))
        _require_repair(schedule, set())
        spec = schedule.spec
        trigger = self.triggers.build(spec.trigger)
        offset = spec.effective_offset()
        exclusions = (resolve(spec, self.store.find_calendars(spec.calendars))
                      if spec.calendars else None)
        return upcoming_runs(schedule, lambda instant: first_occurrence(trigger, instant, offset),
                             count, delay=spec.delay(), exclusions=exclusions)
