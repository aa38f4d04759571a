"""Undoing an edit recorded in the audit log: its fields set back to their values before it,
as a compare-and-set edit refused when the schedule changed since in those fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from goatbeat_celery.api.arguments import _MAX_ROW_ID, _check_reason
from goatbeat_celery.api.writes import ScheduleWrites
from goatbeat_celery.core.rules.audit import audit_value
from goatbeat_celery.core.types.audit import CONFIG_ACTOR, AuditAction, AuditEntry
from goatbeat_celery.core.types.errors import (
    AuditEntryNotFound,
    ConfigurationError,
    ScheduleConflict,
)
from goatbeat_celery.core.types.instants import JSONValue
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec, quoted_name
from goatbeat_celery.display.audit import audit_value_text
from goatbeat_celery.spec_input import SPEC_FIELDS

#: What an edit's entry may name: the spec fields an edit changes.
_REVERTIBLE = frozenset({*SPEC_FIELDS, "trigger", "enabled"})


@dataclass(frozen=True, kw_only=True)
class RevertPreview:
    """What reverting ``entry`` would do to its schedule as it is now: each field it changed,
    ``(field, before the edit, after it, now)``, and ``refusal``, why it would be refused
    (None: it would apply); ``conflict``: refused because the schedule changed since in
    those fields (:attr:`moved`)."""

    entry: AuditEntry
    fields: tuple[tuple[str, JSONValue, JSONValue, JSONValue], ...]
    refusal: str | None
    conflict: bool = False

    @property
    def moved(self) -> tuple[str, ...]:
        """The fields that hold another value now than the change left."""
        return tuple(key for key, _, after, now in self.fields if now != after)


class AuditReverts(ScheduleWrites):
    """Reverts of recorded edits."""

    def audit_entry(self, entry_id: int) -> AuditEntry:
        """The audit entry of that id. Raises AuditEntryNotFound."""
        if (isinstance(entry_id, bool) or not isinstance(entry_id, int)
                or not 1 <= entry_id < _MAX_ROW_ID):
            raise AuditEntryNotFound(entry_id)
        found = self.store.audit_log(limit=1, before_id=entry_id + 1)
        if not found or found[0].id != entry_id:
            raise AuditEntryNotFound(entry_id)
        return found[0]

    def revert_preview(self, entry_id: int) -> RevertPreview:
        """What :meth:`revert` would do now, changing nothing. Raises AuditEntryNotFound, and
        ScheduleNotFound once the schedule is gone."""
        entry = self.audit_entry(entry_id)
        current = self.store.get_schedule(entry.schedule_name)
        refusal, conflict = None, False
        try:
            _check_revertible(entry)
            _check_unmoved(current, entry)
        except ConfigurationError as exc:
            refusal = "; ".join(exc.problems)
        except ScheduleConflict as exc:
            refusal, conflict = str(exc), True
        known = entry.changes if not entry.damage else {}
        return RevertPreview(entry=entry, refusal=refusal, conflict=conflict, fields=tuple(
            (key, before, after, _current(current.spec, key) if key in _REVERTIBLE else None)
            for key, (before, after) in known.items()))

    def revert(self, entry_id: int, *, reason: str | None = None) -> Schedule:
        """Undo the edit recorded as audit entry ``entry_id``: set each field it changed back
        to its value before, as one edit (recorded as a ``revert`` naming the entry). Refused
        (ConfigurationError) when the entry is not an edit an operator made, or names what an
        edit cannot set back; refused (ScheduleConflict) when the schedule changed since in any
        of those fields, naming each, or when it changes while this writes."""
        entry = self.audit_entry(entry_id)
        _check_reason(reason, entry.schedule_name)
        _check_revertible(entry)
        return self._rewrite(entry.schedule_name,
                             lambda current: self._reverted(current, entry, reason), pin=True)

    def _reverted(self, current: Schedule, entry: AuditEntry, reason: str | None) -> Schedule:
        _check_unmoved(current, entry)
        befores = {key: before for key, (before, _) in entry.changes.items()}
        trigger = befores.pop("trigger", None)
        enabled = befores.pop("enabled", None)
        return self._updated(
            current, every=None, cron=None, at=None, timezone=None,
            enabled=enabled if isinstance(enabled, bool) else None, day_or=None,
            changes=dict[str, Any](befores), reason=reason,
            trigger_spec=TriggerSpec.from_json(trigger) if isinstance(trigger, dict) else None,
            action=AuditAction.REVERT, noted={"reverts": (None, entry.id)})


def _check_unmoved(current: Schedule, entry: AuditEntry) -> None:
    """ScheduleConflict when a field ``entry`` changed holds another value than it left."""
    moved = [f"{key}: now {audit_value_text(now)}, the edit left {audit_value_text(after)}"
             for key, (_, after) in entry.changes.items()
             if (now := _current(current.spec, key)) != after]
    if moved:
        raise ScheduleConflict(
            f"schedule {quoted_name(current.name)} changed since entry {entry.id} in what "
            f"it changed ({'; '.join(moved)}): revert refused; edit it by hand")


def _current(spec: ScheduleSpec, key: str) -> JSONValue:
    return audit_value(getattr(spec, key))


def _check_revertible(entry: AuditEntry) -> None:
    """Refuse an entry that is not an operator's edit of fields an edit sets."""
    problems: list[Problem] = []
    action = entry.action.value if isinstance(entry.action, AuditAction) else entry.action
    if entry.damage:
        problems.append(Problem("entry", f"entry {entry.id} cannot be read as stored "
                                f"({', '.join(map(str, entry.damage))})"))
    elif action != AuditAction.EDIT.value:
        problems.append(Problem("entry", f"entry {entry.id} is a {action}, not an edit",
                                "only an edit is reverted: undo anything else by hand "
                                "(resume a pause, edit a revert back)"))
    elif entry.actor == CONFIG_ACTOR:
        problems.append(Problem("entry", f"entry {entry.id} is config sync's edit",
                                "change the app's beat_schedule instead: the next sync "
                                "would undo a revert"))
    elif not entry.changes:
        problems.append(Problem("entry", f"entry {entry.id} changed no field"))
    else:
        unknown = sorted(set(entry.changes) - _REVERTIBLE)
        if unknown:
            problems.append(Problem("entry", f"entry {entry.id} changed "
                                    f"{', '.join(unknown)}, which an edit cannot set"))
    if problems:
        raise ConfigurationError(problems, subject=f"revert of audit entry {entry.id}")
