"""Planning: what claim moves a due schedule on, or why it is set aside.

The leader plans each due row on its own (a schedule is its own failure domain): the row must
be runnable (undamaged, valid, its task allowed), then its trigger, misfire policy, bounds,
exclusion calendars and ``max_runs`` decide the occurrences claimed and where the schedule
goes next. Nothing here writes: the engine claims what is planned, the backfill driver uses the
same runnable check for its steps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from goatbeat_celery.core.loop.observer import EngineObserver
from goatbeat_celery.core.loop.trigger_cache import TriggerCache
from goatbeat_celery.core.protocols import CalendarStore
from goatbeat_celery.core.rules.allowlist import sending_problems
from goatbeat_celery.core.rules.calendars import Calendar, resolve
from goatbeat_celery.core.rules.controls import bound_claim
from goatbeat_celery.core.rules.defaults import own_or_default
from goatbeat_celery.core.rules.misfire import first_occurrence, given_up_reason, plan_misfires
from goatbeat_celery.core.rules.policies import GridAfter, ScheduleMode
from goatbeat_celery.core.rules.settlement import claim_policies, fixed_delay_claim
from goatbeat_celery.core.rules.triggers import Trigger
from goatbeat_celery.core.types.claims import PlannedClaim
from goatbeat_celery.core.types.errors import ConfigurationError, failure_reason
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.set_aside import SetAside
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSpec, quoted_name

logger = logging.getLogger(__name__)


class Planner:
    """Plans the claims of one replica's due schedules."""

    def __init__(
        self,
        *,
        store: CalendarStore,
        settings: Settings,
        triggers: TriggerCache,
        observer: EngineObserver,
        config_schedules: Sequence[ScheduleSpec],
        task_allowed: Callable[[str], bool],
    ) -> None:
        self.store = store
        self.settings = settings
        self.triggers = triggers
        self.observer = observer
        # A config row is trusted (sent without the allow-list) only while it is exactly one of
        # this replica's entries: writing source='config' into a row must not make it so.
        self._config_specs = {spec.name: spec for spec in config_schedules}
        self._config_hashes: dict[str, str] = {}
        # Bound once: planning asks for every due row.
        self._own_entry = self._is_own_entry
        # Rows written through the API (or by SQL) may only send allowed tasks.
        self._task_allowed = task_allowed

    def calendars_of(self, schedules: Sequence[Schedule]) -> Mapping[str, Calendar]:
        """The calendars the due ``schedules`` observe, read afresh for each batch: one small
        read, only for batches that need it, so an edit applies at the next planning on every
        replica without a cache to invalidate."""
        names: set[str] = set()
        for schedule in schedules:
            observed = schedule.spec.calendars
            if observed:  # most observe none
                names.update(observed)
        return self.store.find_calendars(names) if names else {}

    def plan(self, schedule: Schedule, now: datetime,
             calendars: Mapping[str, Calendar] | None = None) -> PlannedClaim | SetAside:
        """The claim for one due schedule, or, whatever goes wrong with this one row, the
        record that sets it aside: a schedule is its own failure domain."""
        try:
            return self._plan_claim(schedule, now, calendars or {})
        except Exception as exc:
            # A version that could not be read (stand-in -1) cannot be compared: set aside
            # whatever the version.
            version = schedule.row_version if schedule.row_version >= 0 else None
            return SetAside(schedule_name=schedule.name, version=version,
                            reason=failure_reason(exc))

    def runnable_trigger(self, schedule: Schedule) -> Trigger:
        """The trigger of a schedule that may run as stored: its row undamaged and valid, its
        task one it may send. Raises ConfigurationError saying why not."""
        spec = schedule.spec
        problems = list(schedule.damage) or spec.problems(payload=False)
        if problems:
            raise ConfigurationError(problems, subject="schedule")
        refusals = sending_problems(spec, self._task_allowed, self._own_entry)
        if refusals:
            raise ConfigurationError(refusals)
        return self.triggers.get(spec.trigger)

    def grid_after(self, schedule: Schedule) -> GridAfter:
        """The schedule's first occurrence, and run, after an instant."""
        trigger = self.triggers.get(schedule.spec.trigger)
        offset = schedule.spec.effective_offset()
        return lambda instant: first_occurrence(trigger, instant, offset)

    def _plan_claim(self, schedule: Schedule, now: datetime,
                    calendars: Mapping[str, Calendar]) -> PlannedClaim:
        spec = schedule.spec
        # Resolved first: a calendar missing or unreadable sets the schedule aside before it
        # could run on a day it should not.
        exclusions = resolve(spec, calendars) if spec.calendars else None
        claim = self._unbounded_claim(schedule, now)
        if (spec.start_at is not None or spec.end_at is not None
                or schedule.paused_until is not None):
            bounded = bound_claim(claim, schedule, self.grid_after(schedule))
            if bounded.next_run_at is None and claim.next_run_at is not None:
                logger.info("schedule %s ends: its next run would fall after its end_at %s",
                            quoted_name(spec.name), _iso(spec.end_at),
                            extra={"action": "schedule_ended"})
            claim = bounded
        if exclusions is not None:
            claim = exclusions.exclude(claim)
        if spec.max_runs is not None:
            # Checked and counted by the store, in the claim's transaction.
            claim = replace(claim, max_runs=spec.max_runs)
            runs = len(claim.occurrences) - len(claim.excluded)
            if schedule.total_runs + runs >= spec.max_runs:
                logger.info("schedule %s ends: this claim reaches its max_runs (%d)",
                            quoted_name(spec.name), spec.max_runs,
                            extra={"action": "schedule_ended"})
        return claim

    def _unbounded_claim(self, schedule: Schedule, now: datetime) -> PlannedClaim:
        spec = schedule.spec
        settings = self.settings
        trigger = self.runnable_trigger(schedule)
        offset = spec.effective_offset()
        first = schedule.next_occurrence_at
        if first is None:
            # Due without a next occurrence (a row edited by hand): start again from now.
            occurrence, run = first_occurrence(trigger, now, offset)
            logger.warning("schedule %s had no next occurrence; starting again at %s",
                           quoted_name(spec.name), None if run is None else run.isoformat(),
                           extra={"action": "restarted"})
            return PlannedClaim(schedule_name=spec.name, version=schedule.row_version,
                                occurrences=(), missed=0, next_occurrence_at=occurrence,
                                next_run_at=run)
        expires_after = own_or_default(spec.starting_deadline, settings.starting_deadline)
        if spec.mode is ScheduleMode.FIXED_DELAY:
            return fixed_delay_claim(schedule, now, expires_after=expires_after,
                                     default_overlap=settings.overlap_policy)
        policy = own_or_default(spec.misfire_policy, settings.misfire_policy)
        grace = own_or_default(spec.misfire_grace, settings.misfire_grace)
        plan = plan_misfires(
            trigger=trigger,
            first=first,
            now=now,
            offset=offset,
            policy=policy,
            grace=grace,
            max_catchup=own_or_default(spec.max_catchup, settings.max_catchup),
        )
        if plan.missed:
            logger.warning("schedule %s missed %d occurrences (policy %s)", quoted_name(spec.name),
                           plan.missed, policy.value, extra={"action": "missed"})
            self.observer.missed(spec.name, plan.missed)
        upcoming = plan.next_occurrence
        points: tuple[datetime, ...] = plan.run
        excluded: tuple[tuple[datetime, str], ...] = ()
        if plan.given_up is not None:
            # Recorded, never sent: the history shows what was missed, and the alert is
            # raised now rather than at the next run, which may be a day away.
            points = (plan.given_up,)
            excluded = ((plan.given_up, given_up_reason(plan.missed, policy, grace)),)
        return PlannedClaim(
            schedule_name=spec.name,
            version=schedule.row_version,
            occurrences=tuple([(point, point + offset) for point in points]),
            excluded=excluded,
            missed=plan.missed,
            next_occurrence_at=upcoming,
            next_run_at=None if upcoming is None else upcoming + offset,
            expires_after=expires_after,
            **claim_policies(spec, settings.overlap_policy),
        )

    def trust(self, config_schedules: Sequence[ScheduleSpec]) -> None:
        """The config entries of this replica are now ``config_schedules``."""
        self._config_specs = {spec.name: spec for spec in config_schedules}
        self._config_hashes = {}

    def _is_own_entry(self, spec: ScheduleSpec) -> bool:
        entry = self._config_specs.get(spec.name)
        if entry is None:
            return False
        if entry == replace(spec, enabled=entry.enabled):
            return True
        expected = self._config_hashes.get(spec.name)
        if expected is None:
            expected = self._config_hashes[spec.name] = entry.spec_hash()
        return spec.spec_hash() == expected


def _iso(instant: datetime | None) -> str | None:
    return None if instant is None else instant.isoformat()
