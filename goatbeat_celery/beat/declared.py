"""The config schedules of one replica, as Celery's scheduler API declares them.

They start as ``beat_schedule`` with the entries Celery's scheduler adds by default; ``add``,
``update_from_dict``, ``merge_inplace`` and ``scheduler.schedule[name] = entry`` change them
(``merge_inplace`` and assigning ``scheduler.schedule`` replace them all, the others add or
replace by name). Each entry is read as a ``beat_schedule`` entry is
(:func:`goatbeat_celery.config.read_entries`): every entry a call gives first, every problem
reported at once, and nothing changed when there is one.

What is declared is the replica's config: the leader syncs it as it syncs ``beat_schedule``
(:mod:`goatbeat_celery.core.rules.sync`), so a declared entry is claimed and sent with the same
fencing and keys, and one no longer declared is disabled as a removed config entry is. Every
replica that runs the same code declares the same schedules.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from celery import beat

from goatbeat_celery import celery_schedules
from goatbeat_celery import config as config_module
from goatbeat_celery.core.rules.triggers import TriggerRegistry
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.spec import ScheduleSpec

logger = logging.getLogger(__name__)

#: What Celery's ``ScheduleEntry`` takes besides an entry's definition: the run state, which
#: goatbeat keeps in its store.
RUN_STATE = ("name", "app", "last_run_at", "total_run_count")

#: Called with the specs and trigger registry of what is declared, after each change.
OnChange = Callable[[tuple[ScheduleSpec, ...], TriggerRegistry], None]


def entry_fields(entry: Any) -> dict[str, Any]:
    """A Celery ``ScheduleEntry`` (or an entry's dict) as a ``beat_schedule`` entry's dict."""
    if isinstance(entry, beat.ScheduleEntry):
        return {"task": entry.task, "schedule": entry.schedule, "args": entry.args,
                "kwargs": entry.kwargs, "options": entry.options}
    if isinstance(entry, Mapping):
        return {key: value for key, value in entry.items() if key not in RUN_STATE}
    return entry  # type: ignore[no-any-return]  # read_entries names what it is


class DeclaredSchedule:
    """The entries declared, by name: their ``beat_schedule``-shaped dicts and specs."""

    def __init__(self, app: Any, loaded: config_module.LoadedConfig) -> None:
        self.app = app
        self.zone = config_module.default_timezone(app)
        beat_schedule = dict(app.conf.beat_schedule or {})
        specs = config_module.synced_schedules(app, loaded)
        defaults = config_module.default_entries(app, {spec.name for spec in loaded.schedules})
        #: The entries' dicts as given (schedule objects, lazy arguments and all).
        self.entries: dict[str, Any] = {
            str(name): entry for name, entry in {**beat_schedule, **defaults}.items()}
        self.specs: dict[str, ScheduleSpec] = {spec.name: spec for spec in specs}
        self.objects: dict[str, Any] = dict(loaded.objects)
        #: Lazy arguments by entry name; the submitter reads this very dict.
        self.lazy: dict[str, Mapping[str, Any]] = dict(loaded.lazy)
        self.triggers = loaded.triggers
        self._on_change: OnChange | None = None
        self._lock = threading.Lock()

    def watch(self, on_change: OnChange) -> None:
        """Call ``on_change`` after every change from now on."""
        self._on_change = on_change

    def declare(self, given: Mapping[Any, Any], *, replace: bool = False) -> None:
        """Add or replace the entries ``given`` (all of them, or none: raises
        ConfigurationError naming every problem); with ``replace``, they become the only ones."""
        fields = {str(name): entry_fields(entry) for name, entry in given.items()}
        with self._lock:
            kept = {} if replace else {name: obj for name, obj in self.objects.items()
                                       if name not in fields}
            problems: list[Problem] = []
            read = config_module.read_entries(fields, self.zone, problems, kept)
            if problems:
                raise ConfigurationError(problems, subject="schedule entries")
            if replace:
                for table in (self.entries, self.specs, self.lazy):
                    table.clear()
            for name in fields:
                self.lazy.pop(name, None)
            self.entries.update(fields)
            self.specs.update((spec.name, spec) for spec in read.specs)
            self.lazy.update(read.lazy)
            self.objects = {**kept, **read.objects}
            self._changed()

    def remove(self, name: str) -> None:
        """Declare ``name`` no more; raises KeyError when it is not declared."""
        with self._lock:
            del self.entries[name]
            self.specs.pop(name, None)
            self.lazy.pop(name, None)
            self.objects.pop(name, None)
            self._changed()

    def _changed(self) -> None:
        self.triggers = celery_schedules.register(config_module.base_registry(), self.objects)
        if self._on_change is not None:
            self._on_change(tuple(self.specs.values()), self.triggers)
        logger.info("goatbeat: %d config schedules declared", len(self.specs),
                    extra={"action": "config_declared"})
