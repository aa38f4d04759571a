"""The leader's look at alerts: a page of schedules at a time, judged by
:func:`~goatbeat_celery.core.rules.alerts.plan_alerts`, written by the store in the leader's
fenced transaction, then logged and reported to the observer.

It runs after dispatch, once every ``alert_interval`` (sooner while pages are left), and each
look reads one page of ``alert_batch`` schedules with their newest executions: its cost is
bounded whatever the number of schedules. A cycle over the schedules reads only those whose
verdict can have changed since the cycle before (:class:`AlertScope`): with open alerts, runs
in flight then or now, runs claimed since; an idle leader's look is one statement that finds
none. Every schedule that has runs is read again after a change was announced (an edit can
change a threshold), at a new lease, and at least every :data:`FULL_CYCLE_EVERY`, for what
was written by hand without announcing it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
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
    reminders,
    run_watched,
)
from goatbeat_celery.core.rules.defaults import own_or_default
from goatbeat_celery.core.types.alert_evidence import AlertScope
from goatbeat_celery.core.types.claims import Waiting
from goatbeat_celery.core.types.errors import LeaseLost, StoreUnavailable, failure_reason
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSpec, quoted_name

__all__ = ["AlertWatcher", "Quiet", "rules_of"]

logger = logging.getLogger(__name__)

#: The log line's ``action`` for each change written.
ACTIONS = {"open": "alert_opened", "repeat": "alert_repeated", "resolve": "alert_resolved",
           "remind": "alert_reminded"}
#: Why the open alert of a schedule deleted since is resolved.
DELETED = "the schedule was deleted"
#: While pages of schedules are left, the next one is read this soon (seconds).
NEXT_PAGE_PAUSE = 0.5
#: A cycle reads every schedule that has runs at least this often (seconds), whatever it heard.
FULL_CYCLE_EVERY = 300.0
#: More schedules than this left watched by a cycle (runs in flight) and the next reads every
#: schedule instead of naming them all to the store.
WATCH_MAX = 500


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


@dataclass(frozen=True)
class Quiet:
    """A wake with no news, as an alert look sees it: what the store said waits, and how many
    full looks (the only ones that claim what is due) the leader had begun by then."""

    waiting: Waiting
    full_looks: int


class AlertWatcher:
    """Judges the alerts of every schedule, a page per look, in a cycle over their names."""

    def __init__(self, *, store: AlertLog, settings: Settings, observer: EngineObserver,
                 monotonic: Callable[[], float] = time.monotonic,
                 every_cycle_full: bool = False) -> None:
        self.store = store
        self.settings = settings
        self.observer = observer
        self._mono = monotonic
        #: With shards, runs are claimed by other replicas' leaders too: every cycle is full.
        self._every_cycle_full = every_cycle_full
        self._cursor: str | None = None
        # The cycle under way: what it reads, when it began (store clock), how many full
        # looks the leader had begun then (one begun since may have claimed what the cycle did
        # not see), and the schedules it met with runs in flight, which the next cycle reads
        # again whatever they did.
        self._scope: AlertScope | None = None
        self._began: datetime | None = None
        self._began_after = -1
        self._watching: set[str] = set()
        # What the last whole cycle left: its start, its watched names, the lease it ran
        # under, and when the last full one began (monotonic).
        self._since: datetime | None = None
        self._watched: frozenset[str] = frozenset()
        self._token: int | None = None
        self._last_full = 0.0
        self._changes_heard = True
        #: The monotonic instant of the next look.
        self.next_look = 0.0

    @property
    def cycle_done(self) -> bool:
        """Whether the next look starts again from the first schedule."""
        return self._cursor is None

    def due(self, slack: float = 0.0) -> bool:
        return self._mono() >= self.next_look - slack

    def changes_heard(self) -> None:
        """A change was announced (an edit, a manual run): the next cycle reads every
        schedule that has runs."""
        self._changes_heard = True

    def _begin_cycle(self, lease: LeaseGrant, tracked_since: datetime | None,
                     full_looks: int) -> None:
        self._began_after = full_looks
        tracked = tracked_since is not None
        if tracked and self.settings.alert_silent is not None:
            self._scope = None  # a silent window over every schedule: each may be silent now
        elif (self._every_cycle_full or self._changes_heard or self._since is None
              or lease.token != self._token or len(self._watched) > WATCH_MAX
              or self._mono() - self._last_full >= FULL_CYCLE_EVERY):
            self._scope = AlertScope(silent_own=tracked, runs_tracked=tracked)
        else:
            self._scope = AlertScope(changed_since=self._since, names=self._watched,
                                     silent_own=tracked, runs_tracked=tracked)
        if self._scope is None or self._scope.changed_since is None:
            self._last_full = self._mono()
        self._changes_heard = False  # heard from here on: for the next cycle
        self._token = lease.token
        self._began = None
        self._watching = set()

    def look(self, lease: LeaseGrant, tracked_since: datetime | None, *, full_looks: int,
             quiet: Quiet | None = None) -> list[AlertEvent]:
        """Judge one page of schedules and write what changed; returns the alerts written.
        Raises LeaseLost and StoreUnavailable; one schedule's trouble only skips it.

        ``full_looks``: how many full looks the leader has begun, this one included when the
        look ends one (after its claims). ``quiet``: the look comes in a wake with no news,
        with what the store said waits; a cycle it shows to have nothing to read is done
        without reading."""
        interval = self.settings.alert_interval.total_seconds()
        if self._cursor is None:
            began_after = self._began_after
            self._begin_cycle(lease, tracked_since, full_looks)
            if quiet is not None and self._nothing_to_read(quiet, began_after):
                self._since, self._watched = quiet.waiting.now, frozenset()
                self.next_look = self._mono() + interval
                return []
        page = self.store.alert_evidence(after=self._cursor, limit=self.settings.alert_batch,
                                         depth=ALERT_DEPTH, scope=self._scope)
        if self._began is None:
            self._began = page.now
        opened: dict[tuple[str, AlertRule], Alert] = {
            (alert.schedule_name, alert.rule): alert for alert in page.open_alerts}
        changes: list[AlertChange] = []
        for schedule, runs in page.schedules:
            tracked = self._scope is None or self._scope.runs_tracked
            if any(run_watched(run, runs_tracked=tracked) for run in runs):
                self._watching.add(schedule.name)
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
        # A silence that ended on an alert still open: tell it again (once: the store clears
        # the silence it ended, so a look repeated after a failover finds none).
        resolving = {(c.schedule_name, c.rule) for c in changes if c.action == "resolve"}
        changes.extend(reminders(page.open_alerts, page.now, resolving))
        events = self.store.record_alerts(changes, lease=lease) if changes else []
        self._cursor = page.last
        if page.last is None:  # the cycle is done: the next reads what changed since it began
            self._since, self._watched = self._began, frozenset(self._watching)
        self.next_look = self._mono() + (interval if page.last is None
                                         else min(NEXT_PAGE_PAUSE, interval))
        for event in events:
            _log(event)
        if events:
            self.observer.alerts_changed(events)
        return events

    def _nothing_to_read(self, quiet: Quiet, last_began_after: int) -> bool:
        """Whether this cycle's scope is empty: read since the last cycle began, with no claim
        since (claims are made only by a full look, and none began after that cycle did), no
        run in flight, unsettled or watched, no alert open, and no silent window to watch."""
        waiting = quiet.waiting
        scope = self._scope
        return (scope is not None and scope.changed_since is not None and not scope.names
                and not scope.silent_own and quiet.full_looks == last_began_after
                and not (waiting.unsettled or waiting.claimed or waiting.open_runs
                         or waiting.alerts_waiting))

    def safe_look(self, lease: LeaseGrant | None, tracked_since: datetime | None, *,
                  full_looks: int, quiet: Quiet | None = None) -> None:
        """:meth:`look`, for the engine: a store error other than an outage is logged and the
        look tried again at the next interval."""
        if lease is None:
            return
        try:
            self.look(lease, tracked_since, full_looks=full_looks, quiet=quiet)
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
        logger.warning("alert %s on schedule %s again (%d times): %s%s", alert.rule.value,
                       name, alert.count, alert.reason,
                       "" if event.told else " (acknowledged or silenced: not told)",
                       extra=extra)
    elif event.action == "remind":
        logger.warning("alert %s on schedule %s still open after its silence: %s",
                       alert.rule.value, name, alert.reason, extra=extra)
    else:
        logger.info("alert %s on schedule %s resolved (raised %d times since %s)",
                    alert.rule.value, name, alert.count, alert.first_at.isoformat(),
                    extra=extra)
