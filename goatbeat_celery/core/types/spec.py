"""What a person writes: a schedule's spec (its trigger, task, options and policies), and what a
config sync of specs reports."""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from goatbeat_celery.core.types import validation
from goatbeat_celery.core.types.alerts import MAX_ALERT_FAILURES
from goatbeat_celery.core.types.fields import FieldInfo, described, plain_fields
from goatbeat_celery.core.types.instants import UTC, JSONValue
from goatbeat_celery.core.types.policies import (
    MAX_PAUSE_AFTER,
    Choice,
    FailureBackoff,
    OverlapPolicy,
    ScheduleMode,
    backoff_problems,
)
from goatbeat_celery.core.types.problems import Problem, listed
from goatbeat_celery.core.types.quick import quick_init
from goatbeat_celery.core.types.rotation import rotation_problems
from goatbeat_celery.core.types.runs import MAX_RUN_RESENDS

#: The longest shift (``offset`` or ``jitter``) of a schedule that is not an interval.
MAX_SHIFT = validation.MAX_GRACE


class MisfirePolicy(Choice):
    """Which of a schedule's due occurrences run when it is planned late.

    ``misfire_grace`` decides whether a late occurrence may run at all: one later than the
    grace is missed under every policy. Of those within the grace:

    * ``latest`` runs the most recent one, the others coalesced into it (Celery's behaviour);
    * ``all`` runs each, at most ``max_catchup`` of them (the most recent);
    * ``skip`` runs one only when it is the only one due: a schedule that fell behind does not
      catch up.
    """

    LATEST = "latest"
    ALL = "all"
    SKIP = "skip"

    @classmethod
    def _noun(cls) -> str:
        return "policy"


class ScheduleSource(str, enum.Enum):
    """Where a schedule comes from; config sync never touches ``api`` rows."""

    CONFIG = "config"
    API = "api"


@quick_init
@dataclass(frozen=True, kw_only=True)
class TriggerSpec:
    """How a trigger is stored: a kind (``interval``, ``cron``, ``once``, …) and JSON parameters."""

    kind: str
    params: Mapping[str, JSONValue] = field(default_factory=dict)

    def to_json(self) -> dict[str, JSONValue]:
        return {"kind": self.kind, **dict(self.params)}

    @classmethod
    def from_json(cls, data: Mapping[str, JSONValue]) -> TriggerSpec:
        params = dict(data)
        kind = params.pop("kind")
        return cls(kind=str(kind), params=params)


