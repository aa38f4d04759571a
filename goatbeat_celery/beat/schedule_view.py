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
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

from goatbeat_celery.beat.declared import DeclaredSchedule
from goatbeat_celery.beat.entries import celery_schedule
from goatbeat_celery.core.protocols import ScheduleStore
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSource


class ScheduleView(MutableMapping[str, Any]):
    """The entries by name; see the module's docstring."""

    def __init__(self, scheduler: Any, declared: DeclaredSchedule) -> None:
        self.scheduler = scheduler
        self.declared = declared
        self._entries: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def stale(self) -> None:
        """Read the store again at the next read (after a sync, or a change)."""
        self._entries = None

    # -- reading -------------------------------------------------------------------------
    def __getitem__(self, name: str) -> Any:
        return self._current()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._current()))

    def __len__(self) -> int:
        return len(self._current())

    def __repr__(self) -> str:
        return f"<schedule of {len(self)} entries: {sorted(self)!r}>"

    def _current(self) -> dict[str, Any]:
        with self._lock:
            entries = self._entries
            if entries is None:
                entries = self._entries = self._read()
            return entries

    def _read(self) -> dict[str, Any]:
        engine = getattr(self.scheduler, "engine", None)
        store: ScheduleStore | None = None if engine is None else engine.store
        stored = {} if store is None else {row.name: row for row in store.list_schedules()}
        entries = {name: self.entry(name, fields, stored.get(name))
                   for name, fields in list(self.declared.entries.items())}
        app = self.scheduler.app
        for name, row in stored.items():
            spec = row.spec
            if name in entries or spec.source is not ScheduleSource.API or not spec.enabled:
                continue
            entries[name] = self.scheduler.Entry(
                name=name, app=app, task=spec.task,
                schedule=_schedule_of(row, app), args=tuple(spec.args),
                kwargs=dict(spec.kwargs), options=dict(spec.options), **_run_state(row))
        return entries

    def entry(self, name: str, fields: Mapping[str, Any], row: Schedule | None = None) -> Any:
        """The scheduler's ``Entry`` for a declared entry's ``fields`` (the run state of
        ``row``, the stored schedule of that name, if given)."""
        return self.scheduler.Entry(
            name=name, app=self.scheduler.app, task=fields.get("task"),
            schedule=fields.get("schedule"), args=fields.get("args") or (),
            kwargs=fields.get("kwargs"), options=fields.get("options"),
            relative=bool(fields.get("relative")), **_run_state(row))

    # -- writing: declares config entries ------------------------------------------------
    def __setitem__(self, name: str, entry: Any) -> None:
        self.update({name: entry})

    def __delitem__(self, name: str) -> None:
        if name not in self.declared.entries:
            raise KeyError(f"{name!r} is not a config entry of this beat; a schedule made "
                           "through the API is deleted there")
        self.declared.remove(name)

    def update(self, other: Any = (), /, **more: Any) -> None:
        """Declare every entry given at once: all of them, or none (see
        :meth:`DeclaredSchedule.declare`)."""
        given = dict(other, **more)
        self.declared.declare(given)


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

