"""Database schedules from application code or a shell: create, update, pause, resume, delete,
list, get, run now, and backfill a past range.

>>> schedules = Schedules.from_app(app)
>>> schedules.create("report", "proj.tasks.report", cron="0 7 * * mon-fri",
...                  timezone="Europe/Paris")
>>> schedules.run_now("report")

Every change is written to the audit log with who made it (``actor``: by default
``os:<user>`` of this process; :meth:`Schedules.acting_as` binds another) and why (the
``reason`` keyword of each method that changes a schedule), in the transaction of the change:
:meth:`Schedules.audit` reads it back.

Edits take effect on the leader within a second on PostgreSQL (NOTIFY wakes it); on SQLite the
leader sees them at its next wake-up (``goatbeat_max_interval``).
"""

from __future__ import annotations

import builtins
import getpass
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any, Literal, TypeVar, cast, overload

from goatbeat_celery import config as config_module
from goatbeat_celery import specs
from goatbeat_celery.core.protocols import AlertLog, ScheduleStore
from goatbeat_celery.core.rules.alerts import Alert
from goatbeat_celery.core.rules.allowlist import sending_problems
from goatbeat_celery.core.rules.audit import (
    actor_problems,
    audit_value,
    reason_problems,
    spec_changes,
    sync_notes,
)
from goatbeat_celery.core.rules.backfill import (
    MAX_BACKFILL_OCCURRENCES,
    Backfill,
    BackfillMode,
    BackfillPreview,
    BackfillRequest,
    NextAfter,
    choose_runs,
    count_occurrences,
    occurrences_between,
    request_problems,
)
from goatbeat_celery.core.rules.calendars import Calendar, calendar_of, resolve
from goatbeat_celery.core.rules.controls import (
    MAX_PREVIEW,
    bounded_first,
    past_once_problem,
    tag_filter_problems,
    upcoming_runs,
)
from goatbeat_celery.core.rules.misfire import first_occurrence
from goatbeat_celery.core.rules.policies import OverlapPolicy, ScheduleMode
from goatbeat_celery.core.rules.sync import plan_config_sync, stored_summary
from goatbeat_celery.core.rules.triggers import TriggerRegistry
from goatbeat_celery.core.rules.validation import (
    MAX_REASON_LENGTH,
    calendar_name_problems,
    calendars_problems,
    description_problem,
    instant_problem,
    limit_problem,
    name_problems,
    nul_problem,
    shown_value,
)
from goatbeat_celery.core.types.audit import AuditAction, AuditEntry, AuditNote, FieldChange
from goatbeat_celery.core.types.errors import (
    BackfillNotFound,
    CalendarNotFound,
    ConfigurationError,
    ScheduleConflict,
    ScheduleNotFound,
)
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.instants import Duration, ensure_aware
from goatbeat_celery.core.types.listing import RunOrderCursor, ScheduleCounts, ScheduleOrder
from goatbeat_celery.core.types.problems import Problem, listed
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import (
    PLAIN_FIELDS,
    MisfirePolicy,
    ScheduleSource,
    ScheduleSpec,
    SyncEntry,
    TriggerSpec,
    quoted_name,
)
from goatbeat_celery.core.types.tick import PauseNote
from goatbeat_celery.display import describe_trigger
from goatbeat_celery.tasknames import TaskSignatures

_UNSET: Any = object()
#: Fields whose change moves the next run (recomputed from now, within the bounds).
_RESCHEDULING = ("start_at", "end_at", "max_runs")


@dataclass(frozen=True, kw_only=True)
class ConfigPlan:
    """What a config sync would do now (:meth:`Schedules.config_plan`): the change it would
    make to each schedule, as its audit entry would record it (action ``create``, ``edit``,
    ``disable`` or ``delete``, and the fields before and after), the entries it would leave
    unchanged, and those it would leave alone because a schedule of that name was created
    through the API."""

    changes: tuple[tuple[str, AuditNote], ...]
    unchanged: tuple[str, ...]
    conflicts: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"changes": [{"name": name, "action": note.action.value, "reason": note.reason,
                             "changes": {key: [before, after]
                                         for key, (before, after) in note.changes.items()}}
                            for name, note in self.changes],
                "unchanged": list(self.unchanged), "conflicts": list(self.conflicts)}