@quick_init
@dataclass(frozen=True, kw_only=True)
class ScheduleSpec:
    """What a user declares: which task to send, when, and how to treat lateness.

    ``None`` in a misfire field means "use the global setting". ``offset`` shifts every
    occurrence by a fixed amount; ``jitter`` derives such a shift stably from the name. The
    idempotency key always uses the unshifted occurrence.
    """

    name: str
    task: str
    trigger: TriggerSpec
    args: tuple[JSONValue, ...] = ()
    kwargs: Mapping[str, JSONValue] = field(default_factory=dict)
    options: Mapping[str, JSONValue] = field(default_factory=dict)
    misfire_policy: MisfirePolicy | None = None
    misfire_grace: timedelta | None = field(default=None, metadata=described(
        kind="duration", label="misfire grace", group="lateness", default="misfire_grace",
        help="An occurrence later than this is missed (e.g. 5m)."))
    max_catchup: int | None = field(default=None, metadata=described(
        kind="count", label="max catch-up", group="lateness", default="max_catchup",
        minimum=1, help="Most missed occurrences the all policy runs."))
    offset: timedelta | None = field(default=None, metadata=described(
        kind="duration", label="offset", group="lateness",
        help="Shift every occurrence by this much (less than the interval)."))
    jitter: timedelta | None = field(default=None, metadata=described(
        kind="duration", label="jitter", group="lateness",
        help="Shift every occurrence by a stable amount below this, derived from the "
             "name."))
    #: A run not started by its due instant plus this long is dropped: the message carries it
    #: as an absolute ``expires``, and goatbeat never sends it later. None: the global setting.
    starting_deadline: timedelta | None = field(default=None, metadata=described(
        kind="duration", label="starting deadline", group="lateness",
        default="starting_deadline",
        help="Drop a run not started this long after it was due (the message expires "
             "then)."))
    #: Run policies (:mod:`goatbeat_celery.core.rules.policies`; they need run tracking to learn
    #: when a run finished): what a due occurrence does while the previous run has not finished
    #: (None: the global ``overlap_policy``), fixed rate or fixed delay (interval schedules:
    #: ``every`` is the delay), the backoff after failed runs (None: off) and the failures in a
    #: row after which the schedule pauses itself (None: never).
    overlap: OverlapPolicy | None = None
    mode: ScheduleMode = ScheduleMode.FIXED_RATE
    failure_backoff: timedelta | None = field(default=None, metadata=described(
        kind="duration", label="failure backoff", group="policies", off="turns it off",
        help="After a failed run, wait at least this long before the next, multiplied "
             "for each further failure in a row."))
    failure_backoff_factor: float | None = field(default=None, metadata=described(
        kind="factor", label="backoff factor", group="policies", minimum=1, maximum=100,
        unset="2", help="How much each further failure multiplies the backoff."))
    failure_backoff_max: timedelta | None = field(default=None, metadata=described(
        kind="duration", label="backoff cap", group="policies", help="The longest backoff."))
    pause_after_failures: int | None = field(default=None, metadata=described(
        kind="count", label="pause after failures", group="policies", minimum=1,
        off="turns it off",
        help="Pause the schedule after this many failed runs in a row, with the reason "
             "shown; resume clears it."))
    #: How many times a run of this schedule that no worker started is sent again
    #: (:func:`~goatbeat_celery.core.rules.runs.resend_due`); None: the global
    #: ``run_resends``; 0: never.
    run_resends: int | None = field(default=None, metadata=described(
        kind="count", label="resends", group="policies", default="run_resends",
        maximum=MAX_RUN_RESENDS,
        help="Send a run no worker started again this many times before it is lost "
             "(0 never)."))
    #: Alerts (:mod:`goatbeat_celery.core.rules.alerts`): raise ``late`` when a run is sent more
    #: than ``alert_late`` after it was due, ``failed`` after ``alert_failures`` failed runs in
    #: a row, ``overrun`` when a run still runs ``max_runtime`` after it started, ``silent``
    #: when no run succeeded within ``alert_silent``, ``missed`` after ``alert_missed``
    #: occurrences in a row did not run, ``lost`` after ``alert_lost`` runs lost since the last
    #: success (0: never); None: the global setting.
    alert_late: timedelta | None = field(default=None, metadata=described(
        kind="duration", label="late alert", group="alerts", default="alert_late",
        help="Raise a late alert when a run is sent more than this long after it was due."))
    alert_failures: int | None = field(default=None, metadata=described(
        kind="count", label="failures alert", group="alerts", default="alert_failures",
        minimum=1, maximum=MAX_ALERT_FAILURES,
        help="Raise a failed alert after this many failed runs in a row."))
    max_runtime: timedelta | None = field(default=None, metadata=described(
        kind="duration", label="max runtime", group="alerts", default="max_runtime",
        help="Raise an overrun alert when a run still runs this long after it started "
             "(needs run tracking)."))
    alert_silent: timedelta | None = field(default=None, metadata=described(
        kind="duration", label="silence alert", group="alerts", default="alert_silent",
        help="Raise a silent alert when no run succeeded within this long (needs run "
             "tracking)."))
    alert_missed: int | None = field(default=None, metadata=described(
        kind="count", label="missed alert", group="alerts", default="alert_missed",
        maximum=MAX_ALERT_FAILURES,
        help="Raise a missed alert after this many occurrences in a row did not run "
             "(0 never)."))
    alert_lost: int | None = field(default=None, metadata=described(
        kind="count", label="lost alert", group="alerts", default="alert_lost",
        maximum=MAX_ALERT_FAILURES,
        help="Raise a lost alert after this many runs were lost since the last success "
             "(0 never)."))
    #: Controls (:mod:`goatbeat_celery.core.rules.controls`): no run due before ``start_at`` or
    #: after ``end_at`` (aware instants, None: unbounded), at most ``max_runs`` runs in all
    #: (the schedule's ``total_runs``; manual runs do not count; None: no limit), and a free
    #: ``description`` and ``tags`` (labels to filter by) that change nothing about running.
    start_at: datetime | None = None
    end_at: datetime | None = None
    max_runs: int | None = field(default=None, metadata=described(
        kind="count", label="max runs", group="controls", minimum=1, off="removes the limit",
        help="Run at most this many times in all (run-now does not count)."))
    description: str | None = None
    tags: tuple[str, ...] = ()
    #: The exclusion calendars observed (:mod:`goatbeat_celery.core.rules.calendars`), by name: an
    #: occurrence due on one of their dates is recorded skipped instead of run.
    calendars: tuple[str, ...] = ()
    #: Rotation across clusters (:mod:`goatbeat_celery.core.rules.rotation`): occurrence k is
    #: sent to queue ``rotate[k mod N]`` (empty: no rotation, the options' queue or Celery's
    #: routing); with ``rotate_handover``, an occurrence whose queue nobody consumes goes to
    #: the next queue somebody does.
    rotate: tuple[str, ...] = ()
    rotate_handover: bool = False
    enabled: bool = True
    source: ScheduleSource = ScheduleSource.API

    def problems(self, *, payload: bool = True) -> list[Problem]:
        """Every problem with this spec, by the rules of
        :mod:`~goatbeat_celery.core.types.validation`.

        ``payload=False`` judges a spec read from a database row: it skips encoding args,
        kwargs and options as JSON (their size and faithfulness: the row's values are JSON
        already, and the engine checks every row it plans), and lets ``options.headers`` hold
        a header only Celery or goatbeat may set, which the submitter drops from rows written
        before it was refused.
        """
        found = [*validation.name_problems(self.name), *validation.task_problems(self.task)]
        if not isinstance(self.enabled, bool):
            found.append(Problem("enabled", f"expected true or false, got {self.enabled!r}"))
        every = self._every(found)
        if self.misfire_policy is not None and not isinstance(self.misfire_policy,
                                                              MisfirePolicy):
            found.append(MisfirePolicy.unknown(self.misfire_policy, "misfire_policy"))
        if self.misfire_grace is not None:
            found.extend(listed(validation.seconds_problem(
                self.misfire_grace, "misfire_grace", maximum=validation.MAX_GRACE)))
        if self.starting_deadline is not None:
            found.extend(listed(validation.seconds_problem(
                self.starting_deadline, "starting_deadline", inclusive_minimum=False)))
        if self.max_catchup is not None:
            found.extend(listed(validation.count_problem(
                self.max_catchup, "max_catchup", minimum=1, maximum=validation.MAX_CATCHUP)))
        # Each group of optional fields is judged only when one of them is set: every due
        # row is judged, and most set none.
        if self.offset is not None or self.jitter is not None:
            found.extend(self._shift_problems(every))
        found.extend(self._policy_problems())
        if (self.start_at is not None or self.end_at is not None or self.max_runs is not None
                or self.description is not None or self.tags != () or self.calendars != ()
                or self.rotate != () or self.rotate_handover is not False):
            found.extend(self._control_problems())
        shapes = validation.call_problems(self.args, self.kwargs)
        found.extend(shapes)
        found.extend(validation.options_problems(self.options, stored=not payload))
        if payload and not shapes:
            payloads: tuple[tuple[str, object], ...] = (
                ("args", list(self.args) if isinstance(self.args, tuple) else self.args),
                ("kwargs", self.kwargs), ("options", self.options))
            for label, payload_value in payloads:
                found.extend(validation.payload_problems(label, payload_value))
        if not found:
            return found
        where = f"schedule {quoted_name(self.name)}"
        return [problem.about(where) for problem in found]

    def _every(self, found: list[Problem]) -> timedelta | None:
        """An interval trigger's period, checked against the bounds (None for other kinds)."""
        if self.trigger.kind != "interval":
            return None
        every = self.trigger.params.get("every")
        problem = validation.seconds_problem(every, "every", minimum=validation.MIN_EVERY)
        if problem is not None:
            found.append(problem)
            return None
        assert isinstance(every, (int, float))
        return timedelta(seconds=every)

    def _shift_problems(self, every: timedelta | None) -> list[Problem]:
        """Problems of ``offset`` and ``jitter``: each from 0 to the interval (``every``) or
        :data:`MAX_SHIFT`, and not both."""
        found: list[Problem] = []
        shift_max = MAX_SHIFT if every is None else every
        for label, value in (("offset", self.offset), ("jitter", self.jitter)):
            if value is not None:
                found.extend(listed(validation.seconds_problem(value, label,
                                                                maximum=shift_max)))
        if (every is not None and isinstance(self.offset, timedelta)
                and self.offset >= every):
            found.append(Problem("offset", "must be shorter than the interval "
                                 f"({self.offset} >= {every})"))
        if self.offset is not None and self.jitter is not None:
            found.append(Problem("offset", "give either {offset} or {jitter}, not both",
                                 mentions=("offset", "jitter")))
        return found

    def _policy_problems(self) -> list[Problem]:
        """Problems of the run policies, one rule each."""
        found: list[Problem] = []
        if self.overlap is not None and not isinstance(self.overlap, OverlapPolicy):
            found.append(OverlapPolicy.unknown(self.overlap, "overlap"))
        if not isinstance(self.mode, ScheduleMode):
            found.append(ScheduleMode.unknown(self.mode, "mode"))
        elif self.mode is ScheduleMode.FIXED_DELAY and self.trigger.kind != "interval":
            found.append(Problem("mode", "fixed_delay needs an interval schedule ({every} = "
                                 f"the delay), not a {self.trigger.kind} one",
                                 mentions=("every",)))
        if (self.failure_backoff is not None or self.failure_backoff_factor is not None
                or self.failure_backoff_max is not None):
            found.extend(backoff_problems(self.failure_backoff, self.failure_backoff_factor,
                                          self.failure_backoff_max))
        if self.pause_after_failures is not None:
            found.extend(listed(validation.count_problem(
                self.pause_after_failures, "pause_after_failures", minimum=1,
                maximum=MAX_PAUSE_AFTER)))
        if self.run_resends is not None:
            found.extend(listed(validation.count_problem(
                self.run_resends, "run_resends", minimum=0, maximum=MAX_RUN_RESENDS)))
        if (self.alert_late is not None or self.max_runtime is not None
                or self.alert_silent is not None or self.alert_failures is not None
                or self.alert_missed is not None or self.alert_lost is not None):
            found.extend(self._alert_problems())
        return found

    def _alert_problems(self) -> list[Problem]:
        """Problems of the alert thresholds: durations above zero, the failures from 1, the
        missed and lost from 0."""
        found: list[Problem] = []
        for label, value in (("alert_late", self.alert_late), ("max_runtime", self.max_runtime),
                             ("alert_silent", self.alert_silent)):
            if value is not None:
                found.extend(listed(validation.seconds_problem(
                    value, label, maximum=validation.MAX_DURATION, inclusive_minimum=False)))
        if self.alert_failures is not None:
            found.extend(listed(validation.count_problem(
                self.alert_failures, "alert_failures", minimum=1, maximum=MAX_ALERT_FAILURES)))
        for label, count in (("alert_missed", self.alert_missed),
                             ("alert_lost", self.alert_lost)):
            if count is not None:
                found.extend(listed(validation.count_problem(
                    count, label, minimum=0, maximum=MAX_ALERT_FAILURES)))
        return found

    def _control_problems(self) -> list[Problem]:
        """Problems of the bounds, the run limit, the description and the tags."""
        found: list[Problem] = []
        bounds: list[datetime] = []
        for label, value in (("start_at", self.start_at), ("end_at", self.end_at)):
            if value is None:
                continue
            if (not isinstance(value, datetime) or value.tzinfo is None
                    or value.utcoffset() is None):
                found.append(Problem(label, "expected an aware datetime (with a zone), got "
                                     f"{validation.shown_value(value)}"))
                continue
            problem = validation.instant_problem(value, label)
            if problem is not None:
                found.append(problem)
            else:
                bounds.append(value)
        if len(bounds) == 2 and bounds[1] < bounds[0]:
            found.append(Problem("end_at", f"{bounds[1].isoformat()} is before {{start_at}} "
                                 f"{bounds[0].isoformat()}", "give an end at or after the start",
                                 mentions=("start_at",)))
        if self.max_runs is not None:
            found.extend(listed(validation.count_problem(
                self.max_runs, "max_runs", minimum=1, maximum=validation.MAX_RUNS)))
        if self.description is not None:
            found.extend(listed(validation.description_problem(self.description)))
        if self.tags != ():
            found.extend(validation.tags_problems(self.tags))
        if self.calendars != ():
            found.extend(validation.calendars_problems(self.calendars))
        if self.rotate != () or self.rotate_handover is not False:
            found.extend(rotation_problems(self.rotate, self.rotate_handover, self.options))
        return found

    def backoff(self) -> FailureBackoff | None:
        """The failure backoff, None when off."""
        if self.failure_backoff is None:
            return None
        return FailureBackoff(base=self.failure_backoff,
                              factor=(self.failure_backoff_factor
                                      if self.failure_backoff_factor is not None
                                      else FailureBackoff.factor),
                              maximum=self.failure_backoff_max)

    def delay(self) -> timedelta | None:
        """The fixed delay (the interval of a ``fixed_delay`` schedule), else None."""
        if self.mode is not ScheduleMode.FIXED_DELAY or self.trigger.kind != "interval":
            return None
        every = self.trigger.params.get("every")
        if isinstance(every, bool) or not isinstance(every, (int, float)):
            return None
        return timedelta(seconds=every)

    def effective_offset(self) -> timedelta:
        """The shift applied to every occurrence: ``offset``, or the stable jitter of the name."""
        if self.offset is not None:
            return self.offset
        if self.jitter is not None:
            return stable_jitter(self.name, self.jitter)
        return timedelta(0)

    def checked_offset(self) -> timedelta | None:
        """:meth:`effective_offset` when the fields it is made of follow their rules (``offset``
        and ``jitter`` within their bounds, a jittered schedule's name a string); None when they
        do not, and :meth:`problems` names why. Within its bounds, the shift added to an instant
        within the :func:`~goatbeat_celery.core.types.validation.instant_problem` range never
        overflows; a shift given by a user but not yet judged may (days=-730120)."""
        if self._shift_problems(self._every([])):
            return None
        if self.jitter is not None and not isinstance(self.name, str):
            return None
        return self.effective_offset()

    def spec_hash(self) -> str:
        """A digest of everything but ``enabled`` and ``source``: equal hashes, same behaviour."""
        payload = {
            "task": self.task,
            "trigger": self.trigger.to_json(),
            "args": list(self.args),
            "kwargs": dict(self.kwargs),
            "options": dict(self.options),
            "misfire_policy": self.misfire_policy.value if self.misfire_policy else None,
            "misfire_grace": _seconds(self.misfire_grace),
            "max_catchup": self.max_catchup,
            "offset": _seconds(self.offset),
            "jitter": _seconds(self.jitter),
        }
        if self.starting_deadline is not None:
            # Only when set, so that the specs stored before the field existed keep their hash.
            payload["starting_deadline"] = _seconds(self.starting_deadline)
        # The run policies, likewise only when not the default.
        policies: dict[str, str | float | None] = {
            "overlap": None if self.overlap is None else self.overlap.value,
            "mode": (None if self.mode is ScheduleMode.FIXED_RATE
                     else getattr(self.mode, "value", self.mode)),
            "failure_backoff": _seconds(self.failure_backoff),
            "failure_backoff_factor": self.failure_backoff_factor,
            "failure_backoff_max": _seconds(self.failure_backoff_max),
            "pause_after_failures": self.pause_after_failures,
            "run_resends": self.run_resends,
            "alert_late": _seconds(self.alert_late),
            "alert_failures": self.alert_failures,
            "max_runtime": _seconds(self.max_runtime),
            "alert_silent": _seconds(self.alert_silent),
            "alert_missed": self.alert_missed,
            "alert_lost": self.alert_lost,
        }
        payload.update((key, value) for key, value in policies.items() if value is not None)
        # The controls, likewise; the description and tags too, so that a config entry whose
        # description changed is written again.
        controls: dict[str, Any] = {
            "start_at": _instant_text(self.start_at), "end_at": _instant_text(self.end_at),
            "max_runs": self.max_runs, "description": self.description,
            "tags": list(self.tags) if self.tags else None,
            "calendars": list(self.calendars) if self.calendars else None,
            "rotate": list(self.rotate) if self.rotate else None,
            "rotate_handover": True if self.rotate_handover else None,
        }
        payload.update((key, value) for key, value in controls.items() if value is not None)
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(blob.encode()).hexdigest()


