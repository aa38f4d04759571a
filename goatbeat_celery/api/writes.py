"""Changing schedules: create, update, pause, resume, delete and run now, each a
compare-and-set on the row with its audit entry in the same transaction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from goatbeat_celery import spec_input
from goatbeat_celery.api.arguments import (
    _check_reason,
    _lookup_problems,
    _note_problems,
    _schedule_name,
)
from goatbeat_celery.api.base import SchedulesBase
from goatbeat_celery.api.preconditions import _check_spec_version, _require_repair
from goatbeat_celery.core.rules.audit import audit_value, reason_problems, spec_changes
from goatbeat_celery.core.rules.policies import OverlapPolicy, ScheduleMode
from goatbeat_celery.core.rules.validation import (
    instant_problem,
)
from goatbeat_celery.core.types.audit import AuditAction, FieldChange
from goatbeat_celery.core.types.errors import ConfigurationError, ScheduleConflict
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.instants import Duration, ensure_aware
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.schedule import PauseNote, Schedule
from goatbeat_celery.core.types.spec import MisfirePolicy, TriggerSpec, quoted_name

#: Fields whose change moves the next run (recomputed from now, within the bounds).
_RESCHEDULING = ("start_at", "end_at", "max_runs")

#: Times an API write is redone when the leader's bookkeeping wrote the row between its read
#: and its write: each try is a few milliseconds, and the leader writes a row at most once
#: per run and per report, so a second try nearly always lands.
REWRITE_ATTEMPTS = 5


class ScheduleWrites(SchedulesBase):
    """The changes of a schedule."""

    def create(
        self, name: str, task: str, *, every: Duration | None = None, cron: str | None = None,
        at: datetime | str | None = None, timezone: str | None = None,
        rrule: str | None = None, solar: Any = None, args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None, options: dict[str, Any] | None = None,
        misfire_policy: MisfirePolicy | str | None = None, misfire_grace: Duration | None = None,
        max_catchup: int | None = None, offset: Duration | None = None,
        jitter: Duration | None = None, starting_deadline: Duration | None = None,
        enabled: bool = True, day_or: bool = True,
        overlap: OverlapPolicy | str | None = None,
        mode: ScheduleMode | str = ScheduleMode.FIXED_RATE,
        failure_backoff: Duration | None = None, failure_backoff_factor: float | None = None,
        failure_backoff_max: Duration | None = None, pause_after_failures: int | None = None,
        run_resends: int | None = None,
        start_at: datetime | str | None = None, end_at: datetime | str | None = None,
        max_runs: int | None = None, description: str | None = None,
        tags: list[str] | tuple[str, ...] = (),
        calendars: list[str] | tuple[str, ...] = (),
        alert_late: Duration | None = None, alert_failures: int | None = None,
        max_runtime: Duration | None = None, alert_silent: Duration | None = None,
        alert_missed: int | None = None, alert_lost: int | None = None,
        rotate: list[str] | tuple[str, ...] = (), rotate_handover: bool = False,
        reason: str | None = None,
    ) -> Schedule:
        """Store a new schedule. Give exactly one of ``every`` (seconds or timedelta), ``cron``
        (5 fields, in ``timezone``) or ``at`` (an aware instant; ``at``, ``start_at`` and
        ``end_at`` may be ISO-8601 text with an offset too). A cron restricting both day of
        month and day of week matches either (standard cron); ``day_or=False`` asks for both, as
        Celery's ``crontab`` does. Or ``rrule``, an RFC 5545 recurrence rule read in
        ``timezone`` (``"FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0"``; without a
        ``DTSTART`` it counts from midnight of today there, stored with it), or ``solar``, a
        Celery solar event at a place (``{"event": "sunrise", "latitude": 48.85,
        "longitude": 2.35}`` or those three in order; needs ephem). Every problem is reported at
        once and nothing is stored.

        The run policies (they need run tracking, see ``docs/run-tracking.md``): ``overlap``
        (``allow``, ``skip``, ``buffer_one``; None: the global ``goatbeat_overlap_policy``),
        ``mode="fixed_delay"`` (with ``every``: the next run ``every`` after the previous one
        finished), ``failure_backoff`` (the pause after a failed run, times
        ``failure_backoff_factor`` (2) for each further failure in a row, at most
        ``failure_backoff_max``), ``pause_after_failures`` (the schedule pauses itself after
        that many failed runs in a row, until resumed) and ``run_resends`` (how many times a
        run no worker started is sent again, 0 to 10; None: the global
        ``goatbeat_run_resends``).

        The controls (``docs/controls.md``): no run due before ``start_at`` or after
        ``end_at`` (aware datetimes), at most ``max_runs`` runs (manual runs do not count),
        a free ``description`` and ``tags`` (short labels to filter :meth:`list` by), and
        the exclusion ``calendars`` it observes (by name; see :meth:`create_calendar`).

        The alert thresholds (``docs/alerts.md``; None: the settings ``goatbeat_alert_late``,
        ``goatbeat_alert_failures``, ``goatbeat_max_runtime``, ``goatbeat_alert_silent``,
        ``goatbeat_alert_missed``, ``goatbeat_alert_lost``): ``alert_late`` (a run sent this
        late), ``alert_failures`` (failed runs in a row), ``max_runtime`` (a run still running
        this long), ``alert_silent`` (no success this long), ``alert_missed`` (occurrences in a
        row that did not run; 0: never) and ``alert_lost`` (runs lost since the last success;
        0: never).

        Rotation across clusters (``docs/scheduling.md``): ``rotate`` names the queues
        occurrence k goes to by k mod N (at least two; not beside an ``options`` queue), and
        ``rotate_handover`` sends an occurrence whose queue nobody consumes to the next one
        somebody does.

        ``reason``: why, for the audit log (every method that changes a schedule takes it)."""
        problems: list[Problem] = reason_problems(reason)
        # One reading of the store's clock for the checks and the first run alike.
        now = self.store.now()
        trigger = spec_input.trigger_spec(every, cron, at, timezone, problems,
                                     default_zone=self.default_timezone, day_or=day_or,
                                     rrule=rrule, solar=solar, now=now)
        spec = self._spec(
            problems, name=name, task=task, trigger=trigger, now=now, at_given=at is not None,
            args=args,
            kwargs={} if kwargs is None else kwargs, options={} if options is None else options,
            misfire_policy=misfire_policy, misfire_grace=misfire_grace,
            max_catchup=max_catchup, offset=offset, jitter=jitter,
            starting_deadline=starting_deadline, enabled=enabled, overlap=overlap, mode=mode,
            failure_backoff=failure_backoff, failure_backoff_factor=failure_backoff_factor,
            failure_backoff_max=failure_backoff_max, pause_after_failures=pause_after_failures,
            run_resends=run_resends, start_at=start_at, end_at=end_at, max_runs=max_runs,
            description=description, tags=tags, calendars=calendars, alert_late=alert_late,
            alert_failures=alert_failures, max_runtime=max_runtime, alert_silent=alert_silent,
            alert_missed=alert_missed, alert_lost=alert_lost, rotate=rotate,
            rotate_handover=rotate_handover,
        )
        occurrence, run = self._first(spec, now=now) if spec.enabled else (None, None)
        return self.store.create_schedule(
            spec, next_occurrence_at=occurrence, next_run_at=run,
            audit=self._note(AuditAction.CREATE, reason, spec_changes(None, spec)))

    def update(self, name: str, *, every: Duration | None = None, cron: str | None = None,
               at: datetime | str | None = None, timezone: str | None = None,
               rrule: str | None = None, solar: Any = None,
               enabled: bool | None = None, day_or: bool | None = None,
               expected_version: int | None = None, reason: str | None = None,
               **changes: Any) -> Schedule:
        """Change some fields of a schedule (the same keywords as :meth:`create`).

        A changed trigger, offset, ``start_at``, ``end_at`` or ``max_runs`` reschedules it from
        now (within its bounds, after a pause with an end, which an edit keeps), and so does
        ``enabled=True`` on a paused schedule (as :meth:`resume`); other changes keep its next
        run. ``expected_version`` is the definition's version (``Schedule.version``) the
        caller showed to whoever asked for the change, as a form does: when another edit of the
        definition came since, ScheduleConflict says so instead of overwriting it; without it,
        so does another edit made between this method's read and its write. The schedule's own
        runs and pauses never count as such an edit.
        """
        _check_reason(reason, name)
        return self._rewrite(name, lambda current: self._updated(
            current, every=every, cron=cron, at=at, timezone=timezone, enabled=enabled,
            day_or=day_or, changes=changes, reason=reason, rrule=rrule, solar=solar),
            expected_version, pin=True)

    def _rewrite(self, name: str, write: Callable[[Schedule], Schedule],
                 expected_spec_version: int | None = None, *, pin: bool = False) -> Schedule:
        """Read the schedule and ``write`` what follows from it, as one compare-and-set on the
        row; when the leader's bookkeeping (a claim, a run's report) wrote the row in between,
        read it again and redo the step, up to :data:`REWRITE_ATTEMPTS` times. Only a change of
        the definition the caller did not see is a conflict: one since
        ``expected_spec_version``, or with ``pin``, one since the first read here."""
        for attempt in range(1, REWRITE_ATTEMPTS + 1):
            current = self.store.get_schedule(_schedule_name(name))
            if pin and expected_spec_version is None:
                expected_spec_version = current.version
            _check_spec_version(current, expected_spec_version)
            try:
                return write(current)
            except ScheduleConflict:
                if attempt == REWRITE_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _updated(self, current: Schedule, *, every: Duration | None, cron: str | None,
                 at: datetime | str | None, timezone: str | None, enabled: bool | None,
                 day_or: bool | None, changes: dict[str, Any],
                 reason: str | None = None, rrule: str | None = None,
                 solar: Any = None, trigger_spec: TriggerSpec | None = None,
                 action: AuditAction = AuditAction.EDIT,
                 noted: dict[str, FieldChange] | None = None) -> Schedule:
        """The edit of ``current``; ``trigger_spec``: a stored trigger to set as it is (a
        revert's), ``action`` and ``noted`` what the audit entry says beside the fields."""
        name = current.name
        problems: list[Problem] = []
        # One reading of the store's clock for the checks and the first run alike: an `at`
        # judged ahead of one reading and placed from a later one may have passed in between,
        # stored with no run at all.
        now = self.store.now()
        given = {key for key, value in (("every", every), ("cron", cron), ("at", at),
                                        ("rrule", rrule), ("solar", solar))
                 if value is not None} | set(changes)
        _require_repair(current, given)
        unknown = sorted(set(changes) - set(spec_input.SPEC_FIELDS))
        if unknown:
            problems.append(Problem(
                ", ".join(unknown), "unknown field",
                "use: " + ", ".join((*spec_input.TRIGGER_KEYWORDS, "timezone",
                                     *spec_input.SPEC_FIELDS))))
        trigger = current.spec.trigger if trigger_spec is None else trigger_spec
        if any(v is not None for v in (every, cron, at, timezone, day_or, rrule, solar)):
            current_cron = trigger.kind == "cron"
            current_rrule = trigger.kind == "rrule" and day_or is None
            new_trigger = any(v is not None for v in (every, cron, at, rrule, solar))
            if not new_trigger:
                cron = str(trigger.params.get("expression")) if current_cron else None
                rrule = str(trigger.params.get("rule")) if current_rrule else None
            if timezone is None and current_cron and cron is not None:
                timezone = str(trigger.params.get("timezone"))
            if timezone is None and current_rrule and rrule is not None:
                timezone = str(trigger.params.get("timezone"))
            if day_or is None:
                day_or = bool(trigger.params.get("day_or", True)) if current_cron else True
            if every is None and cron is None and at is None and rrule is None \
                    and solar is None:
                # Only a zone or day_or, for a schedule that has no use for them.
                problems.append(spec_input.ZONE_WITHOUT_CRON if timezone is not None
                                else spec_input.DAY_OR_WITHOUT_CRON)
            else:
                trigger = spec_input.trigger_spec(
                    every, cron, at, timezone, problems, default_zone=self.default_timezone,
                    day_or=day_or, rrule=rrule, solar=solar, now=now) or trigger
        fields = {key: getattr(current.spec, key) for key in spec_input.SPEC_FIELDS}
        fields.update({k: v for k, v in changes.items() if k in spec_input.SPEC_FIELDS})
        wanted = current.spec.enabled if enabled is None else enabled
        # A form sends every field: its `at` equal to the stored one changes nothing, and is not
        # judged again once it has passed (the one-off ran); a new one must be still ahead.
        spec = self._spec(problems, name=name, trigger=trigger, now=now, enabled=wanted,
                          at_given=at is not None and trigger != current.spec.trigger,
                          **fields)
        # A damaged row's spec holds stand-ins: an edit equal to them still rewrites the row.
        if (not current.damage and spec.spec_hash() == current.spec.spec_hash()
                and wanted == current.spec.enabled):
            return current
        reschedule = (spec.trigger != current.spec.trigger
                      or spec.effective_offset() != current.spec.effective_offset()
                      or not current.spec.enabled
                      or any(getattr(spec, key) != getattr(current.spec, key)
                             for key in _RESCHEDULING))
        # An edit during a pause with an end keeps the pause (any other edit of an enabled
        # schedule clears a pause's note, as resume does).
        pause = None
        if spec.enabled and current.paused_at(now) and current.spec.enabled:
            pause = PauseNote(reason=current.paused_reason, until=current.paused_until)
        if reschedule and spec.enabled:
            occurrence, run = self._first(spec, None if pause is None else pause.until,
                                          runs=current.total_runs, now=now)
        else:
            occurrence, run = current.next_occurrence_at, current.next_run_at
        return self.store.replace_schedule(
            spec, next_occurrence_at=occurrence, next_run_at=run,
            expected_version=current.row_version, pause=pause,
            audit=self._note(action, reason, {**spec_changes(current.spec, spec),
                                              **(noted or {})}))

    def pause(self, name: str, *, note: str | None = None, until: datetime | None = None,
              reason: str | None = None) -> Schedule:
        """Stop a schedule from running; its history stays. ``note`` says why (shown with the
        schedule). With ``until`` (an aware instant after now) the pause ends by itself: the
        schedule stays enabled and its next run is its first occurrence at or after ``until``
        (the occurrences inside the pause never run and are not counted missed); without, it
        lasts until :meth:`resume`. The audit log's reason is ``reason``, else ``note``."""
        problems = [*_lookup_problems(name), *reason_problems(reason)]
        # One reading of the store's clock for the check and the next run alike: an `until`
        # judged ahead of one reading and placed from a later one may have passed in between,
        # its occurrence skipped.
        now = self.store.now()
        problems.extend(_note_problems(note))
        if until is not None:
            problem = instant_problem(until, "until")
            if problem is not None:
                problems.append(problem)
            else:
                until = ensure_aware(until, "until")
                if until <= now:
                    problems.append(Problem("until", f"{until.isoformat()} is not after now "
                                            f"({now.isoformat()})",
                                            "give a later instant, or resume"))
        if problems:
            raise ConfigurationError(problems, subject=f"schedule {quoted_name(name)}")
        why = note if reason is None else reason
        return self._rewrite(name, lambda current: self._paused(current, note, until, why,
                                                                now=now))

    def _paused(self, current: Schedule, note: str | None, until: datetime | None,
                reason: str | None = None, *, now: datetime) -> Schedule:
        """``current`` paused; ``now``: the store's clock as read when ``until`` was judged
        ahead of it (kept when a conflict redoes the step), so that the next run is the first
        occurrence at or after ``until``."""
        _require_repair(current, set())
        if until is None:
            if not current.spec.enabled and (note is None or note == current.paused_reason):
                return current
            pause = PauseNote(reason=(current.paused_reason if note is None
                                      and not current.spec.enabled else note))
            return self.store.replace_schedule(
                replace(current.spec, enabled=False),
                next_occurrence_at=current.next_occurrence_at,
                next_run_at=current.next_run_at, expected_version=current.row_version,
                pause=pause, audit=self._note(AuditAction.PAUSE, reason,
                                              _pause_changes(current, False, pause)))
        spec = replace(current.spec, enabled=True)
        occurrence, run = self._first(spec, until, runs=current.total_runs, now=now)
        pause = PauseNote(reason=note, until=until)
        return self.store.replace_schedule(
            spec, next_occurrence_at=occurrence, next_run_at=run,
            expected_version=current.row_version, pause=pause,
            audit=self._note(AuditAction.PAUSE, reason, _pause_changes(current, True, pause)))

    def resume(self, name: str, *, reason: str | None = None) -> Schedule:
        """Run a paused schedule again from its next occurrence after now: the occurrences
        that fell inside the pause are not run (no backlog) and not counted missed. Ends a
        pause with an end at once, too."""
        _check_reason(reason, name)
        return self._rewrite(name, lambda current: self._resumed(current, reason))

    def _resumed(self, current: Schedule, reason: str | None = None) -> Schedule:
        _require_repair(current, set())
        now = self.store.now()
        if not current.paused_at(now):
            return current
        spec = replace(current.spec, enabled=True)
        occurrence, run = self._first(spec, runs=current.total_runs, now=now)
        return self.store.replace_schedule(
            spec, next_occurrence_at=occurrence, next_run_at=run,
            expected_version=current.row_version,
            audit=self._note(AuditAction.RESUME, reason,
                             _pause_changes(current, True, PauseNote())))

    def delete(self, name: str, *, reason: str | None = None) -> None:
        """Remove a schedule; its executions and its audit log stay as history (until the
        retention prunes them)."""
        _check_reason(reason, name)
        current = self.store.get_schedule(_schedule_name(name))
        self.store.delete_schedule(name, audit=self._note(
            AuditAction.DELETE, reason, spec_changes(current.spec, None)))

    def run_now(self, name: str, *, reason: str | None = None) -> Execution:
        """Queue an extra run under its own key; the leader submits it within a second or so."""
        _check_reason(reason, name)
        schedule = self.store.get_schedule(_schedule_name(name))
        _require_repair(schedule, set())
        self._check_task(schedule.spec)
        return self.store.request_run(name, audit=self._note(AuditAction.RUN_NOW, reason))


def _pause_changes(current: Schedule, enabled: bool,
                   pause: PauseNote) -> dict[str, FieldChange]:
    """What a pause or a resume changes: ``enabled``, the pause's end and its note."""
    changes: dict[str, FieldChange] = {}
    for key, before, after in (
            ("enabled", current.spec.enabled, enabled),
            ("paused_until", current.paused_until, pause.until),
            ("paused_reason", current.paused_reason, pause.reason)):
        if before != after:
            changes[key] = (audit_value(before), audit_value(after))
    return changes
