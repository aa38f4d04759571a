"""Alerts for ``alerts`` and the dashboard (docs/alerts.md)."""

from __future__ import annotations

from datetime import datetime

from goatbeat_celery.core.links import doc
from goatbeat_celery.core.rules.alerts import Alert
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.display.scalars import when

ALERT_COLUMNS = ("ID", "SCHEDULE", "RULE", "STATE", "COUNT", "FIRST", "LAST", "REASON")


def alert_row(alert: Alert, now: datetime | None = None) -> list[str]:
    """An alert as a row of :data:`ALERT_COLUMNS`; an open one's state says whether it is
    acknowledged or silenced (at ``now``: a silence that ended is not shown)."""
    state = alert.state.value
    if alert.open and alert.acknowledged_at is not None:
        state += f", acknowledged by {alert.acknowledged_by}"
    if alert.open and alert.silenced_until is not None and (
            now is None or alert.silenced_at(now)):
        state += f", silenced until {when(alert.silenced_until)}"
    return [str(alert.id), alert.schedule_name, alert.rule.value, state,
            str(alert.count), when(alert.first_at), when(alert.last_at), alert.reason]


def alert_handling(alert: Alert, now: datetime | None = None) -> list[str]:
    """What people did about an alert, a phrase each: ``acknowledged by X at T (note)`` and
    ``silenced until T by X`` (while it holds at ``now``; None: whenever set)."""
    found = []
    if alert.acknowledged_at is not None:
        note = f" ({alert.ack_note})" if alert.ack_note else ""
        found.append(f"acknowledged by {alert.acknowledged_by} at "
                     f"{when(alert.acknowledged_at)}{note}")
    if alert.silenced_until is not None and (now is None or alert.silenced_at(now)):
        found.append(f"silenced until {when(alert.silenced_until)} (by {alert.silenced_by})")
    return found


def untracked_rules_note(settings: Settings) -> str | None:
    """What the alerts cannot say where the workers do not track runs; None where they do."""
    return None if settings.track_runs else (
        "the workers do not track runs (goatbeat_track_runs is off): overrun and silent are "
        f"not judged, and failed and lost have no evidence ({doc('run-tracking.md')})")
