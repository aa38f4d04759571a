"""The data the core reasons about: schedule specs, occurrences, executions and lease grants.

Every instant is an aware :class:`~datetime.datetime`; a naive one is refused with
:class:`~goatbeat_celery.core.errors.ConfigurationError` wherever it enters.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Union

from goatbeat_celery.core import validation
from goatbeat_celery.core.errors import ConfigurationError
from goatbeat_celery.core.policies import (
    MAX_PAUSE_AFTER,
    Choice,
    FailureBackoff,
    OverlapPolicy,
    ScheduleMode,
    backoff_problems,
)
from goatbeat_celery.core.runs import RunState
from goatbeat_celery.core.status import State, Status, status

UTC = timezone.utc

#: Durations are given as seconds or as :class:`~datetime.timedelta`.
Duration = Union[float, int, timedelta]

JSONValue = Any

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


class ExecutionState(str, enum.Enum):
    """Life of one claimed occurrence: ``claimed`` then ``submitted``.

    ``abandoned`` marks a claim given up before the broker took it: its schedule was deleted,
    or its message could not be sent after the last attempt. ``expired`` marks a claim whose
    starting deadline passed before the broker took it: it is never sent.

    The overlap policy (:class:`~goatbeat_celery.core.policies.OverlapPolicy`) adds two:
    ``held``, a claim that waits for the run before it to finish and then becomes ``claimed``
    (``buffer_one``), and ``skipped``, an occurrence recorded but never sent because the run
    before it had not finished (``skip``), its reason in ``last_error``.
    """

    CLAIMED = "claimed"
    SUBMITTED = "submitted"
    ABANDONED = "abandoned"
    EXPIRED = "expired"
    HELD = "held"
    SKIPPED = "skipped"


class ScheduleSource(str, enum.Enum):
    """Where a schedule comes from; config sync never touches ``api`` rows."""

    CONFIG = "config"
    API = "api"


def ensure_aware(value: datetime, name: str) -> datetime:
    """Return ``value`` in UTC, refusing naive datetimes with an error naming ``name``."""
    if type(value) is datetime and value.tzinfo is UTC:
        return value  # what astimezone(UTC) returns for it; the common case, once per claim
    if not isinstance(value, datetime):
        raise ConfigurationError([f"{name}: expected a datetime, got {type(value).__name__}"])
    if value.tzinfo is None or value.utcoffset() is None:
        raise ConfigurationError(
            [f"{name}: naive datetime {value.isoformat()} refused; attach a zone "
             "(e.g. datetime(..., tzinfo=timezone.utc))"]
        )
    try:
        return value.astimezone(UTC)
    except OverflowError as exc:
        raise ConfigurationError(
            [f"{name}: {value.isoformat()} is outside the years a datetime holds in UTC"]
        ) from exc


def check_aware(*values: datetime | None, name: str = "instant") -> None:
    """Refuse any naive datetime among ``values`` (``None`` passes)."""
    for value in values:
        # The cheap test first: stores run this for every instant of every claim.
        if value is not None and (not isinstance(value, datetime) or value.tzinfo is None
                                  or value.utcoffset() is None):
            ensure_aware(value, name)


#: The ways a duration may be written, as error messages list them.
DURATION_FORMS = "seconds (60, 0.5) or amounts with units d, h, m, s (90s, 1m, 1h30m, 2d, 1.5h)"
_DURATION_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def parse_duration(text: str) -> float:
    """Seconds from a duration as the CLI prints it or a user types it: plain seconds (``60``,
    ``0.5``) or amounts with units, largest first (``90s``, ``1m``, ``1h30m``, ``2d``,
    ``1.5h``). ValueError says why ``text`` is refused: unreadable, not finite, or negative."""
    stripped = text.strip()
    try:
        seconds = float(stripped)  # plain seconds, as always accepted
    except ValueError:
        seconds = _seconds_with_units(stripped, text)
    if not math.isfinite(seconds):
        raise ValueError(f"must be a finite duration, got {text!r}")
    if seconds < 0:
        raise ValueError(f"must not be negative, got {text!r}")
    return seconds


def _seconds_with_units(text: str, given: str) -> float:
    unreadable = ValueError(f"cannot read {given!r} as a duration; give {DURATION_FORMS}")
    sign, rest = (-1.0, text[1:]) if text.startswith("-") else (1.0, text)
    total, found = 0.0, False
    for unit, size in _DURATION_UNITS:
        amount, has_unit, after = rest.partition(unit)
        if not has_unit:
            continue
        amount = amount.strip()
        if not (amount.isascii() and amount.replace(".", "", 1).isdigit()):
            raise unreadable
        total, found, rest = total + float(amount) * size, True, after
    if not found or rest.strip():
        raise unreadable
    return sign * total


def to_timedelta(value: Duration | str, name: str,
                 problems: list[str] | None = None) -> timedelta:
    """Convert seconds, a duration string (see :func:`parse_duration`) or a timedelta; bad
    values are reported (or raised) under ``name``."""
    if isinstance(value, timedelta):
        return value
    try:
        seconds = _seconds_of(parse_duration(value) if isinstance(value, str) else value)
    except ValueError as exc:
        if problems is None:
            raise ConfigurationError([f"{name}: {exc}"]) from None
        problems.append(f"{name}: {exc}")
        return timedelta(0)
    return timedelta(seconds=seconds)


def _seconds_of(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected seconds, a duration such as '1m30s' or a timedelta, got "
                         f"{value!r}")
    problem = validation.seconds_problem(value, "", minimum=-validation.MAX_DURATION)
    if problem is not None:  # not finite, or beyond what a datetime can be shifted by
        raise ValueError(problem.removeprefix(": "))
    return float(value)


def idempotency_key(schedule_name: str, occurrence: datetime) -> str:
    """``"<schedule name>:<occurrence instant in UTC, ISO-8601>"``, the claim's unique key."""
    return f"{schedule_name}:{ensure_aware(occurrence, 'occurrence').isoformat()}"


