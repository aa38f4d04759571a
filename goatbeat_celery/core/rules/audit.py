"""What the audit log records of a change: the actor and reason checked, and the fields that
changed, before and after, as JSON.

The API (:class:`goatbeat_celery.api.Schedules`) builds the note of each change it makes; config
sync builds its own from its plan (:func:`sync_notes`). Stores only write what they are given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields, replace
from datetime import datetime, timedelta
from enum import Enum

from goatbeat_celery.core.rules.sync import SyncPlan
from goatbeat_celery.core.rules.validation import (
    MAX_REASON_LENGTH,
    description_problem,
    hidden_characters,
    shown_value,
)
from goatbeat_celery.core.types.audit import (
    CONFIG_ACTOR,
    MAX_ACTOR_LENGTH,
    AuditAction,
    AuditNote,
    FieldChange,
)
from goatbeat_celery.core.types.instants import JSONValue
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec

__all__ = ["MAX_ACTOR_LENGTH", "actor_problems", "audit_value", "reason_problems", "spec_changes",
           "sync_notes", "with_change"]

#: Spec fields the log leaves out: the name is the row's key, the source never changes.
_UNLOGGED = frozenset({"name", "source"})
_SPEC_FIELDS = tuple(f.name for f in fields(ScheduleSpec) if f.name not in _UNLOGGED)


def audit_value(value: object) -> JSONValue:
    """``value`` as the log stores it: instants as ISO-8601 text, durations in seconds, enums
    by value, triggers as their JSON, sequences as lists."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, TriggerSpec):
        return value.to_json()
    if isinstance(value, (list, tuple)):
        return [audit_value(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): audit_value(item) for key, item in value.items()}
    return value


def _unset(value: JSONValue) -> bool:
    return value is None or value == [] or value == {}


def spec_changes(before: ScheduleSpec | None, after: ScheduleSpec | None
                 ) -> dict[str, FieldChange]:
    """The fields whose value differs between ``before`` and ``after``, each as
    ``(before, after)``; None for the side that does not exist (a creation, a deletion), whose
    unset fields are left out."""
    changes: dict[str, FieldChange] = {}
    for name in _SPEC_FIELDS:
        old = None if before is None else audit_value(getattr(before, name))
        new = None if after is None else audit_value(getattr(after, name))
        if old == new or ((before is None or after is None) and _unset(old) and _unset(new)):
            continue
        changes[name] = (old, new)
    return changes


def with_change(note: AuditNote | None, name: str, value: JSONValue) -> AuditNote | None:
    """``note`` with ``name`` set to ``value`` among its changes (what the store learns only as
    it writes: a run's key, a backfill's id)."""
    if note is None:
        return None
    return replace(note, changes={**note.changes, name: (None, value)})


def actor_problems(actor: object) -> list[Problem]:
    """Why ``actor`` cannot name who made a change: not text, empty, too long, or holding
    control characters."""
    if not isinstance(actor, str) or not actor.strip():
        return [Problem("actor", f"expected a non-empty name, got {shown_value(actor)}",
                        "say who makes the change: a token's name, os:<user>, …")]
    if len(actor) > MAX_ACTOR_LENGTH:
        return [Problem("actor", f"{len(actor)} characters",
                        f"at most {MAX_ACTOR_LENGTH} are allowed")]
    if hidden_characters(actor):
        return [Problem("actor", "contains control or invisible characters",
                        "use printable text")]
    return []


def reason_problems(reason: object) -> list[Problem]:
    """Why ``reason`` cannot be recorded: not text, too long (:data:`MAX_REASON_LENGTH`), or
    holding control characters. None is no reason."""
    if reason is None:
        return []
    problem = description_problem(reason, "reason")
    if problem is None and isinstance(reason, str) and len(reason) > MAX_REASON_LENGTH:
        problem = Problem("reason", f"{len(reason)} characters",
                          f"at most {MAX_REASON_LENGTH} are allowed")
    return [] if problem is None else [problem]


def sync_notes(plan: SyncPlan, stored: Mapping[str, ScheduleSpec]
               ) -> Iterable[tuple[str, AuditNote]]:
    """The audit note of each schedule a config sync changes, by name: those it creates,
    rewrites, disables (their entry left ``beat_schedule``) and deletes (``stored``: the specs
    of the rows it read)."""
    for entry in plan.insert:
        yield entry.spec.name, AuditNote(action=AuditAction.CREATE, actor=CONFIG_ACTOR,
                                         changes=spec_changes(None, entry.spec))
    for entry in plan.rewrite:
        yield entry.spec.name, AuditNote(
            action=AuditAction.EDIT, actor=CONFIG_ACTOR,
            changes=spec_changes(stored.get(entry.spec.name), entry.spec))
    for name in plan.disable:
        yield name, AuditNote(action=AuditAction.DISABLE, actor=CONFIG_ACTOR,
                              reason="removed from beat_schedule",
                              changes={"enabled": (True, False)})
    for name in plan.delete:
        yield name, AuditNote(action=AuditAction.DELETE, actor=CONFIG_ACTOR,
                              reason="removed from beat_schedule; goatbeat_config_prune",
                              changes=spec_changes(stored.get(name), None))
