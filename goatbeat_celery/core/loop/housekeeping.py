"""The leader's periodic looks: pruning history, ending lost runs, judging alerts.

Each runs when its own timer is due (within ``TIMER_SLACK``), on shard 0's leader, after the
due runs were sent: a run falling due meanwhile waits for one bounded look at most.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from goatbeat_celery.core.loop.alerts import AlertWatcher, Quiet
from goatbeat_celery.core.loop.looks import TIMER_SLACK, LookLedger
from goatbeat_celery.core.loop.observer import EngineObserver
from goatbeat_celery.core.protocols import RunLog, ScheduleStore
from goatbeat_celery.core.rules.runs import RunState
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.settings import Settings

logger = logging.getLogger(__name__)

PRUNE_EVERY = 60.0
#: After a prune that found nothing to delete: history older than the retention is only
#: written as time passes, so an idle leader asks this seldom.
PRUNE_IDLE_EVERY = 600.0
#: Runs marked lost in one look at most; a full look comes back soon for the rest.
LOST_BATCH = 1000


class Housekeeping:
    """Pruning, lost runs and alerts, each on a monotonic timer of its own.

    Contract: :meth:`prune`, :meth:`mark_lost` and :meth:`look_at_alerts` do nothing until
    their timer is due; :meth:`timers` lists the instants the leader must wake for (pruning
    only while the last prune left rows to delete). Runs are judged only with a ``runs`` log,
    and not while ``open_runs`` is False (the store said no run may be lost). Runs put back to
    be sent again are announced through ``on_resent``, for the next look to send them.
    ``grant`` is the grant being dispatched under at the time of the call.
    """

    def __init__(self, *, store: ScheduleStore, runs: RunLog | None, alerts: AlertWatcher | None,
                 settings: Settings, observer: EngineObserver, looks: LookLedger,
                 grant: Callable[[], LeaseGrant | None], on_resent: Callable[[], None],
                 monotonic: Callable[[], float]) -> None:
        self.store = store
        self.runs = runs
        self.alerts = alerts
        self.settings = settings
        self.observer = observer
        self.looks = looks
        self._grant = grant
        self._on_resent = on_resent
        self._mono = monotonic
        self.next_prune = 0.0
        # Whether the last prune left rows to delete: only then does pruning wake the leader;
        # else it waits for a wake at hand (no promise is made of when history goes).
        self.prune_left_rows = False
        self.next_lost_look = 0.0
        #: Whether a run the leader may have to mark lost may be in the store; false only
        #: while the store says none is (Waiting.open_runs).
        self.open_runs = True
        # The fencing token whose lease began when this leader started judging runs with
        # tracking on, and that instant (core.rules.runs.lost_verdict's tracked_since).
        self._tracking_from: tuple[int, datetime] | None = None

    def all_due(self, now: datetime, quiet: Quiet | None = None) -> int:
        """Prune, end lost runs and judge alerts, each if due; returns how many runs ended."""
        self.prune(now)
        ended = self.mark_lost()
        self.look_at_alerts(quiet)
        return ended

    def timers(self) -> list[float]:
        """The monotonic instants of the looks the leader must wake for."""
        instants = [self.next_prune] if self.prune_left_rows else []
        if self.runs is not None:
            instants.append(self.next_lost_look)
        if self.alerts is not None:
            instants.append(self.alerts.next_look)
        return instants

    def prune(self, now: datetime) -> None:
        if self._mono() < self.next_prune - TIMER_SLACK:
            return
        before = now - self.settings.retention
        deleted = self.store.prune(before=before, limit=self.settings.prune_batch)
        # A full batch means more are waiting: come back soon rather than in a minute.
        self.prune_left_rows = deleted >= self.settings.prune_batch
        self.next_prune = self._mono() + (1.0 if self.prune_left_rows
                                          else PRUNE_EVERY if deleted else PRUNE_IDLE_EVERY)
        if deleted:
            logger.info("pruned %d rows of history (executions, backfills, audit entries, "
                        "outbox events) older than %s", deleted, before.isoformat(),
                        extra={"action": "pruned"})

    def mark_lost(self) -> int:
        """Once per heartbeat interval, end the runs whose worker went silent or that never
        started (core.rules.runs.lost_verdict: lost, or of unknown outcome where the workers are
        not known to track runs), so that nothing waits on them forever; returns how many."""
        if self.runs is None or self._mono() < self.next_lost_look - TIMER_SLACK:
            return 0
        settings = self.settings
        interval = settings.heartbeat_interval.total_seconds()
        if not self.open_runs:
            self.next_lost_look = self._mono() + interval
            return 0
        self._resend_unstarted(self.runs)
        ended = self.runs.mark_lost(silent_for=settings.run_lost_after,
                                    unstarted_for=settings.run_start_timeout,
                                    tracked_since=self.tracked_since(), limit=LOST_BATCH)
        self.next_lost_look = self._mono() + (1.0 if len(ended) >= LOST_BATCH else interval)
        lost = [execution for execution in ended if execution.run_state is RunState.LOST]
        if lost:
            first = lost[0]
            logger.warning("marked %d runs lost (%s: %s%s)", len(lost), first.key,
                           first.run_error, ", ..." if len(lost) > 1 else "",
                           extra={"action": "run_lost", "count": len(lost)})
        for execution in ended:
            # An unknown outcome is what every untracked run ends with: nothing to warn about.
            verdict = "lost" if execution.run_state is RunState.LOST else "unknown"
            logger.debug("run %s %s: %s", execution.key, verdict, execution.run_error,
                         extra={"action": f"run_{verdict}", "key": execution.key})
        return len(ended)

    def look_at_alerts(self, quiet: Quiet | None = None) -> None:
        """When due, judge one page of schedules' alerts (core.loop.alerts). ``quiet``: in a
        wake with no news, what the store said waits."""
        if self.alerts is not None and self.alerts.due(TIMER_SLACK):
            self.alerts.safe_look(self._grant(), self.tracked_since(),
                                  full_looks=self.looks.looks_begun, quiet=quiet)

    def _resend_unstarted(self, runs: RunLog) -> int:
        """Before judging runs lost, put back to claimed, in the leader's fenced transaction,
        the runs sent to tracking workers that none started in time and that are still within
        their deadline (core.rules.runs.resend_due). Returns how many."""
        grant = self._grant()
        tracked_since = self.tracked_since()
        # Looked for even with the setting at 0: a schedule's own run_resends may ask.
        if grant is None or tracked_since is None:
            return 0
        resent = runs.resend_unstarted(
            lease=grant, unstarted_for=self.settings.run_start_timeout,
            tracked_since=tracked_since, resends=self.settings.run_resends, limit=LOST_BATCH)
        if not resent:
            return 0
        first = resent[0]
        logger.warning("sending again %d runs no worker started (%s: %s%s)", len(resent),
                       first.key, first.last_error, ", ..." if len(resent) > 1 else "",
                       extra={"action": "run_resent", "count": len(resent)})
        self.observer.runs_resent(resent)
        self._on_resent()
        return len(resent)

    def tracked_since(self) -> datetime | None:
        """From when this leader knows the workers track runs (None: it does not): the start
        of its lease, so that a run sent before, perhaps by a leader whose workers did not
        track runs, is never judged lost for the report it was not going to get."""
        grant = self._grant()
        if not self.settings.track_runs or grant is None:
            return None
        if self._tracking_from is None or self._tracking_from[0] != grant.token:
            # The first grant of a token seen here was taken (or renewed) a ttl before it
            # expires: its start, or later, which only spares more runs.
            self._tracking_from = (grant.token, grant.expires_at - self.settings.lease_ttl)
        return self._tracking_from[1]