def manual_key(schedule_name: str, requested_at: datetime) -> str:
    """``"<schedule name>:<instant in UTC, ISO-8601>:manual"``, the key of an extra run.

    A grid key always ends with an instant and a manual key never does, so no name, however
    chosen, makes one equal the other.
    """
    return f"{schedule_name}:{ensure_aware(requested_at, 'requested_at').isoformat()}:manual"


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
    misfire_grace: timedelta | None = None
    max_catchup: int | None = None
    offset: timedelta | None = None
    jitter: timedelta | None = None
    #: A run not started by its due instant plus this long is dropped: the message carries it
    #: as an absolute ``expires``, and goatbeat never sends it later. None: the global setting.
    starting_deadline: timedelta | None = None
    #: Run policies (:mod:`goatbeat_celery.core.policies`; they need run tracking to learn when
    #: a run finished): what a due occurrence does while the previous run has not finished
    #: (None: the global ``overlap_policy``), fixed rate or fixed delay (interval schedules:
    #: ``every`` is the delay), the backoff after failed runs (None: off) and the failures in a
    #: row after which the schedule pauses itself (None: never).
    overlap: OverlapPolicy | None = None
    mode: ScheduleMode = ScheduleMode.FIXED_RATE
    failure_backoff: timedelta | None = None
    failure_backoff_factor: float | None = None
    failure_backoff_max: timedelta | None = None
    pause_after_failures: int | None = None
    #: Controls (:mod:`goatbeat_celery.core.controls`): no run due before ``start_at`` or
    #: after ``end_at`` (aware instants, None: unbounded), at most ``max_runs`` runs in all
    #: (the schedule's ``total_runs``; manual runs do not count; None: no limit), and a free
    #: ``description`` and ``tags`` (labels to filter by) that change nothing about running.
    start_at: datetime | None = None
    end_at: datetime | None = None
    max_runs: int | None = None
    description: str | None = None
    tags: tuple[str, ...] = ()
    #: The exclusion calendars observed (:mod:`goatbeat_celery.core.calendars`), by name: an
    #: occurrence due on one of their dates is recorded skipped instead of run.
    calendars: tuple[str, ...] = ()
    enabled: bool = True
    source: ScheduleSource = ScheduleSource.API

    def problems(self, *, payload: bool = True) -> list[str]:
        """Every problem with this spec, by the rules of :mod:`~goatbeat_celery.core.validation`.

        ``payload=False`` skips encoding args, kwargs and options as JSON (their size and
        faithfulness): values read from a database row are JSON already, and the engine checks
        every row it plans.
        """
        found = [*validation.name_problems(self.name), *validation.task_problems(self.task)]
        if not isinstance(self.enabled, bool):
            found.append(f"enabled: expected true or false, got {self.enabled!r}")
        every = self._every(found)
        if self.misfire_policy is not None and not isinstance(self.misfire_policy,
                                                              MisfirePolicy):
            found.append(MisfirePolicy.unknown(self.misfire_policy, "misfire_policy"))
        if self.misfire_grace is not None:
            found.extend(_listed(validation.seconds_problem(
                self.misfire_grace, "misfire_grace", maximum=validation.MAX_GRACE)))
        if self.starting_deadline is not None:
            found.extend(_listed(validation.seconds_problem(
                self.starting_deadline, "starting_deadline", inclusive_minimum=False)))
        if self.max_catchup is not None:
            found.extend(_listed(validation.count_problem(
                self.max_catchup, "max_catchup", minimum=1, maximum=validation.MAX_CATCHUP)))
        shift_max = MAX_SHIFT if every is None else every
        for label, value in (("offset", self.offset), ("jitter", self.jitter)):
            if value is not None:
                found.extend(_listed(validation.seconds_problem(value, label,
                                                                maximum=shift_max)))
        if (every is not None and isinstance(self.offset, timedelta)
                and self.offset >= every):
            found.append(f"offset: must be shorter than the interval ({self.offset} >= {every})")
        if self.offset is not None and self.jitter is not None:
            found.append("offset: give either offset or jitter, not both")
        found.extend(self._policy_problems())
        found.extend(self._control_problems())
        shapes = validation.call_problems(self.args, self.kwargs)
        found.extend(shapes)
        found.extend(validation.options_problems(self.options))
        if payload and not shapes:
            payloads: tuple[tuple[str, object], ...] = (
                ("args", list(self.args) if isinstance(self.args, tuple) else self.args),
                ("kwargs", self.kwargs), ("options", self.options))
            for label, payload_value in payloads:
                found.extend(validation.payload_problems(label, payload_value))
        where = f"schedule {quoted_name(self.name)}"
        return [f"{where}: {problem}" for problem in found]

    def _every(self, found: list[str]) -> timedelta | None:
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

    def _policy_problems(self) -> list[str]:
        """Problems of the run policies, one rule each."""
        found: list[str] = []
        if self.overlap is not None and not isinstance(self.overlap, OverlapPolicy):
            found.append(OverlapPolicy.unknown(self.overlap, "overlap"))
        if not isinstance(self.mode, ScheduleMode):
            found.append(ScheduleMode.unknown(self.mode, "mode"))
        elif self.mode is ScheduleMode.FIXED_DELAY and self.trigger.kind != "interval":
            found.append("mode: fixed_delay needs an interval schedule (every = the delay), "
                         f"not a {self.trigger.kind} one")
        found.extend(backoff_problems(self.failure_backoff, self.failure_backoff_factor,
                                      self.failure_backoff_max))
        if self.pause_after_failures is not None:
            found.extend(_listed(validation.count_problem(
                self.pause_after_failures, "pause_after_failures", minimum=1,
                maximum=MAX_PAUSE_AFTER)))
        return found

    def _control_problems(self) -> list[str]:
        """Problems of the bounds, the run limit, the description and the tags."""
        found: list[str] = []
        bounds: list[datetime] = []
        for label, value in (("start_at", self.start_at), ("end_at", self.end_at)):
            if value is None:
                continue
            if (not isinstance(value, datetime) or value.tzinfo is None
                    or value.utcoffset() is None):
                found.append(f"{label}: expected an aware datetime (with a zone), got "
                             f"{validation.shown_value(value)}")
                continue
            problem = validation.instant_problem(value, label)
            if problem is not None:
                found.append(problem)
            else:
                bounds.append(value)
        if len(bounds) == 2 and bounds[1] < bounds[0]:
            found.append(f"end_at: {bounds[1].isoformat()} is before start_at "
                         f"{bounds[0].isoformat()}; give an end at or after the start")
        if self.max_runs is not None:
            found.extend(_listed(validation.count_problem(
                self.max_runs, "max_runs", minimum=1, maximum=validation.MAX_RUNS)))
        if self.description is not None:
            found.extend(_listed(validation.description_problem(self.description)))
        if self.tags != ():
            found.extend(validation.tags_problems(self.tags))
        if self.calendars != ():
            found.extend(validation.calendars_problems(self.calendars))
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
        }
        payload.update((key, value) for key, value in policies.items() if value is not None)
        # The controls, likewise; the description and tags too, so that a config entry whose
        # description changed is written again.
        controls: dict[str, Any] = {
            "start_at": _instant_text(self.start_at), "end_at": _instant_text(self.end_at),
            "max_runs": self.max_runs, "description": self.description,
            "tags": list(self.tags) if self.tags else None,
            "calendars": list(self.calendars) if self.calendars else None,
        }
        payload.update((key, value) for key, value in controls.items() if value is not None)
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(blob.encode()).hexdigest()


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