class Schedules:
    """The schedules stored in goatbeat's database, with the app's settings applied.

    ``actor`` names who makes the changes in the audit log (None: ``os:<user>`` of this
    process, :func:`os_actor`); :meth:`acting_as` gives the same schedules under another.
    ``signatures``: the app's tasks, whose signatures refuse args and kwargs that do not fit
    (:meth:`from_app` gives them; without, they are not checked)."""

    def __init__(self, store: ScheduleStore, *,
                 config: config_module.GoatbeatConfig | None = None,
                 triggers: TriggerRegistry | None = None, default_timezone: str = "UTC",
                 actor: str | None = None, signatures: TaskSignatures | None = None) -> None:
        self.store = store
        self.signatures = signatures
        self.config = config or config_module.GoatbeatConfig()
        self.triggers = triggers or config_module.base_registry()
        self.default_timezone = default_timezone
        actor = os_actor() if actor is None else actor
        problems = actor_problems(actor)
        if problems:
            raise ConfigurationError(problems, subject="actor")
        self.actor = actor

    @classmethod
    def from_app(cls, app: Any, *, actor: str | None = None) -> Schedules:
        """Open the store named by ``app.conf.goatbeat_database_url``."""
        loaded = config_module.load(app, with_schedules=False)
        store = loaded.config.open_store()
        return cls(store, config=loaded.config, triggers=loaded.triggers, actor=actor,
                   default_timezone=config_module.default_timezone(app),
                   signatures=TaskSignatures(app))

    def acting_as(self, actor: str) -> Schedules:
        """The same schedules, on the same store, whose changes are recorded as made by
        ``actor`` (a token's name, ``django:<username>``, …; at most 200 printable
        characters, else ConfigurationError). Closing either closes the store."""
        return Schedules(self.store, config=self.config, triggers=self.triggers, actor=actor,
                         default_timezone=self.default_timezone, signatures=self.signatures)

    def _note(self, action: AuditAction, reason: str | None,
              changes: dict[str, FieldChange] | None = None) -> AuditNote:
        return AuditNote(action=action, actor=self.actor, reason=reason,
                         changes=changes or {})

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Schedules:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading -------------------------------------------------------------------------
    def get(self, name: str) -> Schedule:
        return self.store.get_schedule(_schedule_name(name))

    def list(self, *, enabled: bool | None = None, source: ScheduleSource | str | None = None,
             prefix: str | None = None, limit: int | None = None,
             set_aside: bool | None = None, after: str | RunOrderCursor | None = None,
             order: ScheduleOrder | str = ScheduleOrder.NAME,
             tags: builtins.list[str] | tuple[str, ...] = ()) -> builtins.list[Schedule]:
        """Schedules by name, or by next run (``order="next_run"``, those with none last);
        ``after`` pages on from the last of the previous page: its name, or by next run a
        :class:`RunOrderCursor` of its next run and name; ``tags``: only those carrying every
        one of them; ``enabled``: only those not paused (True) or paused (False), a pause with
        an end included. A bad argument raises ConfigurationError naming it and what it
        takes."""
        problems: builtins.list[Problem] = []
        wanted = None if source is None else _choice(ScheduleSource, source, "source",
                                                     "source", problems)
        chosen = _choice(ScheduleOrder, order, "order", "order", problems)
        for label, flag in (("enabled", enabled), ("set_aside", set_aside)):
            if flag is not None and not isinstance(flag, bool):
                problems.append(Problem(label, "expected true, false or None, got "
                                        f"{shown_value(flag)}"))
        if isinstance(tags, str):
            tags = (tags,)  # one tag given bare is still one tag, not its characters
        problems.extend(_text_problems(prefix, "prefix"))
        problems.extend(_limit_problems(limit, optional=True))
        problems.extend(tag_filter_problems(tags))
        problems.extend(_after_problems(after, chosen))
        if problems:
            raise ConfigurationError(problems, subject="list arguments")
        assert chosen is not None
        return self.store.list_schedules(paused=None if enabled is None else not enabled,
                                         source=wanted, prefix=prefix,
                                         limit=limit, set_aside=set_aside, after=after,
                                         order=chosen, tags=tuple(tags))

    def config_plan(self, specs: Sequence[ScheduleSpec]) -> ConfigPlan:
        """What a config sync of ``specs`` (an app's ``beat_schedule``, as
        :func:`goatbeat_celery.config.synced_schedules` reads it) would change in the database
        now, with this app's pruning settings; decided by the rule config sync applies
        (:func:`~goatbeat_celery.core.rules.sync.plan_config_sync`). Reads only."""
        now = self.store.now()
        wanted = {spec.name for spec in specs}
        stored = {schedule.name: schedule for schedule in self.store.list_schedules()
                  if schedule.name in wanted or schedule.spec.source is ScheduleSource.CONFIG}
        settings = self.config.settings
        plan = plan_config_sync(
            {name: stored_summary(schedule) for name, schedule in stored.items()},
            [SyncEntry(spec=spec, next_occurrence_at=None, next_run_at=None) for spec in specs],
            prune_before=now - settings.config_prune_grace if settings.config_prune else None)
        notes = sync_notes(plan, {name: schedule.spec for name, schedule in stored.items()})
        return ConfigPlan(changes=tuple(notes), unchanged=plan.report.unchanged,
                          conflicts=plan.report.conflicts)

    def counts(self) -> ScheduleCounts:
        """How many schedules there are, in all, paused, set aside and by source."""
        return self.store.count_schedules()

    def next_runs(self, name: str, count: int = 5) -> builtins.list[datetime]:
        """The instants (UTC) the schedule's next ``count`` runs are due, as the leader will
        send them when on time: after its offset or jitter, within ``start_at``, ``end_at``
        and a pause with an end, no more than the runs ``max_runs`` leaves, none on a date its
        calendars exclude. Empty for a paused
        or ended schedule. A fixed-delay schedule's are estimates: each run is taken to end at
        once."""
        problem = _count_problem(count)
        if problem is not None:
            raise ConfigurationError([problem])
        schedule = self.store.get_schedule(_schedule_name(name))
        _require_repair(schedule, set())
        spec = schedule.spec
        trigger = self.triggers.build(spec.trigger)
        offset = spec.effective_offset()
        exclusions = (resolve(spec, self.store.find_calendars(spec.calendars))
                      if spec.calendars else None)
        return upcoming_runs(schedule, lambda instant: first_occurrence(trigger, instant, offset),
                             count, delay=spec.delay(), exclusions=exclusions)

    def audit(self, name: str | None = None, *, limit: int = 50,
              before_id: int | None = None) -> builtins.list[AuditEntry]:
        """The audit log, newest first: the changes of the schedule ``name`` (one that exists
        or existed: a deleted schedule's entries stay until the retention prunes them), or of
        every schedule; at most ``limit`` (1 to
        :data:`~goatbeat_celery.core.rules.validation.MAX_LIMIT`); with ``before_id``, those
        older than that entry (the next page)."""
        problems = [*_text_problems(name, "name"), *_limit_problems(limit)]
        if before_id is not None and (isinstance(before_id, bool)
                                      or not isinstance(before_id, int) or before_id < 1):
            problems.append(Problem("before_id", "expected an entry's id (a positive integer), "
                                    f"got {shown_value(before_id)}"))
        if problems:
            raise ConfigurationError(problems, subject="audit arguments")
        # An id past what a database holds is past every entry.
        return self.store.audit_log(
            schedule_name=name, limit=limit,
            before_id=None if before_id is None else min(before_id, _MAX_ROW_ID))

    def history(self, name: str, *, limit: int = 20) -> builtins.list[Execution]:
        """The schedule's executions, newest first, at most ``limit`` (1 to
        :data:`~goatbeat_celery.core.rules.validation.MAX_LIMIT`)."""
        problems = _limit_problems(limit)
        if problems:
            raise ConfigurationError(problems, subject="history arguments")
        self.store.get_schedule(_schedule_name(name))  # a clear ScheduleNotFound for a typo
        return self.store.executions(schedule_name=name, limit=limit)

    def alerts(self, *, name: str | None = None, open_only: bool = False,
               limit: int = 100) -> builtins.list[Alert]:
        """Alerts (``docs/alerts.md``), open ones first then newest first: of one schedule
        with ``name``, only the open ones with ``open_only``. The leader raises and resolves
        them; nothing here changes one."""
        problems = _limit_problems(limit)
        if name is not None:
            problems += _lookup_problems(name)
        if problems:
            raise ConfigurationError(problems, subject="alerts")
        return cast(AlertLog, self.store).list_alerts(open_only=open_only, schedule_name=name,
                                                      limit=limit)

    # -- writing -------------------------------------------------------------------------
    def create(
        self, name: str, task: str, *, every: Duration | None = None, cron: str | None = None,
        at: datetime | str | None = None, timezone: str | None = None,
        args: tuple[Any, ...] = (),
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
        tags: builtins.list[str] | tuple[str, ...] = (),
        calendars: builtins.list[str] | tuple[str, ...] = (),
        alert_late: Duration | None = None, alert_failures: int | None = None,
        max_runtime: Duration | None = None, alert_silent: Duration | None = None,
        alert_missed: int | None = None, alert_lost: int | None = None,
        reason: str | None = None,
    ) -> Schedule:
        """Store a new schedule. Give exactly one of ``every`` (seconds or timedelta), ``cron``
        (5 fields, in ``timezone``) or ``at`` (an aware instant; ``at``, ``start_at`` and
        ``end_at`` may be ISO-8601 text with an offset too). A cron restricting both day of
        month and day of week matches either (standard cron); ``day_or=False`` asks for both, as
        Celery's ``crontab`` does. Every problem is reported at once and nothing is stored.

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

        ``reason``: why, for the audit log (every method that changes a schedule takes it)."""
        problems: list[Problem] = reason_problems(reason)
        trigger = specs.trigger_spec(every, cron, at, timezone, problems,
                                     default_zone=self.default_timezone, day_or=day_or)
        spec = self._spec(
            problems, name=name, task=task, trigger=trigger, at_given=at is not None, args=args,
            kwargs={} if kwargs is None else kwargs, options={} if options is None else options,
            misfire_policy=misfire_policy, misfire_grace=misfire_grace,
            max_catchup=max_catchup, offset=offset, jitter=jitter,
            starting_deadline=starting_deadline, enabled=enabled, overlap=overlap, mode=mode,
            failure_backoff=failure_backoff, failure_backoff_factor=failure_backoff_factor,
            failure_backoff_max=failure_backoff_max, pause_after_failures=pause_after_failures,
            run_resends=run_resends, start_at=start_at, end_at=end_at, max_runs=max_runs,
            description=description, tags=tags, calendars=calendars, alert_late=alert_late,
            alert_failures=alert_failures, max_runtime=max_runtime, alert_silent=alert_silent,
            alert_missed=alert_missed, alert_lost=alert_lost,
        )
        occurrence, run = self._first(spec) if spec.enabled else (None, None)
        return self.store.create_schedule(
            spec, next_occurrence_at=occurrence, next_run_at=run,
            audit=self._note(AuditAction.CREATE, reason, spec_changes(None, spec)))

    def update(self, name: str, *, every: Duration | None = None, cron: str | None = None,
               at: datetime | str | None = None, timezone: str | None = None,
               enabled: bool | None = None, day_or: bool | None = None,
               expected_version: int | None = None, reason: str | None = None,
               **changes: Any) -> Schedule:
        """Change some fields of a schedule (the same keywords as :meth:`create`).

        A changed trigger, offset, ``start_at``, ``end_at`` or ``max_runs`` reschedules it from
        now (within its bounds, after a pause with an end, which an edit keeps), and so does
        ``enabled=True`` on a paused schedule (as :meth:`resume`); other changes keep its next
        run. ``expected_version`` is the definition's version (``Schedule.spec_version``) the
        caller showed to whoever asked for the change, as a form does: when another edit of the
        definition came since, ScheduleConflict says so instead of overwriting it; without it,
        so does another edit made between this method's read and its write. The schedule's own
        runs and pauses never count as such an edit.
        """
        _check_reason(reason, name)
        return self._rewrite(name, lambda current: self._updated(
            current, every=every, cron=cron, at=at, timezone=timezone, enabled=enabled,
            day_or=day_or, changes=changes, reason=reason), expected_version, pin=True)

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
                expected_spec_version = current.spec_version
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
                 reason: str | None = None) -> Schedule:
        name = current.name
        problems: list[Problem] = []
        given = {key for key, value in (("every", every), ("cron", cron), ("at", at))
                 if value is not None} | set(changes)
        _require_repair(current, given)
        unknown = sorted(set(changes) - set(specs.SPEC_FIELDS))
        if unknown:
            problems.append(Problem(
                ", ".join(unknown), "unknown field",
                f"use: {', '.join(('every', 'cron', 'at', 'timezone', *specs.SPEC_FIELDS))}"))
        trigger = current.spec.trigger
        if any(v is not None for v in (every, cron, at, timezone, day_or)):
            current_cron = trigger.kind == "cron"
            if every is None and cron is None and at is None:
                cron = str(trigger.params.get("expression")) if current_cron else None
            if timezone is None and current_cron and cron is not None:
                timezone = str(trigger.params.get("timezone"))
            if day_or is None:
                day_or = bool(trigger.params.get("day_or", True)) if current_cron else True
            if every is None and cron is None and at is None:
                # Only a zone or day_or, for a schedule that has no use for them.
                problems.append(specs.ZONE_WITHOUT_CRON if timezone is not None
                                else specs.DAY_OR_WITHOUT_CRON)
            else:
                trigger = specs.trigger_spec(
                    every, cron, at, timezone, problems, default_zone=self.default_timezone,
                    day_or=day_or) or trigger
        fields = {key: getattr(current.spec, key) for key in specs.SPEC_FIELDS}
        fields.update({k: v for k, v in changes.items() if k in specs.SPEC_FIELDS})
        wanted = current.spec.enabled if enabled is None else enabled
        # A form sends every field: its `at` equal to the stored one changes nothing, and is not
        # judged again once it has passed (the one-off ran); a new one must be still ahead.
        spec = self._spec(problems, name=name, trigger=trigger, enabled=wanted,
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
        if spec.enabled and current.paused_at(self.store.now()) and current.spec.enabled:
            pause = PauseNote(reason=current.paused_reason, until=current.paused_until)
        if reschedule and spec.enabled:
            occurrence, run = self._first(spec, None if pause is None else pause.until,
                                          runs=current.total_runs)
        else:
            occurrence, run = current.next_occurrence_at, current.next_run_at
        return self.store.replace_schedule(
            spec, next_occurrence_at=occurrence, next_run_at=run,
            expected_version=current.version, pause=pause,
            audit=self._note(AuditAction.EDIT, reason, spec_changes(current.spec, spec)))

    def pause(self, name: str, *, note: str | None = None, until: datetime | None = None,
              reason: str | None = None) -> Schedule:
        """Stop a schedule from running; its history stays. ``note`` says why (shown with the
        schedule). With ``until`` (an aware instant after now) the pause ends by itself: the
        schedule stays enabled and its next run is its first occurrence at or after ``until``
        (the occurrences inside the pause never run and are not counted missed); without, it
        lasts until :meth:`resume`. The audit log's reason is ``reason``, else ``note``."""
        problems = [*_lookup_problems(name), *reason_problems(reason)]
        now = self.store.now()
        if note is not None:
            problem = description_problem(note, "note")
            if problem is None and len(note) > MAX_REASON_LENGTH:
                problem = Problem("note", f"{len(note)} characters",
                                  f"at most {MAX_REASON_LENGTH} are allowed")
            problems.extend([] if problem is None else [problem])
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
        return self._rewrite(name, lambda current: self._paused(current, note, until, why))

    def _paused(self, current: Schedule, note: str | None, until: datetime | None,
                reason: str | None = None) -> Schedule:
        _require_repair(current, set())
        if until is None:
            if not current.spec.enabled and (note is None or note == current.paused_reason):
                return current
            pause = PauseNote(reason=(current.paused_reason if note is None
                                      and not current.spec.enabled else note))
            return self.store.replace_schedule(
                replace(current.spec, enabled=False),
                next_occurrence_at=current.next_occurrence_at,
                next_run_at=current.next_run_at, expected_version=current.version,
                pause=pause, audit=self._note(AuditAction.PAUSE, reason,
                                              _pause_changes(current, False, pause)))
        spec = replace(current.spec, enabled=True)
        occurrence, run = self._first(spec, until, runs=current.total_runs)
        pause = PauseNote(reason=note, until=until)
        return self.store.replace_schedule(
            spec, next_occurrence_at=occurrence, next_run_at=run,
            expected_version=current.version, pause=pause,
            audit=self._note(AuditAction.PAUSE, reason, _pause_changes(current, True, pause)))

    def resume(self, name: str, *, reason: str | None = None) -> Schedule:
        """Run a paused schedule again from its next occurrence after now: the occurrences
        that fell inside the pause are not run (no backlog) and not counted missed. Ends a
        pause with an end at once, too."""
        _check_reason(reason, name)
        return self._rewrite(name, lambda current: self._resumed(current, reason))

    def _resumed(self, current: Schedule, reason: str | None = None) -> Schedule:
        _require_repair(current, set())
        if not current.paused_at(self.store.now()):
            return current
        spec = replace(current.spec, enabled=True)
        occurrence, run = self._first(spec, runs=current.total_runs)
        return self.store.replace_schedule(
            spec, next_occurrence_at=occurrence, next_run_at=run,
            expected_version=current.version,
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

    def _check_task(self, spec: ScheduleSpec) -> None:
        """Refuse a run of a task the allow-list does not cover. This process does not hold
        the replicas' beat_schedule entries, so every config row passes here; the leader
        refuses a forged one when it would send it (core.rules.allowlist)."""
        problems = sending_problems(spec, self.config.task_allowed, _any_config_row)
        if problems:
            raise ConfigurationError(problems)

    # -- backfills -----------------------------------------------------------------------
    @overload
    def backfill(self, name: str, start: datetime, end: datetime, *,
                 mode: BackfillMode | str = ..., newest_first: bool = ...,
                 per_tick: int | None = ..., dry_run: Literal[False] = ...,
                 reason: str | None = ...) -> Backfill: ...

    @overload
    def backfill(self, name: str, start: datetime, end: datetime, *,
                 mode: BackfillMode | str = ..., newest_first: bool = ...,
                 per_tick: int | None = ..., dry_run: Literal[True],
                 reason: str | None = ...) -> BackfillPreview: ...

    def backfill(self, name: str, start: datetime, end: datetime, *,
                 mode: BackfillMode | str = BackfillMode.MISSING, newest_first: bool = False,
                 per_tick: int | None = None, dry_run: bool = False,
                 reason: str | None = None) -> Backfill | BackfillPreview:
        """Run the occurrences of ``name`` in ``[start, end]`` (aware instants, ``end`` not in
        the future) that ``mode`` selects, without moving its next run: ``missing`` (no
        execution), ``failed`` (failed, lost, expired or abandoned) or ``all``. The leader
        drains the stored request ``per_tick`` occurrences a tick (None: the
        ``goatbeat_backfill_per_tick`` setting), oldest first unless ``newest_first``, after
        the live schedules. ``dry_run`` stores nothing and returns what would run."""
        problems: builtins.list[Problem] = []
        chosen = BackfillMode.read(mode, "mode", problems) or BackfillMode.MISSING
        request = BackfillRequest(schedule_name=name, start=start, end=end, mode=chosen,
                                  newest_first=newest_first, per_tick=per_tick)
        problems.extend(request_problems(replace(request, mode=chosen), self.store.now()))
        problems.extend(reason_problems(reason))
        if problems:
            raise ConfigurationError(problems, subject="backfill")
        schedule = self.store.get_schedule(_schedule_name(name))
        _require_repair(schedule, set())
        self._check_task(schedule.spec)
        start, end = ensure_aware(start, "start"), ensure_aware(end, "end")
        trigger = self.triggers.build(schedule.spec.trigger)
        total = count_occurrences(trigger.next_after, start, end)
        if total > MAX_BACKFILL_OCCURRENCES:
            raise ConfigurationError([
                f"range: more than {MAX_BACKFILL_OCCURRENCES} occurrences of "
                f"{quoted_name(name)} between {start.isoformat()} and {end.isoformat()}; "
                "split it into shorter ranges"], subject="backfill")
        request = replace(request, start=start, end=end, total=total)
        if not dry_run:
            return self.store.create_backfill(request, audit=self._note(
                AuditAction.BACKFILL, reason,
                {key: (None, audit_value(value)) for key, value in (
                    ("start", start), ("end", end), ("mode", chosen),
                    ("newest_first", newest_first), ("per_tick", per_tick),
                    ("total", total))}))
        return self._backfill_preview(request, trigger.next_after)

    def _backfill_preview(self, request: BackfillRequest,
                          next_after: NextAfter) -> BackfillPreview:
        points = occurrences_between(next_after, request.start, request.end, request.total)
        if request.newest_first:
            points.reverse()
        draft = Backfill(id=0, schedule_name=request.schedule_name, start=request.start,
                         end=request.end, mode=request.mode, total=request.total)
        runs = []
        for at in range(0, len(points), 500):
            chunk = points[at:at + 500]
            existing = self.store.occurrence_executions(request.schedule_name, min(chunk),
                                                        max(chunk))
            runs.extend(choose_runs(draft, chunk, existing, backfill_id="new"))
        return BackfillPreview(schedule_name=request.schedule_name, start=request.start,
                               end=request.end, mode=request.mode,
                               newest_first=request.newest_first, total=request.total,
                               runs=tuple(runs))

    def backfills(self, *, name: str | None = None, active: bool | None = None,
                  limit: int = 100) -> builtins.list[Backfill]:
        """Backfills, newest first: of one schedule, only active or only finished ones; at most
        ``limit`` (1 to :data:`~goatbeat_celery.core.rules.validation.MAX_LIMIT`)."""
        problems = [*_text_problems(name, "name"), *_limit_problems(limit)]
        if active is not None and not isinstance(active, bool):
            problems.append(Problem("active",
                                    f"expected true, false or None, got {shown_value(active)}"))
        if problems:
            raise ConfigurationError(problems, subject="backfills arguments")
        return self.store.list_backfills(schedule_name=name, active=active, limit=limit)

    def get_backfill(self, backfill_id: int) -> Backfill:
        """One backfill and its progress. Raises BackfillNotFound."""
        return self.store.get_backfill(_backfill_id(backfill_id))

    def cancel_backfill(self, backfill_id: int, *, reason: str | None = None) -> Backfill:
        """Stop a backfill: nothing more is claimed for it; what it claimed already is sent."""
        _check_reason(reason, f"backfill {backfill_id}")
        return self.store.cancel_backfill(_backfill_id(backfill_id), audit=self._note(
            AuditAction.CANCEL_BACKFILL, reason,
            {"backfill": (backfill_id, backfill_id), "state": ("active", "cancelled")}))

    # -- exclusion calendars -------------------------------------------------------------
    def get_calendar(self, name: str) -> Calendar:
        return self.store.get_calendar(_calendar_name(name))

    def observing(self, calendar: str) -> builtins.list[str]:
        """The names of the schedules observing ``calendar`` (CalendarNotFound for a typo)."""
        self.store.get_calendar(_calendar_name(calendar))
        return self.store.schedules_observing(calendar)

    def list_calendars(self) -> builtins.list[Calendar]:
        """Every calendar, by name."""
        return self.store.list_calendars()

    def create_calendar(self, name: str, *, dates: Iterable[date | str] = (),
                        ranges: Iterable[object] = (),
                        description: str | None = None) -> Calendar:
        """Store a new calendar of excluded ``dates`` (``date`` objects or ``"YYYY-MM-DD"``)
        and ``ranges`` (``(first, last)`` pairs, ``{"from": …, "to": …}`` or
        ``"YYYY-MM-DD..YYYY-MM-DD"``, both ends included): the schedules observing it do not
        run on those dates, read in each schedule's zone (``docs/controls.md``). Every problem
        is reported at once and nothing is stored."""
        calendar = calendar_of(name, dates, ranges, description)
        return self.store.create_calendar(calendar)

    def update_calendar(self, name: str, *, dates: Iterable[date | str] | None = None,
                        ranges: Iterable[object] | None = None,
                        description: str | None = _UNSET,
                        expected_version: int | None = None) -> Calendar:
        """Replace a calendar's ``dates``, ``ranges`` or ``description`` (those given). The
        leader reads calendars each time it plans, so the change applies at its next planning.
        A compare-and-set on the version read here, or on ``expected_version``."""
        current = self.store.get_calendar(_calendar_name(name))
        _check_version(f"calendar {name!r}", current.version, expected_version)
        if current.damage and (dates is None or ranges is None):
            raise ConfigurationError(
                [*current.damage, f"calendar {name!r} cannot be read as stored; give both "
                                  "dates and ranges anew, or delete it"],
                subject=f"calendar {name!r}")
        calendar = calendar_of(
            name, current.dates if dates is None else dates,
            current.ranges if ranges is None else ranges,
            current.description if description is _UNSET else description)
        if (not current.damage and calendar.entries() == current.entries()
                and calendar.description == current.description):
            return current
        return self.store.replace_calendar(calendar, expected_version=current.version)

    def delete_calendar(self, name: str) -> None:
        """Delete a calendar. Refused (CalendarInUse, naming them) while schedules observe it:
        removing it from them first is a decision about their runs, not a side effect."""
        self.store.delete_calendar(_calendar_name(name))

    # -- helpers -------------------------------------------------------------------------
    def _first(self, spec: ScheduleSpec, paused_until: datetime | None = None, *,
               runs: int = 0) -> tuple[datetime | None, datetime | None]:
        """Where ``spec`` starts from now: within its bounds, after a pause until
        ``paused_until``, and nowhere once its ``max_runs`` are used up by the ``runs`` it
        made (the claim checks it again, against the count it locks)."""
        if spec.max_runs is not None and runs >= spec.max_runs:
            return None, None
        trigger = self.triggers.build(spec.trigger)
        offset = spec.effective_offset()
        return bounded_first(lambda instant: first_occurrence(trigger, instant, offset),
                             self.store.now(), spec, paused_until)

    def _missing_calendars(self, names: tuple[str, ...]) -> builtins.list[Problem]:
        """A problem for each calendar named that does not exist (names checked first)."""
        if not names or calendars_problems(names):
            return []
        found = self.store.find_calendars(names)
        return [Problem("calendars", f"no calendar named {name!r}",
                        "create it first (create_calendar, or celery goatbeat calendar add)")
                for name in names if name not in found]

    def _spec(self, problems: builtins.list[Problem], *, trigger: TriggerSpec | None,
              at_given: bool = False, **values: Any) -> ScheduleSpec:
        """The spec of ``values``, or ConfigurationError listing every problem (with those
        already in ``problems``). ``at_given``: the ``at`` of a one-time ``trigger`` was given
        by this call, and is refused unless it is still ahead."""
        name, enabled = values.pop("name"), values.pop("enabled")
        # ISO-8601 text is read as an instant too, as a JSON document gives one.
        fields = specs.spec_fields(values, problems, text_instants=True)
        spec = specs.checked_spec(fields, problems, name=name, trigger=trigger,
                                  enabled=enabled, source=ScheduleSource.API)
        if at_given and trigger is not None and trigger.kind == "once":
            problems.extend(listed(past_once_problem(spec, self.store.now())))
        problems.extend(self._missing_calendars(spec.calendars))
        if isinstance(spec.task, str) and not self.config.task_allowed(spec.task):
            problems.append(Problem("task", f"{spec.task!r} is not in goatbeat_allowed_tasks "
                                    f"({', '.join(self.config.allowed_tasks or ())})",
                                    "add it there"))
        if self.signatures is not None and not any(p.root in ("args", "kwargs") for p in problems):
            problems.extend(self.signatures.problems(spec.task, spec.args, spec.kwargs))
        if problems:
            raise ConfigurationError(problems, subject=f"schedule {quoted_name(name)}")
        return spec


#: Which arguments of :meth:`Schedules.update` rewrite each column a damaged row may name.
_REPAIRED_BY = {
    "trigger": {"every", "cron", "at"},
    **{field.column: {field.name} for field in PLAIN_FIELDS},
    **{field: {field} for field in ("task", "args", "kwargs", "options", "misfire_policy",
                                    "overlap", "mode", "start_at", "end_at", "description",
                                    "tags", "calendars")},
}


def os_actor() -> str:
    """``os:<user>``: the actor of the changes this process makes when none is named."""
    try:
        user = getpass.getuser()
    except Exception:  # no user name in the environment nor the password database
        user = "unknown"
    return f"os:{user}"


def _check_reason(reason: object, subject: str) -> None:
    problems = reason_problems(reason)
    if problems:
        raise ConfigurationError(problems, subject=f"schedule {quoted_name(subject)}")


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


def _schedule_name(name: str) -> str:
    """``name``, to look a schedule up by; ConfigurationError for one that is not a string (a
    database would fail comparing it with a text column, or match another name: ``0`` and
    ``'0'``), ScheduleNotFound for one that no stored schedule can have (a NUL, which no
    database column holds: sent to one, it fails there)."""
    problems = _lookup_problems(name)
    if problems:
        raise ConfigurationError(problems, subject=f"schedule {quoted_name(name)}")
    if nul_problem(name, "name") is not None:
        raise ScheduleNotFound(name)
    return name


def _lookup_problems(name: object) -> builtins.list[Problem]:
    """The problem of a schedule name given to look one up by: only its type. Its other rules
    are judged when a schedule is stored: a row written by hand may break them and is still
    looked up by its name."""
    return [] if isinstance(name, str) else name_problems(name)


#: The largest id a store can hold (a 64-bit integer): of a backfill, of an audit entry.
_MAX_ROW_ID = _MAX_BACKFILL_ID = 2**63 - 1


def _backfill_id(backfill_id: int) -> int:
    """``backfill_id``, to look a backfill up by; BackfillNotFound for what no backfill can
    have (not an integer from 1 to the largest a database holds)."""
    if (isinstance(backfill_id, bool) or not isinstance(backfill_id, int)
            or not 1 <= backfill_id <= _MAX_BACKFILL_ID):
        raise BackfillNotFound(backfill_id)
    return backfill_id


def _calendar_name(name: str) -> str:
    """``name``, to look a calendar up by; ConfigurationError for one that is not a string (as
    for a schedule's), CalendarNotFound for one holding a NUL."""
    if not isinstance(name, str):
        raise ConfigurationError(calendar_name_problems(name), subject=f"calendar {name!r}")
    if nul_problem(name, "name") is not None:
        raise CalendarNotFound(name)
    return name


def _text_problems(value: object, label: str, *, optional: bool = True
                   ) -> builtins.list[Problem]:
    """Problems of text to filter by: a string (or None when ``optional``) without NUL."""
    if value is None and optional:
        return []
    if not isinstance(value, str):
        return [Problem(label, f"expected text, got {shown_value(value)}")]
    return listed(nul_problem(value, label))


def _limit_problems(limit: object, *, optional: bool = False) -> builtins.list[Problem]:
    return listed(limit_problem(limit, "limit", optional=optional))


def _after_problems(after: object, order: ScheduleOrder | None) -> builtins.list[Problem]:
    """Problems of where a page of :meth:`Schedules.list` starts: the last name seen, or by
    next run a :class:`RunOrderCursor`."""
    if after is None or order is None:
        return []
    if order is ScheduleOrder.NEXT_RUN:
        if not isinstance(after, RunOrderCursor):
            return [Problem("after", "schedules listed by next_run page on from a "
                            f"RunOrderCursor, got {shown_value(after)}")]
        found = _text_problems(after.name, "after.name", optional=False)
        at = after.next_run_at
        if at is not None and (not isinstance(at, datetime) or at.utcoffset() is None):
            found.append(Problem("after.next_run_at", "expected an aware datetime or None, "
                                 f"got {shown_value(at)}"))
        return found
    if not isinstance(after, str):
        return [Problem("after", "schedules listed by name page on from the last name seen, "
                        f"got {shown_value(after)}")]
    return listed(nul_problem(after, "after"))


_E = TypeVar("_E", ScheduleSource, ScheduleOrder)


def _choice(kind: type[_E], value: object, label: str, noun: str,
            problems: builtins.list[Problem]) -> _E | None:
    """``value`` as a member of ``kind``; None, with a problem naming ``label`` and the
    members, for anything else."""
    try:
        return kind(value)
    except (ValueError, TypeError):
        choices = ", ".join(member.value for member in kind)
        problems.append(Problem(label, f"unknown {noun} {shown_value(value)}",
                                f"use one of: {choices}"))
        return None


def _count_problem(count: object) -> Problem | None:
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_PREVIEW:
        return Problem("count", f"must be an integer from 1 to {MAX_PREVIEW}, got {count!r}")
    return None


#: Times an API write is redone when the leader's bookkeeping wrote the row between its read
#: and its write: each try is a few milliseconds, and the leader writes a row at most once
#: per run and per report, so a second try nearly always lands.
REWRITE_ATTEMPTS = 5


def _any_config_row(spec: ScheduleSpec) -> bool:
    """Every config row counts as an entry here (see :meth:`Schedules._check_task`)."""
    return spec.source is ScheduleSource.CONFIG


def _require_repair(schedule: Schedule, given: set[str]) -> None:
    """Refuse a write that would store the stand-ins of a damaged row's unreadable columns in
    place of what is there: only an edit giving each of them anew (or a delete) may touch it."""
    missing = []
    for damage in schedule.damage:
        column = damage.split(":", 1)[0]
        if not _REPAIRED_BY.get(column, set()) & given:
            missing.append(damage)
    if missing:
        fixes = sorted({arg for d in missing for arg in _REPAIRED_BY.get(d.split(":", 1)[0], ())})
        how = (f"edit it giving {', '.join(fixes)} anew, or delete it" if fixes
               else "delete it and create it again")
        raise ConfigurationError(
            [*missing, f"schedule {quoted_name(schedule.name)} cannot be read as stored; {how}"],
            subject=f"schedule {quoted_name(schedule.name)}")


def _check_spec_version(current: Schedule, expected: int | None) -> None:
    """ScheduleConflict when another edit changed the definition since the caller read it at
    version ``expected`` (None: no expectation), saying what it is now."""
    if expected is None or current.spec_version == expected:
        return
    spec = current.spec
    when = "" if current.updated_at is None else f" at {current.updated_at.isoformat()}"
    raise ScheduleConflict(
        f"schedule {quoted_name(current.name)} was edited since it was read (definition "
        f"version {expected}, now {current.spec_version}{when}); it now runs {spec.task} on "
        f"{describe_trigger(spec.trigger)}: read it again and redo your change")


def _check_version(what: str, version: int, expected: int | None) -> None:
    """ScheduleConflict when ``what`` is no longer at the ``expected`` version its caller
    showed (None: no expectation)."""
    if expected is not None and version != expected:
        raise ScheduleConflict(f"{what} changed since it was read: it is at version {version}, "
                               f"not {expected}; read it again and redo the change")
