"""The audit log and config sync plans: each change as a line, a row or a JSON entry."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from goatbeat_celery.core.types.audit import AuditAction, AuditEntry, AuditNote, FieldChange
from goatbeat_celery.core.types.spec import TriggerSpec, quoted_name
from goatbeat_celery.display.scalars import NONE, compact_json, iso, when
from goatbeat_celery.display.triggers import describe_trigger


def audit_value_text(value: Any) -> str:
    """One side of a change for people: ``none``, text as it is, anything else as JSON."""
    if value is None:
        return "none"
    if isinstance(value, str):
        return value
    return compact_json(value)


def change_value_text(key: str, value: Any) -> str:
    """One side of a change of ``key`` as a page shows it: a trigger as its description (with
    its zone), anything else as :func:`audit_value_text`."""
    if key == "trigger" and isinstance(value, dict) and isinstance(value.get("kind"), str):
        text = describe_trigger(TriggerSpec.from_json(value))
        zone = value.get("timezone")
        return f"{text} ({zone})" if isinstance(zone, str) and zone not in text else text
    return audit_value_text(value)


def audit_change_parts(changes: Mapping[str, FieldChange], *,
                       value_text: Callable[[str, Any], str] | None = None) -> list[str]:
    """``task: a → b`` for each field that changed; the one side there is for a creation or a
    deletion (``task: a``), and for what the change added (``run: <key>``). A field whose
    before and after are equal (``per_tick: none → none``) changed nothing: it is left out.
    ``value_text(field, value)`` words each side (default: :func:`audit_value_text`)."""
    def said(key: str, value: Any) -> str:
        return audit_value_text(value) if value_text is None else value_text(key, value)

    parts = []
    for key, (before, after) in changes.items():
        if before == after:
            continue
        if before is None and after is not None:
            parts.append(f"{key}: {said(key, after)}")
        elif after is None and before is not None:
            parts.append(f"{key}: {said(key, before)} \u2192 none")
        else:
            parts.append(f"{key}: {said(key, before)} \u2192 {said(key, after)}")
    return parts


def audit_changes_text(changes: Mapping[str, FieldChange]) -> str:
    """``task: a → b; enabled: true → false`` (:func:`audit_change_parts`, or ``none``)."""
    return "; ".join(audit_change_parts(changes)) or NONE


def audit_action(action: AuditAction | str) -> str:
    return action.value if isinstance(action, AuditAction) else action


def audit_json(entry: AuditEntry) -> dict[str, Any]:
    """An audit entry for scripts: ``audit --json`` and the HTTP API's audit log give this
    document; a contract.

    Keys, always present: ``id``, ``schedule``, ``at`` (ISO-8601 in UTC), ``action``,
    ``actor``, ``reason`` (null: none given), ``changes`` (each field changed to its
    ``[before, after]``, null on the side that is absent) and ``damage``."""
    return {"id": entry.id, "schedule": entry.schedule_name, "at": iso(entry.at),
            "action": audit_action(entry.action), "actor": entry.actor, "reason": entry.reason,
            "changes": {key: [before, after] for key, (before, after) in entry.changes.items()},
            "damage": [str(d) for d in entry.damage]}


AUDIT_COLUMNS = ("ID", "WHEN", "ACTION", "ACTOR", "CHANGES", "REASON")
AUDIT_CLIPPED = {"ACTOR": "middle", "CHANGES": "end", "REASON": "end"}


def audit_row(entry: AuditEntry) -> tuple[str, ...]:
    return (str(entry.id), when(entry.at), audit_action(entry.action), entry.actor,
            audit_changes_text(entry.changes), entry.reason or NONE)


#: How ``sync --plan`` marks each kind of change.
PLAN_MARKS = {AuditAction.CREATE: "+", AuditAction.EDIT: "~", AuditAction.DISABLE: "-",
              AuditAction.DELETE: "x"}


def plan_line(name: str, note: AuditNote) -> str:
    """``~ report  edit  trigger: … → …``: one change of a config sync plan."""
    mark = PLAN_MARKS.get(note.action, "?")
    why = f" ({note.reason})" if note.reason else ""
    return (f"{mark} {quoted_name(name)}  {note.action.value}{why}  "
            f"{audit_changes_text(note.changes)}")