def _instant_text(value: object) -> str | None:
    if isinstance(value, datetime) and value.utcoffset() is not None:
        return value.astimezone(UTC).isoformat()
    return None if value is None else repr(value)


def _listed(problem: str | None) -> list[str]:
    return [] if problem is None else [problem]


def quoted_name(name: object) -> str:
    """A name as error messages show it: quoted, escaped, cut short."""
    return validation.shown_value(name, 80)


def spec_version_after(current: Schedule, spec: ScheduleSpec) -> int:
    """The definition's version once ``spec`` is written over ``current``: one more when it
    changes what the schedule does (its :meth:`ScheduleSpec.spec_hash`), the same otherwise
    (a pause, a resume, an unchanged save)."""
    changed = spec.spec_hash() != current.spec.spec_hash()
    return current.spec_version + 1 if changed else current.spec_version


def stable_jitter(name: str, jitter: timedelta) -> timedelta:
    """An offset in ``[0, jitter)`` derived from ``name``: the same on every host and restart."""
    micros = int(jitter / timedelta(microseconds=1))
    if micros <= 0:
        return timedelta(0)
    digest = hashlib.sha256(name.encode()).digest()
    return timedelta(microseconds=int.from_bytes(digest[:8], "big") % micros)


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """A stored schedule: the spec plus what the store keeps about its runs."""

    spec: ScheduleSpec
    next_occurrence_at: datetime | None
    next_run_at: datetime | None
    last_occurrence_at: datetime | None = None
    total_runs: int = 0
    total_missed: int = 0
    #: Counts every write of the row (claims, reports, faults, edits): what a claim compares
    #: and sets, so that a claim planned on a row edited since is dropped.
    version: int = 1
    #: Counts the changes of the definition only (a write whose ``spec_hash`` differs): what a
    #: person's edit is checked against (:func:`spec_version_after`). Runs, pauses and
    #: bookkeeping never change it, so a schedule that runs every second can still be edited.
    spec_version: int = 1
    created_at: datetime | None = None
    updated_at: datetime | None = None
    #: Why the leader set this schedule aside (None while it runs normally), since when, and
    #: how many times in a row; it is looked at again at ``next_run_at``.
    fault: str | None = None
    fault_at: datetime | None = None
    faults: int = 0
    #: What the run policies keep (:mod:`goatbeat_celery.core.policies`): failed runs in a row
    #: (reset by a success), why the schedule paused itself (None unless it did; ``resume``
    #: clears it) and how many occurrences the overlap policy skipped.
    consecutive_failures: int = 0
    paused_reason: str | None = None
    total_skipped: int = 0
    #: The end of a pause with an end (``Schedules.pause(until=...)``): the schedule stays
    #: enabled, its next run at or after this instant; None: no such pause. ``paused_reason``
    #: then holds the note given with the pause.
    paused_until: datetime | None = None
    #: Columns of the stored row that could not be read as they are (edited by hand): the
    #: spec holds harmless stand-ins for them, and the engine sets the schedule aside.
    damage: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def set_aside(self) -> bool:
        """True while the schedule is set aside, or unreadable as stored."""
        return self.fault is not None or bool(self.damage)

    def paused_at(self, now: datetime) -> bool:
        """Whether the schedule is paused at ``now``: disabled, or within a pause with an end."""
        return not self.spec.enabled or (self.paused_until is not None
                                         and self.paused_until > now)

    def status_at(self, now: datetime) -> Status:
        """This schedule's :mod:`~goatbeat_celery.core.status` at ``now`` (the store's clock)."""
        return status(enabled=self.spec.enabled, paused_until=self.paused_until,
                      paused_reason=self.paused_reason, fault=self.fault,
                      unreadable=bool(self.damage), next_run_at=self.next_run_at,
                      runs_left=self.runs_left, end_at=self.spec.end_at, now=now)

    @property
    def runs_left(self) -> int | None:
        """Runs left before ``max_runs`` is reached (None: no limit)."""
        if self.spec.max_runs is None:
            return None
        return max(0, self.spec.max_runs - self.total_runs)