#: The spec's plain fields (durations, counts, factors), as every face presents them.
PLAIN_FIELDS: tuple[FieldInfo, ...] = plain_fields(ScheduleSpec)


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


def _instant_text(value: object) -> str | None:
    if isinstance(value, datetime) and value.utcoffset() is not None:
        return value.astimezone(UTC).isoformat()
    return None if value is None else repr(value)


def quoted_name(name: object) -> str:
    """A name as error messages show it: quoted, escaped, cut short."""
    return validation.shown_value(name, 80)


def stable_jitter(name: str, jitter: timedelta) -> timedelta:
    """An offset in ``[0, jitter)`` derived from ``name``: the same on every host and restart."""
    micros = int(jitter / timedelta(microseconds=1))
    if micros <= 0:
        return timedelta(0)
    digest = hashlib.sha256(name.encode()).digest()
    return timedelta(microseconds=int.from_bytes(digest[:8], "big") % micros)


@dataclass(frozen=True, kw_only=True)
class SyncEntry:
    """One schedule from configuration, with the times it starts at if it is new or changed."""

    spec: ScheduleSpec
    next_occurrence_at: datetime | None
    next_run_at: datetime | None


@dataclass(frozen=True, kw_only=True)
class SyncReport:
    """What a config sync changed, by schedule name."""

    created: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    disabled: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    #: Config rows deleted: out of config past ``goatbeat_config_prune_grace``.
    deleted: tuple[str, ...] = ()
