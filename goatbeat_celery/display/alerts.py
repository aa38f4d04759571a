"""Alerts for ``alerts`` and the dashboard (docs/alerts.md)."""

from __future__ import annotations

from goatbeat_celery.core.links import doc
from goatbeat_celery.core.rules.alerts import Alert
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.display.scalars import when

ALERT_COLUMNS = ("ID", "SCHEDULE", "RULE", "STATE", "COUNT", "FIRST", "LAST", "REASON")


def alert_row(alert: Alert) -> list[str]:
    """An alert as a row of :data:`ALERT_COLUMNS`."""
    return [str(alert.id), alert.schedule_name, alert.rule.value, alert.state.value,
            str(alert.count), when(alert.first_at), when(alert.last_at), alert.reason]


def untracked_rules_note(settings: Settings) -> str | None:
    """What the alerts cannot say where the workers do not track runs; None where they do."""
    return None if settings.track_runs else (
        "the workers do not track runs (goatbeat_track_runs is off): overrun and silent are "
        f"not judged, and failed and lost have no evidence ({doc('run-tracking.md')})")