@dataclass(frozen=True, kw_only=True)
class Execution:
    """One claimed occurrence, as recorded in the executions table."""

    key: str
    schedule_name: str
    occurrence_at: datetime
    due_at: datetime
    token: int
    state: ExecutionState
    claimed_at: datetime
    submitted_at: datetime | None = None
    attempts: int = 0
    last_error: str | None = None
    missed: int = 0
    manual: bool = False
    #: The starting deadline: not sent once past, and carried as the message's ``expires``.
    expires_at: datetime | None = None
    #: What workers did with it (run tracking, :mod:`goatbeat_celery.core.runs`): written by
    #: workers and the leader's lost-run verdicts, never by beat's dispatch. ``run_state`` None:
    #: not started (yet).
    run_state: RunState | None = None
    run_id: str | None = None
    worker: str | None = None
    run_attempts: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    heartbeat_at: datetime | None = None
    runtime: timedelta | None = None
    run_error: str | None = None
    #: Whether its end has been applied to its schedule by the run policies
    #: (:func:`~goatbeat_celery.core.policies.settle`): None when its schedule had no policy
    #: waiting for it when it was claimed, False until it ends and is settled, then True.
    settled: bool | None = None


@dataclass(frozen=True, kw_only=True)
class Dispatch:
    """What the submitter sends for one execution: the claim and the task to run."""

    execution: Execution
    task: str
    args: tuple[JSONValue, ...]
    kwargs: Mapping[str, JSONValue]
    options: Mapping[str, JSONValue]

    @property
    def key(self) -> str:
        return self.execution.key


