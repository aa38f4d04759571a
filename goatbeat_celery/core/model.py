"""The data the core reasons about: schedule specs, occurrences, executions and lease grants.

Every instant is an aware :class:`~datetime.datetime`; a naive one is refused with
:class:`~goatbeat_celery.core.errors.ConfigurationError` wherever it enters.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Union

from goatbeat_celery.core.errors import ConfigurationError

UTC = timezone.utc

#: Durations are given as seconds or as :class:`~datetime.timedelta`.
Duration = Union[float, int, timedelta]

JSONValue = Any

_NAME_RE = re.compile(r"^\S(.*\S)?$", re.DOTALL)


class MisfirePolicy(str, enum.Enum):
    """What to do with occurrences that are later than ``misfire_grace``.

    * ``latest`` runs one occurrence for the whole backlog (Celery's behaviour);
    * ``all`` runs each missed occurrence, at most ``max_catchup`` of them (the most recent);
    * ``skip`` runs none of them.

    Occurrences within the grace always run.
    """

    LATEST = "latest"
    ALL = "all"
    SKIP = "skip"


class ExecutionState(str, enum.Enum):
    """Life of one claimed occurrence: ``claimed`` then ``submitted``.

    ``abandoned`` marks a claim whose schedule was deleted before it could be submitted.
    """

    CLAIMED = "claimed"
    SUBMITTED = "submitted"
    ABANDONED = "abandoned"


class ScheduleSource(str, enum.Enum):
    """Where a schedule comes from; config sync never touches ``api`` rows."""

    CONFIG = "config"
    API = "api"


def ensure_aware(value: datetime, name: str) -> datetime:
    """Return ``value`` in UTC, refusing naive datetimes with an error naming ``name``."""
    if not isinstance(value, datetime):
        raise ConfigurationError([f"{name}: expected a datetime, got {type(value).__name__}"])
    if value.tzinfo is None or value.utcoffset() is None:
        raise ConfigurationError(
            [f"{name}: naive datetime {value.isoformat()} refused; attach a zone "
             "(e.g. datetime(..., tzinfo=timezone.utc))"]
        )
    return value.astimezone(UTC)


def check_aware(*values: datetime | None, name: str = "instant") -> None:
    """Refuse any naive datetime among ``values`` (``None`` passes)."""
    for value in values:
        # The cheap test first: stores run this for every instant of every claim.
        if value is not None and (not isinstance(value, datetime) or value.tzinfo is None
                                  or value.utcoffset() is None):
            ensure_aware(value, name)


def to_timedelta(value: Duration, name: str, problems: list[str] | None = None) -> timedelta:
    """Convert seconds or a timedelta; bad types are reported (or raised) under ``name``."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        message = f"{name}: expected seconds or a timedelta, got {value!r}"
        if problems is None:
            raise ConfigurationError([message])
        problems.append(message)
        return timedelta(0)
    return timedelta(seconds=value)


def idempotency_key(schedule_name: str, occurrence: datetime) -> str:
    """``"<schedule name>:<occurrence instant in UTC, ISO-8601>"``, the claim's unique key."""
    return f"{schedule_name}:{ensure_aware(occurrence, 'occurrence').isoformat()}"


def manual_key(schedule_name: str, requested_at: datetime) -> str:
    """Key of an extra run requested by hand; never collides with a grid occurrence."""
    return f"{schedule_name}:manual:{ensure_aware(requested_at, 'requested_at').isoformat()}"


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
    enabled: bool = True
    source: ScheduleSource = ScheduleSource.API

    def problems(self) -> list[str]:
        """Every problem with this spec (trigger parameters are checked by the trigger)."""
        where = f"schedule {self.name!r}"
        found: list[str] = []
        if not isinstance(self.name, str) or not self.name or not _NAME_RE.match(self.name):
            found.append(
                f"{where}: name must be a non-empty string without surrounding whitespace"
            )
        if not isinstance(self.task, str) or not self.task.strip():
            found.append(f"{where}: task must be a registered task name, got {self.task!r}")
        if self.misfire_grace is not None and self.misfire_grace < timedelta(0):
            found.append(f"{where}: misfire_grace must be >= 0, got {self.misfire_grace}")
        if self.max_catchup is not None and (
            isinstance(self.max_catchup, bool)
            or not isinstance(self.max_catchup, int)
            or self.max_catchup < 1
        ):
            found.append(f"{where}: max_catchup must be an integer >= 1, got {self.max_catchup!r}")
        if self.offset is not None and self.offset < timedelta(0):
            found.append(f"{where}: offset must be >= 0, got {self.offset}")
        if self.jitter is not None and self.jitter < timedelta(0):
            found.append(f"{where}: jitter must be >= 0, got {self.jitter}")
        every = self.trigger.params.get("every") if self.trigger.kind == "interval" else None
        if (self.offset is not None and isinstance(every, (int, float))
                and self.offset >= timedelta(seconds=every)):
            found.append(f"{where}: offset must be shorter than the interval "
                         f"({self.offset} >= {timedelta(seconds=every)})")
        if self.offset is not None and self.jitter is not None:
            found.append(f"{where}: give either offset or jitter, not both")
        for label, value in (("args", list(self.args)), ("kwargs", self.kwargs),
                             ("options", self.options)):
            problem = _json_problem(value)
            if problem:
                found.append(f"{where}: {label} must be JSON-serialisable ({problem})")
        return found

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
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(blob.encode()).hexdigest()


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


def _json_problem(value: object) -> str | None:
    try:
        round_trip = json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        return str(exc)
    if round_trip != value:
        return "a value would not read back unchanged (tuples, non-string keys?)"
    return None


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
    version: int = 1
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def name(self) -> str:
        return self.spec.name


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


@dataclass(frozen=True, kw_only=True)
class LeaseInfo:
    """The current state of a lease row, for status displays."""

    name: str
    holder: str | None
    token: int
    acquired_at: datetime | None
    expires_at: datetime | None
    store_now: datetime

    @property
    def held(self) -> bool:
        return (
            self.holder is not None
            and self.expires_at is not None
            and self.expires_at > self.store_now
        )
