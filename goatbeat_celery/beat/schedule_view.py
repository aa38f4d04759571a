"""``scheduler.schedule``: every schedule a replica would send, as Celery's ``ScheduleEntry``.

Read, it holds the config entries the replica declares (``beat_schedule``, Celery's default
entries, and what ``add`` and the rest declared since: :mod:`goatbeat_celery.beat.declared`)
and the enabled schedules made through the API, CLI or a face, each an entry of the scheduler's
``Entry`` class with its ``last_run_at`` (the last occurrence claimed, or now if none was, as
Celery's) and ``total_run_count`` from the store. Written (``schedule[name] = entry``,
``del schedule[name]``, ``update``), it declares config entries.

The store is read when the view is read after a change or a sync (Celery's ``sync_every``,
3 minutes by default), never by the scheduling loop: one listing of the schedules table, whose
cost grows with the number of schedules; a beat nobody reads the view of never pays it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from goatbeat_celery.beat.declared import DeclaredSchedule
from goatbeat_celery.beat.entries import celery_schedule
from goatbeat_celery.core.protocols import ScheduleReads
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSource


class ScheduleView(dict[str, Any]):
    """The entries by name, a ``dict`` as Celery's own schedule is: read through
    :meth:`current` (the scheduler's ``schedule``); every write declares (see the module's
    docstring) and is seen in the dict at once."""

    def __init__(self, scheduler: Any, declared: DeclaredSchedule) -> None:
        super().__init__()
        self.scheduler = scheduler
        self.declared = declared
        self._fresh = False
        self._lock = threading.Lock()

    def stale(self) -> None:
        """Read the store again at the next :meth:`current` (after a sync)."""
        self._fresh = False

    def current(self) -> ScheduleView:
        """This view, read again first if a sync made it stale."""
        with self._lock:
            if not self._fresh:
                entries = self._read()
                super().clear()
                super().update(entries)
                self._fresh = True
        return self

    def _read(self) -> dict[str, Any]:
        engine = getattr(self.scheduler, "engine", None)
        store: ScheduleReads | None = None if engine is None else engine.store
        stored = {} if store is None else {row.name: row for row in store.list_schedules()}
        entries = {name: self.entry(name, fields, _run_state(stored.get(name)))
                   for name, fields in list(self.declared.entries.items())}
        app = self.scheduler.app
        for name, row in stored.items():
            spec = row.spec
            if spec.source is not ScheduleSource.API:
                continue
            # Config sync leaves a schedule made through the API alone, whatever is declared
            # under its name: that row is what is sent, if anything is.
            entries.pop(name, None)
            if not spec.enabled:
                continue
            entries[name] = self.scheduler.Entry(
                name=name, app=app, task=spec.task,
                schedule=_schedule_of(row, app), args=tuple(spec.args),
                kwargs=dict(spec.kwargs), options=dict(spec.options), **_run_state(row))
        return entries

    def entry(self, name: str, fields: Mapping[str, Any],
              run: Mapping[str, Any] | None = None) -> Any:
        """The scheduler's ``Entry`` for a declared entry's ``fields``, with the run state
        ``run`` (``last_run_at``, ``total_run_count``) if given."""
        return self.scheduler.Entry(
            name=name, app=self.scheduler.app, task=fields.get("task"),
            schedule=fields.get("schedule"), args=fields.get("args") or (),
            kwargs=fields.get("kwargs"), options=fields.get("options"),
            relative=bool(fields.get("relative")), **(run or {}))

    # -- writing: declares config entries ------------------------------------------------
    def declare(self, given: Mapping[Any, Any], *, replace: bool = False) -> None:
        """Declare the entries ``given`` (all or none; with ``replace``, in place of all the
        others) and show them here."""
        self.declared.declare(given, replace=replace)
        with self._lock:
            if replace:
                self._fresh = False
            for name in map(str, given):
                old = super().get(name)
                run = {} if old is None else {"last_run_at": old.last_run_at,
                                              "total_run_count": old.total_run_count}
                super().__setitem__(name, self.entry(name, self.declared.entries[name], run))

    def __setitem__(self, name: str, entry: Any) -> None:
        self.declare({name: entry})

    def update(self, other: Any = (), /, **more: Any) -> None:
        self.declare(dict(other, **more))

    def __ior__(self, other: Any) -> ScheduleView:  # type: ignore[override,misc]
        self.update(other)
        return self

    def setdefault(self, name: str, default: Any = None) -> Any:
        if name not in self:
            self[name] = default
        return self[name]

    def __delitem__(self, name: str) -> None:
        if name not in self.declared.entries:
            raise KeyError(f"{name!r} is not a config entry of this beat; a schedule made "
                           "through the API is deleted there")
        self.declared.remove(name)
        with self._lock:
            super().pop(name, None)

    def pop(self, name: str, *default: Any) -> Any:
        if name not in self.declared.entries and default:
            return default[0]
        entry = self[name] if name in self else None
        del self[name]
        return entry

    def popitem(self) -> tuple[str, Any]:
        for name in self.declared.entries:
            return name, self.pop(name)
        raise KeyError("popitem(): no config entry declared")

    def clear(self) -> None:
        self.declare({}, replace=True)


def _run_state(row: Schedule | None) -> dict[str, Any]:
    if row is None:
        return {}
    return {"last_run_at": row.last_occurrence_at, "total_run_count": row.total_runs}


def _schedule_of(row: Schedule, app: Any) -> Any:
    """The Celery schedule object of a stored row's trigger (None for a trigger of a kind only
    a config entry's object can say)."""
    try:
        return celery_schedule(row.spec.trigger.to_json(), app)
    except Exception:  # noqa: BLE001 - a trigger edited by hand: the entry has no schedule
        return None