@dataclass(frozen=True, kw_only=True)
class DueBatch:
    """Due schedules read by the store, with the store's clock at the time of reading.

    ``next_due_at`` is the earliest ``next_run_at`` of all enabled schedules (due or not), so an
    idle tick learns when to wake from the same round trip.
    """

    now: datetime
    schedules: tuple[Schedule, ...]
    next_due_at: datetime | None


@dataclass(frozen=True, kw_only=True)
class Waiting:
    """What waits in the store for its leader, read in one round trip without locking
    (:meth:`~goatbeat_celery.core.protocols.ScheduleStore.waiting`): a leader that heard of no
    change looks no further when nothing does.

    ``next_due_at`` is :attr:`DueBatch.next_due_at`; ``unsettled``: a run's end waits to be
    applied (``finished_runs`` would return it); ``claimed``: a claim waits to be sent
    (``take_pending`` would take it); ``open_runs``: a run exists that may yet be marked lost
    (:func:`goatbeat_celery.core.runs.may_be_lost`).
    """

    now: datetime
    next_due_at: datetime | None
    unsettled: bool
    claimed: bool
    open_runs: bool


@dataclass(frozen=True, kw_only=True)
class PlannedClaim:
    """The claim the engine wants for one schedule, to be applied only if ``version`` still holds.

    ``occurrences`` are ``(occurrence, due)`` pairs to insert as executions; ``missed`` is
    recorded on the last of them (and on the schedule); the schedule then advances to
    ``next_occurrence_at`` / ``next_run_at`` (both ``None`` once the trigger is exhausted).
    """

    schedule_name: str
    version: int
    occurrences: tuple[tuple[datetime, datetime], ...]
    missed: int
    next_occurrence_at: datetime | None
    next_run_at: datetime | None
    #: Each execution expires this long after its due instant (None: never).
    expires_after: timedelta | None = None
    #: The run policies the claim applies (:mod:`goatbeat_celery.core.policies`), with the
    #: global default resolved: what an occurrence does while a run of the schedule has not
    #: finished, the fixed delay (an unfinished run postpones the claim by it instead), and
    #: whether the runs wait to be settled when they end.
    overlap: OverlapPolicy = OverlapPolicy.ALLOW
    delay: timedelta | None = None
    settle: bool = False
    #: The schedule's run limit: the store checks it against ``total_runs`` as locked in the
    #: claim's transaction and claims no run past it (None: no limit).
    max_runs: int | None = None
    #: Occurrences (by their unshifted instant) that an exclusion calendar excludes, with the
    #: reason: recorded ``skipped``, never sent.
    excluded: tuple[tuple[datetime, str], ...] = ()

    @property
    def waits_for_runs(self) -> bool:
        """Whether the store must look at the schedule's unfinished runs to apply it."""
        return self.overlap is not OverlapPolicy.ALLOW or self.delay is not None


