"""What every part of :class:`~goatbeat_celery.api.Schedules` shares: the store, the app's
settings and triggers, the actor, and the building of a checked spec and its first run."""

from __future__ import annotations

import getpass
from datetime import datetime
from typing import Any

from goatbeat_celery import config as config_module
from goatbeat_celery import spec_input
from goatbeat_celery.core.protocols import ScheduleStore
from goatbeat_celery.core.rules.allowlist import sending_problems
from goatbeat_celery.core.rules.audit import actor_problems
from goatbeat_celery.core.rules.controls import bounded_first, past_once_problem
from goatbeat_celery.core.rules.misfire import first_occurrence
from goatbeat_celery.core.rules.triggers import TriggerRegistry
from goatbeat_celery.core.rules.validation import calendars_problems
from goatbeat_celery.core.types.audit import AuditAction, AuditNote, FieldChange
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.problems import Problem, listed
from goatbeat_celery.core.types.spec import ScheduleSource, ScheduleSpec, TriggerSpec, quoted_name
from goatbeat_celery.tasknames import TaskSignatures


class SchedulesBase:
    """The state of :class:`~goatbeat_celery.api.Schedules` and the helpers its parts share
    (its constructor's arguments are described there)."""

    def __init__(self, store: ScheduleStore, *,
                 config: config_module.GoatbeatConfig | None = None,
                 triggers: TriggerRegistry | None = None, default_timezone: str = "UTC",
                 actor: str | None = None, signatures: TaskSignatures | None = None) -> None:
        self.store = store
        self.signatures = signatures
        self.config = config or config_module.GoatbeatConfig()
        self.triggers = triggers or config_module.base_registry()
        self.default_timezone = default_timezone
        actor = os_actor() if actor is None else actor
        problems = actor_problems(actor)
        if problems:
            raise ConfigurationError(problems, subject="actor")
        self.actor = actor

    def _note(self, action: AuditAction, reason: str | None,
              changes: dict[str, FieldChange] | None = None) -> AuditNote:
        return AuditNote(action=action, actor=self.actor, reason=reason,
                         changes=changes or {})

    def close(self) -> None:
        self.store.close()

    def _first(self, spec: ScheduleSpec, paused_until: datetime | None = None, *,
               runs: int = 0, now: datetime | None = None,
               ) -> tuple[datetime | None, datetime | None]:
        """Where ``spec`` starts from ``now`` (the store's clock read at the start of the
        write; read here when not given): within its bounds, after a pause until
        ``paused_until``, and nowhere once its ``max_runs`` are used up by the ``runs`` it
        made (the claim checks it again, against the count it locks)."""
        if spec.max_runs is not None and runs >= spec.max_runs:
            return None, None
        trigger = self.triggers.build(spec.trigger)
        offset = spec.effective_offset()
        return bounded_first(lambda instant: first_occurrence(trigger, instant, offset),
                             self.store.now() if now is None else now, spec, paused_until)

    def _missing_calendars(self, names: tuple[str, ...]) -> list[Problem]:
        """A problem for each calendar named that does not exist (names checked first)."""
        if not names or calendars_problems(names):
            return []
        found = self.store.find_calendars(names)
        return [Problem("calendars", f"no calendar named {name!r}",
                        "create it first (create_calendar, or celery goatbeat calendar add)")
                for name in names if name not in found]

    def _spec(self, problems: list[Problem], *, trigger: TriggerSpec | None, now: datetime,
              at_given: bool = False, **values: Any) -> ScheduleSpec:
        """The spec of ``values``, or ConfigurationError listing every problem (with those
        already in ``problems``). ``at_given``: the ``at`` of a one-time ``trigger`` was given
        by this call, and is refused unless it is still ahead at ``now``: the instant the write
        places the first run from, so that an ``at`` accepted is the run stored, however long
        the round trips between took."""
        name, enabled = values.pop("name"), values.pop("enabled")
        # ISO-8601 text is read as an instant too, as a JSON document gives one.
        fields = spec_input.spec_fields(values, problems, text_instants=True)
        spec = spec_input.checked_spec(fields, problems, name=name, trigger=trigger,
                                  enabled=enabled, source=ScheduleSource.API)
        if at_given and trigger is not None and trigger.kind == "once":
            problems.extend(listed(past_once_problem(spec, now)))
        problems.extend(self._missing_calendars(spec.calendars))
        if isinstance(spec.task, str) and not self.config.task_allowed(spec.task):
            problems.append(Problem("task", f"{spec.task!r} is not in goatbeat_allowed_tasks "
                                    f"({', '.join(self.config.allowed_tasks or ())})",
                                    "add it there"))
        if self.signatures is not None and not any(p.root in ("args", "kwargs") for p in problems):
            problems.extend(self.signatures.problems(spec.task, spec.args, spec.kwargs))
        if problems:
            raise ConfigurationError(problems, subject=f"schedule {quoted_name(name)}")
        return spec


    def _check_task(self, spec: ScheduleSpec) -> None:
        """Refuse a run of a task the allow-list does not cover. This process does not hold
        the replicas' beat_schedule entries, so every config row passes here; the leader
        refuses a forged one when it would send it (core.rules.allowlist)."""
        problems = sending_problems(spec, self.config.task_allowed, _any_config_row)
        if problems:
            raise ConfigurationError(problems)


def os_actor() -> str:
    """``os:<user>``: the actor of the changes this process makes when none is named."""
    try:
        user = getpass.getuser()
    except Exception:  # no user name in the environment nor the password database
        user = "unknown"
    return f"os:{user}"


def _any_config_row(spec: ScheduleSpec) -> bool:
    """Every config row counts as an entry here (see :meth:`Schedules._check_task`)."""
    return spec.source is ScheduleSource.CONFIG
