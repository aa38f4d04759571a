"""An alert as it is stored and told: the rules an alert may be raised for, its states, the row
(:class:`Alert`), the changes the leader writes and the events they leave, and the counts and
defaults of the alert settings.

When a rule holds, and what the leader writes then, is :mod:`goatbeat_celery.core.rules.alerts`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

#: The most runs an alert may wait for (failed runs in a row, lost runs, missed occurrences),
#: and the newest executions of each schedule the leader reads to judge its alerts (enough for
#: that count and a success).
MAX_ALERT_FAILURES = 20
ALERT_DEPTH = MAX_ALERT_FAILURES + 5
#: Failed runs in a row before ``failed`` is raised, for schedules that give no count.
DEFAULT_ALERT_FAILURES = 3
#: Missed occurrences in a row before ``missed`` is raised, and lost runs since the last
#: success before ``lost`` is, for schedules that give no count.
DEFAULT_ALERT_MISSED = 1
DEFAULT_ALERT_LOST = 1


class AlertRule(str, enum.Enum):
    """What an alert says about a schedule."""

    #: ``alert_missed`` occurrences in a row did not run: before its newest one (coalesced by
    #: the misfire policy or later than the misfire grace), or its newest expired (past its
    #: starting deadline before it could be sent).
    MISSED = "missed"
    #: Its newest run was sent more than ``alert_late`` after it was due.
    LATE = "late"
    #: ``alert_failures`` runs failed in a row; resolved when one succeeds.
    FAILED = "failed"
    #: ``alert_lost`` runs were marked lost since the last success; resolved when one succeeds.
    LOST = "lost"
    #: A run is still running ``max_runtime`` after it started (needs run tracking).
    OVERRUN = "overrun"
    #: No run succeeded within ``alert_silent`` (needs run tracking): the dead man's switch.
    SILENT = "silent"

    @property
    def needs_tracking(self) -> bool:
        """Whether the rule is judged only where the workers track runs."""
        return self in (AlertRule.OVERRUN, AlertRule.SILENT)


class AlertState(str, enum.Enum):
    OPEN = "open"
    RESOLVED = "resolved"


#: ``remind``: an open alert whose silence ended is told again (its silence cleared).
AlertAction = Literal["open", "repeat", "resolve", "remind"]


@dataclass(frozen=True, kw_only=True)
class AlertRules:
    """The rules in force for one schedule (its own values, or the settings'); None: off."""

    missed: int | None = DEFAULT_ALERT_MISSED
    lost: int | None = DEFAULT_ALERT_LOST
    late: timedelta | None = None
    failures: int | None = DEFAULT_ALERT_FAILURES
    max_runtime: timedelta | None = None
    silent: timedelta | None = None

    def on(self, rule: AlertRule) -> bool:
        """Whether ``rule`` is in force."""
        return {
            AlertRule.MISSED: self.missed is not None, AlertRule.LOST: self.lost is not None,
            AlertRule.LATE: self.late is not None, AlertRule.FAILED: self.failures is not None,
            AlertRule.OVERRUN: self.max_runtime is not None,
            AlertRule.SILENT: self.silent is not None,
        }[rule]


@dataclass(frozen=True, kw_only=True)
class Alert:
    """One alert row: a rule that held for a schedule, from ``first_at`` to ``resolved_at``.

    ``count`` is how many distinct runs showed it (``key`` the last of them); ``last_at`` when
    it was last counted (or resolved)."""

    id: int
    schedule_name: str
    rule: AlertRule
    state: AlertState
    reason: str
    first_at: datetime
    last_at: datetime
    count: int = 1
    key: str | None = None
    resolved_at: datetime | None = None
    #: Who acknowledged it, when, and what they noted (None: not acknowledged). An
    #: acknowledged alert stays open; it is not told again when counted again.
    acknowledged_at: datetime | None = None
    acknowledged_by: str | None = None
    ack_note: str | None = None
    #: Nothing is told of it before this instant (None: not silenced); once it passes, the
    #: leader tells it again if it is still open (``remind``) and clears it.
    silenced_until: datetime | None = None
    silenced_by: str | None = None

    @property
    def open(self) -> bool:
        return self.state is AlertState.OPEN

    @property
    def acknowledged(self) -> bool:
        return self.acknowledged_at is not None

    def silenced_at(self, now: datetime) -> bool:
        """Whether a silence holds at ``now``."""
        return self.silenced_until is not None and self.silenced_until > now

    def as_json(self) -> dict[str, object]:
        """The alert as plain data (what ``alerts --json``, the dashboard and an outbox event
        carry)."""
        return {
            "id": self.id, "schedule": self.schedule_name, "rule": self.rule.value,
            "state": self.state.value, "reason": self.reason,
            "first_at": self.first_at.isoformat(), "last_at": self.last_at.isoformat(),
            "count": self.count, "key": self.key,
            "resolved_at": None if self.resolved_at is None else self.resolved_at.isoformat(),
            "acknowledged_at": _iso(self.acknowledged_at),
            "acknowledged_by": self.acknowledged_by, "ack_note": self.ack_note,
            "silenced_until": _iso(self.silenced_until), "silenced_by": self.silenced_by,
        }


def _iso(instant: datetime | None) -> str | None:
    return None if instant is None else instant.isoformat()


@dataclass(frozen=True, kw_only=True)
class AlertChange:
    """What the leader writes about one schedule and rule: ``open`` a new alert (counted again
    instead when one is open already), ``repeat`` (count the open one again, for ``key``),
    ``resolve`` it, or ``remind``: clear the open one's silence that ended at
    ``silenced_until`` (unless it was changed since), to tell it again."""

    schedule_name: str
    rule: AlertRule
    action: AlertAction
    reason: str
    key: str | None = None
    silenced_until: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class AlertEvent:
    """An alert as one change left it, with that change's ``action``. ``told``: whether the
    change is told (its outbox event written, its signal sent): not for an alert counted again
    once acknowledged, nor for any change while silenced. ``silence_ended``: a reminder's
    silence, which names its event."""

    action: AlertAction
    alert: Alert
    told: bool = True
    silence_ended: datetime | None = None
