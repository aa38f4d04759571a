"""The audit log's records: who changed a schedule, when, why, and what changed.

Every change of a schedule made through :class:`goatbeat_celery.api.Schedules` (any face) or by
config sync is written with an :class:`AuditNote`, in the same transaction as the change, and
read back as :class:`AuditEntry` rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from goatbeat_celery.core.types.instants import JSONValue
from goatbeat_celery.core.types.problems import Problem


class AuditAction(str, Enum):
    """What a change did to a schedule."""

    CREATE = "create"
    EDIT = "edit"
    PAUSE = "pause"
    RESUME = "resume"
    RUN_NOW = "run_now"
    BACKFILL = "backfill"
    CANCEL_BACKFILL = "cancel_backfill"
    #: The failed occurrences of a backfill were run again under new keys.
    RERUN = "rerun"
    #: An edit was undone: the fields it changed set back to their values before it.
    REVERT = "revert"
    #: Config sync disabled a config schedule whose entry left ``beat_schedule``.
    DISABLE = "disable"
    DELETE = "delete"
    #: A run of the schedule was revoked (its Celery task), and maybe terminated.
    REVOKE = "revoke"
    #: An open alert of the schedule was acknowledged, or silenced until an instant.
    ACKNOWLEDGE_ALERT = "acknowledge_alert"
    SILENCE_ALERT = "silence_alert"


#: The actor of the changes config sync makes.
CONFIG_ACTOR = "config"

#: A field's value before and after a change (JSON: instants as ISO-8601 text, durations in
#: seconds, None for a field that was not set or did not exist).
FieldChange = tuple[JSONValue, JSONValue]


@dataclass(frozen=True, kw_only=True)
class AuditNote:
    """What a write says about itself, for the store to record with it."""

    action: AuditAction
    actor: str
    reason: str | None = None
    changes: Mapping[str, FieldChange] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class AuditEntry:
    """One recorded change of one schedule (the schedule may be gone since)."""

    id: int
    schedule_name: str
    at: datetime
    action: AuditAction | str
    actor: str
    reason: str | None = None
    changes: Mapping[str, FieldChange] = field(default_factory=dict)
    #: Columns that could not be read as stored (a row edited by hand), as for schedules.
    damage: tuple[Problem, ...] = ()

    def to_json(self) -> dict[str, JSONValue]:
        action = self.action.value if isinstance(self.action, AuditAction) else self.action
        return {"id": self.id, "schedule": self.schedule_name, "at": self.at.isoformat(),
                "action": action, "actor": self.actor, "reason": self.reason,
                "changes": {key: [before, after]
                            for key, (before, after) in self.changes.items()}}


#: Longest actor name (characters): a token's name, ``os:<user>``, ``django:<username>``.
MAX_ACTOR_LENGTH = 200