@dataclass(frozen=True, kw_only=True)
class ClaimResult:
    """What one claim transaction did.

    ``dispatches`` are the executions it inserted, ready to submit; ``advanced`` counts the
    schedules moved to their next occurrence; ``conflicts`` names the
    schedules whose version changed since planning (their claim was dropped, the edit wins);
    ``duplicates`` counts occurrences already claimed (inserted nothing).
    """

    dispatches: tuple[Dispatch, ...]
    advanced: int = 0
    conflicts: tuple[str, ...] = ()
    duplicates: int = 0
    missed: int = 0
    #: Occurrences the overlap policy recorded as ``skipped`` (reason in ``last_error``) or
    #: ``held`` back, as inserted.
    skipped: tuple[Execution, ...] = ()
    held: tuple[Execution, ...] = ()


@dataclass(frozen=True, kw_only=True)
class FinishedRun:
    """A run that ended and waits to be settled (its ``settled`` is False), with its schedule
    as stored (None: deleted since)."""

    execution: Execution
    schedule: Schedule | None


@dataclass(frozen=True, kw_only=True)
class PauseNote:
    """What a pause writes beside ``enabled``: the operator's note (``paused_reason``) and
    the instant the pause ends by itself (``paused_until``; None: until resumed)."""

    reason: str | None = None
    until: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class RunSettlement:
    """What the end of run ``key`` writes on its schedule
    (:func:`~goatbeat_celery.core.settlement.settlement_of`), applied only while the schedule
    still has ``version`` (None: nothing to write on the schedule, which is gone, paused or
    unchanged by this end; only the run is marked settled).

    ``paused_reason`` set: the schedule pauses itself (``enabled`` false) with that reason.
    """

    key: str
    schedule_name: str
    version: int | None
    consecutive_failures: int = 0
    next_occurrence_at: datetime | None = None
    next_run_at: datetime | None = None
    paused_reason: str | None = None
    #: The pause a failure's backoff imposed from the run's end (zero: none); not written.
    backoff: timedelta = timedelta(0)


@dataclass(frozen=True, kw_only=True)
class SettleReport:
    """What :meth:`~goatbeat_celery.core.protocols.ScheduleStore.settle_runs` wrote: the runs
    marked settled, the schedules that paused themselves (name, reason), and the held claims
    released (now ``claimed``, to be sent with the pending ones)."""

    settled: tuple[str, ...] = ()
    paused: tuple[tuple[str, str], ...] = ()
    released: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class SetAside:
    """A schedule the leader cannot run as stored, to be looked at again later.

    With ``version``, applied only if the schedule still has it (an edit made meanwhile may
    have fixed it); without, applied whatever the version (a message refused at submission).
    ``retry_at`` None (the usual case) lets the store apply :func:`set_aside_delay` to the
    times the schedule was set aside already.
    """

    schedule_name: str
    version: int | None
    reason: str
    retry_at: datetime | None = None


#: A schedule set aside is looked at again after this long, doubled for each time it was set
#: aside before (since it was last edited), up to SET_ASIDE_RETRY_MAX.
SET_ASIDE_RETRY = timedelta(seconds=30)
SET_ASIDE_RETRY_MAX = timedelta(hours=1)


def set_aside_delay(faults: int) -> timedelta:
    """How long a schedule already set aside ``faults`` times waits before the next look."""
    doublings = min(max(faults, 0), 16)
    delay: timedelta = min(SET_ASIDE_RETRY * (2 ** doublings), SET_ASIDE_RETRY_MAX)
    return delay


def retry_time(entry: SetAside, faults: int, next_run_at: datetime | None,
               now: datetime) -> datetime:
    """When a schedule set aside by ``entry`` is looked at again: ``entry.retry_at``, or
    ``now`` + the delay for the ``faults`` it had; never earlier than the ``next_run_at`` it
    had (a message refused long before the schedule's next run does not bring that run
    forward)."""
    retry_at = entry.retry_at or now + set_aside_delay(faults)
    if next_run_at is not None and next_run_at > retry_at:
        return next_run_at
    return retry_at


