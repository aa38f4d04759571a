"""What a person does about an open alert: acknowledge it (who, when, a note: it stays open,
shown as acknowledged, and is not told again when counted again) or silence it until an
instant (nothing told of it before then; the leader tells it again then if it is still
open). Each is written with its audit entry on the alert's schedule, in one transaction."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from goatbeat_celery.api.arguments import _MAX_ROW_ID, _note_problems
from goatbeat_celery.api.records import RecordReads
from goatbeat_celery.core.protocols import AlertLog
from goatbeat_celery.core.rules.alerts import Alert
from goatbeat_celery.core.rules.audit import audit_value, reason_problems
from goatbeat_celery.core.rules.validation import (
    instant_problem,
)
from goatbeat_celery.core.types.audit import AuditAction
from goatbeat_celery.core.types.errors import AlertNotFound, ConfigurationError
from goatbeat_celery.core.types.instants import ensure_aware
from goatbeat_celery.core.types.problems import Problem


class AlertActions(RecordReads):
    """Acknowledge and silence alerts."""

    def acknowledge_alert(self, alert_id: int, *, note: str | None = None,
                          reason: str | None = None) -> Alert:
        """Acknowledge the open alert ``alert_id`` as this actor, now, with ``note`` (shown
        with it; again: replaces the note). The audit log's reason is ``reason``, else
        ``note``. AlertNotFound; ScheduleConflict for a resolved alert."""
        problems = [*reason_problems(reason), *_note_problems(note)]
        if problems:
            raise ConfigurationError(problems, subject=f"alert {alert_id}")
        log = self._alert_log()
        before = self.alert(alert_id)
        note = note or None
        return log.acknowledge_alert(
            alert_id, by=self.actor, note=note,
            audit=self._note(AuditAction.ACKNOWLEDGE_ALERT, note if reason is None else reason, {
                "alert": (None, f"{before.rule.value} #{before.id}"),
                "acknowledged_by": (before.acknowledged_by, self.actor),
                "ack_note": (before.ack_note, note)}))

    def silence_alert(self, alert_id: int, *, until: datetime,
                      reason: str | None = None) -> Alert:
        """Tell nothing of the open alert ``alert_id`` before ``until`` (an aware instant after
        now; again: replaces the end); then, if it is still open, the leader tells it again.
        AlertNotFound; ScheduleConflict for a resolved alert; ConfigurationError for an
        ``until`` not after now."""
        problems = list(reason_problems(reason))
        problem = instant_problem(until, "until")
        if problem is not None:
            problems.append(problem)
        else:
            until = ensure_aware(until, "until")
            now = self.store.now()
            if until <= now:
                problems.append(Problem("until", f"{until.isoformat()} is not after now "
                                        f"({now.isoformat()})", "give a later instant"))
        if problems:
            raise ConfigurationError(problems, subject=f"alert {alert_id}")
        log = self._alert_log()
        before = self.alert(alert_id)
        return log.silence_alert(
            alert_id, until=until, by=self.actor,
            audit=self._note(AuditAction.SILENCE_ALERT, reason, {
                "alert": (None, f"{before.rule.value} #{before.id}"),
                "silenced_until": (audit_value(before.silenced_until), audit_value(until))}))

    def open_alerts_of(self, name: str, rule: str | None = None) -> list[Alert]:
        """The open alerts of schedule ``name`` (of ``rule`` only, when given), oldest first:
        what ``alerts ack NAME`` acts on."""
        found = self.alerts(name=name, open_only=True)
        return sorted((a for a in found if rule is None or a.rule.value == rule),
                      key=lambda a: a.id)

    def _alert_log(self) -> AlertLog:
        return cast(AlertLog, self.store)

    def alert(self, alert_id: int) -> Alert:
        """The alert ``alert_id`` (any state); AlertNotFound for an id no alert can have."""
        if (isinstance(alert_id, bool) or not isinstance(alert_id, int)
                or not 1 <= alert_id <= _MAX_ROW_ID):
            raise AlertNotFound(alert_id)
        found = self._alert_log().get_alert(alert_id)
        if found is None:
            raise AlertNotFound(alert_id)
        return found
