"""What a config sync would change now, read without changing anything."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from goatbeat_celery.api.base import SchedulesBase
from goatbeat_celery.core.rules.audit import sync_notes
from goatbeat_celery.core.rules.sync import plan_config_sync, stored_summary
from goatbeat_celery.core.types.audit import AuditNote
from goatbeat_celery.core.types.spec import ScheduleSource, ScheduleSpec, SyncEntry


@dataclass(frozen=True, kw_only=True)
class ConfigPlan:
    """What a config sync would do now (:meth:`Schedules.config_plan`): the change it would
    make to each schedule, as its audit entry would record it (action ``create``, ``edit``,
    ``disable`` or ``delete``, and the fields before and after), the entries it would leave
    unchanged, and those it would leave alone because a schedule of that name was created
    through the API."""

    changes: tuple[tuple[str, AuditNote], ...]
    unchanged: tuple[str, ...]
    conflicts: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"changes": [{"name": name, "action": note.action.value, "reason": note.reason,
                             "changes": {key: [before, after]
                                         for key, (before, after) in note.changes.items()}}
                            for name, note in self.changes],
                "unchanged": list(self.unchanged), "conflicts": list(self.conflicts)}


class ConfigPlans(SchedulesBase):
    """The plan of a config sync."""

    def config_plan(self, specs: Sequence[ScheduleSpec]) -> ConfigPlan:
        """What a config sync of ``specs`` (an app's ``beat_schedule``, as
        :func:`goatbeat_celery.config.synced_schedules` reads it) would change in the database
        now, with this app's pruning settings; decided by the rule config sync applies
        (:func:`~goatbeat_celery.core.rules.sync.plan_config_sync`). Reads only."""
        now = self.store.now()
        wanted = {spec.name for spec in specs}
        stored = {schedule.name: schedule for schedule in self.store.list_schedules()
                  if schedule.name in wanted or schedule.spec.source is ScheduleSource.CONFIG}
        settings = self.config.settings
        plan = plan_config_sync(
            {name: stored_summary(schedule) for name, schedule in stored.items()},
            [SyncEntry(spec=spec, next_occurrence_at=None, next_run_at=None) for spec in specs],
            prune_before=now - settings.config_prune_grace if settings.config_prune else None)
        notes = sync_notes(plan, {name: schedule.spec for name, schedule in stored.items()})
        return ConfigPlan(changes=tuple(notes), unchanged=plan.report.unchanged,
                          conflicts=plan.report.conflicts)
