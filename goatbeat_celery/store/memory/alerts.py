"""Alerts: the evidence the leader judges them by, and their rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from goatbeat_celery.core.protocols import AlertLog
from goatbeat_celery.core.rules.alerts import (
    Alert,
    AlertAction,
    AlertChange,
    AlertEvent,
    AlertState,
    outbox_event,
    resolved_refusal,
    run_changed_since,
    silence_passed,
    told,
)
from goatbeat_celery.core.types.alert_evidence import AlertPage, AlertScope
from goatbeat_celery.core.types.audit import AuditNote
from goatbeat_celery.core.types.errors import AlertNotFound, ScheduleConflict
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.store.memory.outbox import MemoryOutbox


class MemoryAlerts(MemoryOutbox, AlertLog):
    """The alert log (core.protocols.AlertLog); each change's outbox event is written with
    it."""

    def alert_evidence(self, *, after: str | None, limit: int, depth: int,
                       scope: AlertScope | None = None) -> AlertPage:
        with self._lock:
            now = self.now()
            names = sorted(name for name in self._schedules if after is None or name > after)
            every: dict[str, list[Execution]] = {name: [] for name in names}
            for execution in self._executions.values():
                if execution.schedule_name in every:
                    every[execution.schedule_name].append(execution)
            if scope is not None:
                alerted = {alert.schedule_name for alert in self._alerts.values()
                           if alert.open}
                names = [name for name in names if name in alerted or name in scope.names
                         or (scope.silent_own
                             and self._schedules[name].spec.alert_silent is not None)
                         or any(scope.changed_since is None
                                or run_changed_since(run, scope.changed_since,
                                                     runs_tracked=scope.runs_tracked)
                                for run in every[name])]
            page = names[:limit]
            runs = {name: every[name] for name in page}
            schedules = tuple(
                (self._schedules[name],
                 tuple(sorted(runs[name], key=lambda e: (e.occurrence_at, e.key),
                              reverse=True)[:depth]))
                for name in page)
            last = page[-1] if len(names) > limit else None
            open_alerts = tuple(
                alert for alert in sorted(self._alerts.values(), key=lambda a: a.id)
                if alert.open and (after is None or alert.schedule_name > after)
                and (last is None or alert.schedule_name <= last))
        return AlertPage(now=now, schedules=schedules, open_alerts=open_alerts, last=last)

    def record_alerts(self, changes: Sequence[AlertChange], *,
                      lease: LeaseGrant) -> list[AlertEvent]:
        with self._lock:
            now = self._check_fence(lease)
            events: list[AlertEvent] = []
            for change in changes:
                current = next((alert for alert in self._alerts.values() if alert.open
                                and alert.schedule_name == change.schedule_name
                                and alert.rule is change.rule), None)
                ended = None
                if change.action == "remind":
                    if (current is None or current.silenced_until is None
                            or current.silenced_until != change.silenced_until
                            or current.silenced_until > now):
                        continue
                    ended = current.silenced_until
                    written = replace(current, silenced_until=None, silenced_by=None)
                elif change.action == "resolve":
                    if current is None:
                        continue
                    written = replace(current, state=AlertState.RESOLVED, resolved_at=now,
                                      last_at=now)
                elif current is None:
                    if change.action != "open":
                        continue
                    written = Alert(id=next(self._alert_ids), schedule_name=change.schedule_name,
                                    rule=change.rule, state=AlertState.OPEN,
                                    reason=change.reason, first_at=now, last_at=now,
                                    key=change.key)
                elif change.key is not None and change.key != current.key:
                    written = replace(current, count=current.count + 1, last_at=now,
                                      key=change.key, reason=change.reason)
                else:
                    continue
                self._alerts[written.id] = written
                action: AlertAction = change.action
                if current is not None and change.action == "open":
                    action = "repeat"
                events.append(AlertEvent(action=action, alert=written,
                                         told=told(action, written, now), silence_ended=ended))
            # Each change's event goes out with it, or not at all (docs/webhooks.md).
            self._enqueue_events_locked([outbox_event(event) for event in events if event.told])
            return events

    def get_alert(self, alert_id: int) -> Alert | None:
        with self._lock:
            return self._alerts.get(alert_id)

    def acknowledge_alert(self, alert_id: int, *, by: str, note: str | None,
                          audit: AuditNote) -> Alert:
        with self._lock:
            now = self.now()
            current = self._open_alert(alert_id, "acknowledged")
            written = replace(current, acknowledged_at=now, acknowledged_by=by, ack_note=note)
            self._alerts[alert_id] = written
            self._record(current.schedule_name, audit, now)
            return written

    def silence_alert(self, alert_id: int, *, until: datetime, by: str,
                      audit: AuditNote) -> Alert:
        with self._lock:
            now = self.now()
            current = self._open_alert(alert_id, "silenced")
            if until <= now:
                raise ScheduleConflict(silence_passed(until, now))
            written = replace(current, silenced_until=until, silenced_by=by)
            self._alerts[alert_id] = written
            self._record(current.schedule_name, audit, now)
            return written

    def _open_alert(self, alert_id: int, done: str) -> Alert:
        current = self._alerts.get(alert_id)
        if current is None:
            raise AlertNotFound(alert_id)
        if not current.open:
            raise ScheduleConflict(resolved_refusal(current, done))
        return current

    def list_alerts(self, *, open_only: bool = False, schedule_name: str | None = None,
                    limit: int = 100) -> list[Alert]:
        with self._lock:
            found = [alert for alert in self._alerts.values()
                     if (not open_only or alert.open)
                     and (schedule_name is None or alert.schedule_name == schedule_name)]
        found.sort(key=lambda alert: (not alert.open, -alert.id))
        return found[:limit]
