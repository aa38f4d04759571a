"""Alerts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from goatbeat_celery.core.rules.alerts import Alert, AlertChange, AlertEvent
from goatbeat_celery.core.types.alert_evidence import AlertPage, AlertScope
from goatbeat_celery.core.types.audit import AuditNote
from goatbeat_celery.core.types.lease import LeaseGrant


class AlertLog(Protocol):
    """Where the leader keeps alerts (:mod:`goatbeat_celery.core.rules.alerts`): one row per
    alert, ``open`` until resolved, at most one open per schedule and rule. What a change writes
    is decided in the core (:func:`~goatbeat_celery.core.rules.alerts.plan_alerts`); the store
    writes it, fenced by the leader's lease. Instants are the store's clock."""

    def alert_evidence(self, *, after: str | None, limit: int, depth: int,
                       scope: AlertScope | None = None) -> AlertPage:
        """Up to ``limit`` schedules whose name sorts after ``after`` (from the first with
        None) and that are in ``scope`` (None: every schedule), in name order, each with its
        ``depth`` newest executions (newest occurrence first) and the alerts open on the names
        of the page's range (after ``after``, up to ``last``: those of schedules deleted since
        too). ``last`` is the last name returned, or None when no schedule in scope was left
        after it (the range then runs to the end). Reads only; cost grows with ``limit`` ×
        ``depth``, never with the executions outside the page (the history index); finding
        the schedules in a ``scope`` reads the indexes of runs in flight, unsettled or newly
        claimed, and of open alerts."""
        ...

    def record_alerts(self, changes: Sequence[AlertChange], *,
                      lease: LeaseGrant) -> list[AlertEvent]:
        """Apply ``changes`` in one transaction fenced by ``lease`` (LeaseLost if stale,
        nothing changed), each with the store's now, and return the alerts as written:

        * ``open``: insert an open alert (count 1, first and last time now) unless one is open
          for that schedule and rule, which is counted again instead (as ``repeat``);
        * ``repeat``: on the open alert whose ``key`` differs from the change's, count + 1,
          last time now, the change's key and reason; otherwise nothing;
        * ``resolve``: the open alert becomes ``resolved`` (resolved and last time now);
          none open: nothing;
        * ``remind``: the open alert whose ``silenced_until`` is still the change's (and not
          after now) has it cleared; otherwise nothing.

        Each event's ``told`` is :func:`~goatbeat_celery.core.rules.alerts.told` of the alert
        as written, at now: only the events told have their outbox event written. A
        reminder's ``silence_ended`` is the silence it cleared.

        A change that writes nothing is left out of the result, so a change planned twice (two
        leaders' looks, a look repeated after a failover) is written once."""
        ...

    def get_alert(self, alert_id: int) -> Alert | None:
        """The alert ``alert_id`` in any state, or None. Reads only."""
        ...

    def acknowledge_alert(self, alert_id: int, *, by: str, note: str | None,
                          audit: AuditNote) -> Alert:
        """Mark the open alert ``alert_id`` acknowledged by ``by`` at the store's now, with
        ``note`` (replacing an earlier acknowledgement), and record ``audit`` on its schedule
        in the same transaction. AlertNotFound for no such alert; ScheduleConflict, nothing
        changed, for one resolved."""
        ...

    def silence_alert(self, alert_id: int, *, until: datetime, by: str,
                      audit: AuditNote) -> Alert:
        """Silence the open alert ``alert_id`` until ``until`` (replacing an earlier silence),
        set by ``by``, and record ``audit`` on its schedule in the same transaction: its
        changes are not told before then (the leader reminds of it after). AlertNotFound;
        ScheduleConflict, nothing changed, for one resolved or ``until`` not after the
        store's now."""
        ...

    def list_alerts(self, *, open_only: bool = False, schedule_name: str | None = None,
                    limit: int = 100) -> list[Alert]:
        """Alerts, open ones first then newest first (by id), optionally only open ones or
        only one schedule's. Reads only."""
        ...
