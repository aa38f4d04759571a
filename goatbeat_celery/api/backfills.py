"""Backfills: running the occurrences of a past range, previewing them, listing and cancelling
the stored requests."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Literal, overload

from goatbeat_celery.api.arguments import (
    _backfill_id,
    _check_reason,
    _limit_problems,
    _schedule_name,
    _text_problems,
)
from goatbeat_celery.api.base import SchedulesBase
from goatbeat_celery.api.preconditions import _require_repair
from goatbeat_celery.core.rules.audit import audit_value, reason_problems
from goatbeat_celery.core.rules.backfill import (
    MAX_BACKFILL_OCCURRENCES,
    Backfill,
    BackfillMode,
    BackfillPreview,
    BackfillRequest,
    NextAfter,
    choose_runs,
    count_occurrences,
    occurrences_between,
    request_problems,
)
from goatbeat_celery.core.rules.validation import shown_value
from goatbeat_celery.core.types.audit import AuditAction
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.instants import ensure_aware
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.spec import quoted_name


class BackfillMethods(SchedulesBase):
    """Backfills of a schedule's past occurrences."""

    @overload
    def backfill(self, name: str, start: datetime, end: datetime, *,
                 mode: BackfillMode | str = ..., newest_first: bool = ...,
                 per_tick: int | None = ..., dry_run: Literal[False] = ...,
                 reason: str | None = ...) -> Backfill: ...

    @overload
    def backfill(self, name: str, start: datetime, end: datetime, *,
                 mode: BackfillMode | str = ..., newest_first: bool = ...,
                 per_tick: int | None = ..., dry_run: Literal[True],
                 reason: str | None = ...) -> BackfillPreview: ...

    def backfill(self, name: str, start: datetime, end: datetime, *,
                 mode: BackfillMode | str = BackfillMode.MISSING, newest_first: bool = False,
                 per_tick: int | None = None, dry_run: bool = False,
                 reason: str | None = None) -> Backfill | BackfillPreview:
        """Run the occurrences of ``name`` in ``[start, end]`` (aware instants, ``end`` not in
        the future) that ``mode`` selects, without moving its next run: ``missing`` (no
        execution), ``failed`` (failed, lost, expired or abandoned) or ``all``. The leader
        drains the stored request ``per_tick`` occurrences a tick (None: the
        ``goatbeat_backfill_per_tick`` setting), oldest first unless ``newest_first``, after
        the live schedules. ``dry_run`` stores nothing and returns what would run."""
        problems: list[Problem] = []
        chosen = BackfillMode.read(mode, "mode", problems) or BackfillMode.MISSING
        request = BackfillRequest(schedule_name=name, start=start, end=end, mode=chosen,
                                  newest_first=newest_first, per_tick=per_tick)
        problems.extend(request_problems(replace(request, mode=chosen), self.store.now()))
        problems.extend(reason_problems(reason))
        if problems:
            raise ConfigurationError(problems, subject="backfill")
        schedule = self.store.get_schedule(_schedule_name(name))
        _require_repair(schedule, set())
        self._check_task(schedule.spec)
        start, end = ensure_aware(start, "start"), ensure_aware(end, "end")
        trigger = self.triggers.build(schedule.spec.trigger)
        total = count_occurrences(trigger.next_after, start, end)
        if total > MAX_BACKFILL_OCCURRENCES:
            raise ConfigurationError([Problem(
                "range", f"more than {MAX_BACKFILL_OCCURRENCES} occurrences of "
                f"{quoted_name(name)} between {start.isoformat()} and {end.isoformat()}",
                "split it into shorter ranges")], subject="backfill")
        request = replace(request, start=start, end=end, total=total)
        if not dry_run:
            return self.store.create_backfill(request, audit=self._note(
                AuditAction.BACKFILL, reason,
                {key: (None, audit_value(value)) for key, value in (
                    ("start", start), ("end", end), ("mode", chosen),
                    ("newest_first", newest_first), ("per_tick", per_tick),
                    ("total", total))}))
        return self._backfill_preview(request, trigger.next_after)

    def _backfill_preview(self, request: BackfillRequest,
                          next_after: NextAfter) -> BackfillPreview:
        points = occurrences_between(next_after, request.start, request.end, request.total)
        if request.newest_first:
            points.reverse()
        draft = Backfill(id=0, schedule_name=request.schedule_name, start=request.start,
                         end=request.end, mode=request.mode, total=request.total)
        runs = []
        for at in range(0, len(points), 500):
            chunk = points[at:at + 500]
            existing = self.store.occurrence_executions(request.schedule_name, min(chunk),
                                                        max(chunk))
            runs.extend(choose_runs(draft, chunk, existing, backfill_id="new"))
        return BackfillPreview(schedule_name=request.schedule_name, start=request.start,
                               end=request.end, mode=request.mode,
                               newest_first=request.newest_first, total=request.total,
                               runs=tuple(runs))

    def backfills(self, *, name: str | None = None, active: bool | None = None,
                  limit: int = 100) -> list[Backfill]:
        """Backfills, newest first: of one schedule, only active or only finished ones; at most
        ``limit`` (1 to :data:`~goatbeat_celery.core.rules.validation.MAX_LIMIT`)."""
        problems = [*_text_problems(name, "name"), *_limit_problems(limit)]
        if active is not None and not isinstance(active, bool):
            problems.append(Problem("active",
                                    f"expected true, false or None, got {shown_value(active)}"))
        if problems:
            raise ConfigurationError(problems, subject="backfills arguments")
        return self.store.list_backfills(schedule_name=name, active=active, limit=limit)

    def get_backfill(self, backfill_id: int) -> Backfill:
        """One backfill and its progress. Raises BackfillNotFound."""
        return self.store.get_backfill(_backfill_id(backfill_id))

    def cancel_backfill(self, backfill_id: int, *, reason: str | None = None) -> Backfill:
        """Stop a backfill: nothing more is claimed for it; what it claimed already is sent."""
        _check_reason(reason, f"backfill {backfill_id}")
        return self.store.cancel_backfill(_backfill_id(backfill_id), audit=self._note(
            AuditAction.CANCEL_BACKFILL, reason,
            {"backfill": (backfill_id, backfill_id), "state": ("active", "cancelled")}))