@dataclass(frozen=True, kw_only=True)
class SubmitResult:
    """What the broker did with a batch: ``accepted`` keys; ``failed`` (key -> reason): not
    taken because the broker is unreachable or timed out, to retry with the whole batch after
    a backoff; ``rejected`` (key -> reason): this message could not be built or was refused for
    itself, while the broker worked."""

    accepted: list[str]
    failed: dict[str, str] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)


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


@dataclass(frozen=True, kw_only=True)
class LeaseGrant:
    """Proof of holding a lease, as granted by the store.

    ``token`` is the fencing token; ``expires_at`` is judged by the store's clock only.
    ``changed_holder`` is true when this grant took the lease over (a new token).
    """

    name: str
    holder: str
    token: int
    expires_at: datetime
    changed_holder: bool = False


class ScheduleOrder(str, enum.Enum):
    """How a list of schedules is sorted."""

    NAME = "name"
    #: ``(next_run_at, name)``, those with no next run last.
    NEXT_RUN = "next_run"


@dataclass(frozen=True, kw_only=True)
class RunOrderCursor:
    """Where a page of schedules listed by next run ended: the next page starts after it."""

    next_run_at: datetime | None
    name: str


def list_order(order: ScheduleOrder, after: str | RunOrderCursor | None) -> ScheduleOrder:
    """``order``, checked against the kind of ``after`` it pages on from."""
    order = ScheduleOrder(order)
    wanted = RunOrderCursor if order is ScheduleOrder.NEXT_RUN else str
    if after is not None and not isinstance(after, wanted):
        raise TypeError(f"after: schedules listed by {order.value} page on from a "
                        f"{wanted.__name__}, got {type(after).__name__}")
    return order


def run_order_key(next_run_at: datetime | None, name: str) -> tuple[bool, datetime, str]:
    """The sort key of :attr:`ScheduleOrder.NEXT_RUN`: by next run, those with none last."""
    return (next_run_at is None, next_run_at or datetime.min.replace(tzinfo=UTC), name)


@dataclass(frozen=True, kw_only=True)
class ScheduleCounts:
    """How many schedules there are, in all and by state and source."""

    total: int
    paused: int
    set_aside: int
    config: int
    api: int
    #: How many are in each :class:`~goatbeat_celery.core.status.State` at the store's clock
    #: (every state present, 0 when none): a row unreadable as stored counts by its columns
    #: until the leader sets it aside.
    by_state: Mapping[State, int] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class LeaseInfo:
    """The current state of a lease row, for status displays."""

    name: str
    holder: str | None
    token: int
    acquired_at: datetime | None
    expires_at: datetime | None
    store_now: datetime
    #: Who held the lease before the current (or, released, the last) holder, and until when
    #: by the store's clock (its release, or the expiry its successor found); None: no one yet.
    previous_holder: str | None = None
    changed_at: datetime | None = None

    @property
    def held(self) -> bool:
        return lease_live(self.holder, self.expires_at, self.store_now)

    def last_renewal(self, ttl: timedelta) -> datetime | None:
        """When the holder last took or renewed the lease: each sets the expiry ``ttl`` ahead
        of the store's clock (None when no one holds it)."""
        if self.holder is None or self.expires_at is None:
            return None
        # A holder configured with a longer ttl than ``ttl`` would seem to renew in the
        # future: it renewed at the latest now.
        return min(self.expires_at - ttl, self.store_now)

    def silent(self, ttl: timedelta, renew_interval: timedelta) -> bool:
        """Whether the holder missed its renewal: none for half a renew interval past when it
        was due (a renewal is a round trip, and a busy leader a little late). A silent holder
        may be dead or frozen; the lease then passes to a standby when it expires."""
        renewed = self.last_renewal(ttl)
        return (self.held and renewed is not None
                and self.store_now - renewed > renew_interval * 1.5)


def lease_live(holder: str | None, expires_at: datetime | None, now: datetime) -> bool:
    """Whether a lease row with ``holder`` and ``expires_at`` is held at store-time ``now``:
    someone holds it and its expiry is still ahead. A lease that is not live may be taken by
    anyone, or forgotten."""
    return holder is not None and expires_at is not None and expires_at > now
