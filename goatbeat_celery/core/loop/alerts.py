"""The leader's look at alerts: a page of schedules at a time, judged by
:func:`~goatbeat_celery.core.rules.alerts.plan_alerts`, written by the store in the leader's
fenced transaction, then logged and reported to the observer.

It runs after dispatch, once every ``alert_interval`` (sooner while pages are left), so a
look never delays a due run, and each look reads one page of ``alert_batch`` schedules with
their newest executions: its cost is bounded whatever the number of schedules.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime

from goatbeat_celery.core.loop.observer import EngineObserver
from goatbeat_celery.core.protocols import AlertLog
from goatbeat_celery.core.rules.alerts import (
    ALERT_DEPTH,
    Alert,
    AlertChange,
    AlertEvent,
    AlertRule,
    AlertRules,
    Evidence,
    plan_alerts,
)
from goatbeat_celery.core.rules.defaults import own_or_default
from goatbeat_celery.core.types.errors import LeaseLost, StoreUnavailable, failure_reason
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSpec, quoted_name

__all__ = ["AlertWatcher", "rules_of"]

logger = logging.getLogger(__name__)

#: The log line's ``action`` for each change written.
ACTIONS = {"open": "alert_opened", "repeat": "alert_repeated", "resolve": "alert_resolved"}
#: Why the open alert of a schedule deleted since is resolved.
DELETED = "the schedule was deleted"
#: While pages of schedules are left, the next one is read this soon (seconds).
NEXT_PAGE_PAUSE = 0.5


def rules_of(spec: ScheduleSpec, settings: Settings) -> AlertRules:
    """The alert rules in force for ``spec``: its own thresholds, or the settings'."""
    failures = own_or_default(spec.alert_failures, settings.alert_failures)
    missed = own_or_default(spec.alert_missed, settings.alert_missed)
    lost = own_or_default(spec.alert_lost, settings.alert_lost)
    return AlertRules(
        missed=missed or None, lost=lost or None,
        late=own_or_default(spec.alert_late, settings.alert_late),
        failures=failures or None,
        max_runtime=own_or_default(spec.max_runtime, settings.max_runtime),
        silent=own_or_default(spec.alert_silent, settings.alert_silent))


class AlertWatcher:
    """Judges the alerts of every schedule, a page per look, in a cycle over their names."""

    def __init__(self, *, store: AlertLog, settings: Settings, observer: EngineObserver,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.settings = settings
        self.observer = observer
        self._mono = monotonic
        self._cursor: str | None = None
        #: The monotonic instant of the next look.
        self.next_look = 0.0

    @property
    def cycle_done(self) -> bool:
        """Whether the next look starts again from the first schedule."""
        return self._cursor is None

    def due(self, slack: float = 0.0) -> bool:
        return self._mono() >= self.next_look - slack

    def look(self, lease: LeaseGrant, tracked_since: datetime | None) -> list[AlertEvent]:
        """Judge one page of schedules and write what changed; returns the alerts written.
        Raises LeaseLost and StoreUnavailable; one schedule's trouble only skips it."""
        interval = self.settings.alert_interval.total_seconds()
        page = self.store.alert_evidence(after=self._cursor, limit=self.settings.alert_batch,
                                         depth=ALERT_DEPTH)
        opened: dict[tuple[str, AlertRule], Alert] = {
            (alert.schedule_name, alert.rule): alert for alert in page.open_alerts}
        changes: list[AlertChange] = []
        for schedule, runs in page.schedules:
            try:
                evidence = Evidence(
                    schedule_name=schedule.name, rules=rules_of(schedule.spec, self.settings),
                    enabled=schedule.spec.enabled, created_at=schedule.created_at, runs=runs,
                    failures_in_a_row=schedule.consecutive_failures)
                mine = {rule: alert for (name, rule), alert in opened.items()
                        if name == schedule.name}
                changes.extend(plan_alerts(evidence, mine, now=page.now,
                                           tracked_since=tracked_since))
            except Exception as exc:  # one schedule's row never stops the others' alerts
                logger.error("could not judge the alerts of schedule %s: %s",
                             quoted_name(schedule.name), failure_reason(exc),
                             extra={"action": "alert_failed"})
        present = {schedule.name for schedule, _ in page.schedules}
        changes.extend(AlertChange(schedule_name=name, rule=rule, action="resolve",
                                   reason=DELETED)
                       for (name, rule) in opened if name not in present)
        events = self.store.record_alerts(changes, lease=lease) if changes else []
        self._cursor = page.last
        self.next_look = self._mono() + (interval if page.last is None
                                         else min(NEXT_PAGE_PAUSE, interval))
        for event in events:
            _log(event)
        if events:
            self.observer.alerts_changed(events)
        return events

    def safe_look(self, lease: LeaseGrant | None, tracked_since: datetime | None) -> None:
        """:meth:`look`, for the engine: a store error other than an outage is logged and the
        look tried again at the next interval."""
        if lease is None:
            return
        try:
            self.look(lease, tracked_since)
        except (LeaseLost, StoreUnavailable):
            raise
        except Exception as exc:
            self.next_look = self._mono() + self.settings.alert_interval.total_seconds()
            logger.error("could not judge alerts: %s", failure_reason(exc),
                         extra={"action": "alert_failed"})


def _log(event: AlertEvent) -> None:
    alert = event.alert
    extra = {"action": ACTIONS[event.action],
             "rule": alert.rule.value, "schedule": alert.schedule_name, "alert_id": alert.id,
             "count": alert.count}
    name = quoted_name(alert.schedule_name)
    if event.action == "open":
        logger.warning("alert %s raised on schedule %s: %s", alert.rule.value, name,
                       alert.reason, extra=extra)
    elif event.action == "repeat":
        logger.warning("alert %s on schedule %s again (%d times): %s", alert.rule.value, name,
                       alert.count, alert.reason, extra=extra)
    else:
        logger.info("alert %s on schedule %s resolved (raised %d times since %s)",
                    alert.rule.value, name, alert.count, alert.first_at.isoformat(),
                    extra=extra)
