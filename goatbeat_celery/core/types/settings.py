"""Engine settings: a frozen, keyword-only dataclass validated as a whole.

Durations are given as seconds, a :class:`~datetime.timedelta` or a printed duration (``"30s"``)
and the misfire policy as a :class:`~goatbeat_celery.core.types.spec.MisfirePolicy` or its name;
each is converted once, when the settings are made, and read back typed: a duration as a timedelta,
the policy as the enum. Every problem is collected and raised at once in one
:class:`~goatbeat_celery.core.types.errors.ConfigurationError`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import timedelta
from typing import Any, Generic, TypeVar, Union

from goatbeat_celery.core.types import validation
from goatbeat_celery.core.types.alerts import (
    DEFAULT_ALERT_FAILURES,
    DEFAULT_ALERT_LOST,
    DEFAULT_ALERT_MISSED,
    MAX_ALERT_FAILURES,
)
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.instants import Duration, to_timedelta
from goatbeat_celery.core.types.policies import OverlapPolicy
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.runs import (
    DEFAULT_HEARTBEAT_INTERVAL,
    DEFAULT_LOST_AFTER,
    DEFAULT_RUN_RESENDS,
    DEFAULT_START_TIMEOUT,
    MAX_RUN_RESENDS,
    RUN_TIME_MAXIMA,
    RunTimes,
    lost_after_problem,
)
from goatbeat_celery.core.types.spec import MisfirePolicy

_HOUR = timedelta(hours=1)
_DAY = timedelta(days=1)
#: Each duration field: its bounds and whether zero is allowed. Upper bounds keep every instant
#: the engine computes from them (now + ttl, now - retention) far inside what a datetime holds.
_DURATIONS: dict[str, tuple[timedelta, bool]] = {
    "lease_ttl": (_HOUR, False),
    "lease_renew_interval": (_HOUR, False),
    "max_interval": (_HOUR, False),
    "retention": (validation.MAX_DURATION, True),
    "config_prune_grace": (validation.MAX_DURATION, True),
    "retry_backoff": (_HOUR, False),
    "retry_backoff_max": (_DAY, False),
    "alert_interval": (_HOUR, False),
    "rotation_presence_ttl": (_HOUR, False),
    **{name: (maximum, False) for name, maximum in RUN_TIME_MAXIMA.items()},
}
#: The most shards a deployment may split its schedules into (core.rules.shards).
MAX_SHARDS = 1024
_COUNTS = {"max_catchup": validation.MAX_CATCHUP, "batch_size": 1_000, "prune_batch": 100_000,
           "backfill_per_tick": 10_000, "shards": MAX_SHARDS, "alert_batch": 10_000}
#: The alert thresholds that are off unless given.
_OPTIONAL_ALERT_DURATIONS = ("alert_late", "max_runtime", "alert_silent")
#: How long beat keeps the broker's word on a rotated queue's consumers.
DEFAULT_PRESENCE_TTL = timedelta(seconds=5)
#: How often the leader judges alerts, and how many schedules at a time.
DEFAULT_ALERT_INTERVAL = timedelta(seconds=10)
DEFAULT_ALERT_BATCH = 100

_Read = TypeVar("_Read")
_Given = TypeVar("_Given")


class _Typed(Generic[_Read, _Given]):
    """A field given as ``_Given`` and read as ``_Read``: ``Settings.__post_init__`` stores the
    typed value in place of the given one, so that no reader converts it again."""

    def __init__(self, default: _Read) -> None:
        self.default = default

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: object | None, owner: type | None = None) -> _Read:
        if instance is None:
            return self.default  # the dataclass asks the class for the field's default
        value: _Read = vars(instance)[self.name]
        return value

    def __set__(self, instance: object, value: _Given) -> None:
        vars(instance)[self.name] = value


#: A duration: given as seconds, a timedelta or a printed duration, read as a timedelta.
_Duration = _Typed[timedelta, Union[Duration, str]]


@dataclass(frozen=True, kw_only=True)
class Settings:
    """How the engine behaves.

    ``misfire_grace`` is off by default (None): after an outage, of any length, each schedule
    runs its most recent missed occurrence once under ``latest``, as Celery's beat does. A
    grace, when given, misses what is later than it; at least ``lease_ttl`` +
    ``lease_renew_interval`` (40 s with the defaults) lets a change of leader lose nothing.
    """

    lease_name: str = "default"
    lease_ttl: _Duration = _Duration(timedelta(seconds=30))
    lease_renew_interval: _Duration = _Duration(timedelta(seconds=10))
    misfire_policy: _Typed[MisfirePolicy, Union[MisfirePolicy, str]] = _Typed(
        MisfirePolicy.LATEST)
    misfire_grace: _Typed[timedelta | None, Union[Duration, str, None]] = _Typed(None)
    max_catchup: int = 100
    batch_size: int = 500
    max_interval: _Duration = _Duration(timedelta(seconds=5))
    retention: _Duration = _Duration(timedelta(days=7))
    prune_batch: int = 1000
    retry_backoff: _Duration = _Duration(timedelta(seconds=1))
    retry_backoff_max: _Duration = _Duration(timedelta(seconds=30))
    #: Run tracking (core.rules.runs): each worker process writes a heartbeat this often for the
    #: runs it is running, and the leader looks for lost runs this often; a running run silent for
    #: run_lost_after, or one sent and not started within run_start_timeout, is marked lost.
    heartbeat_interval: _Duration = _Duration(DEFAULT_HEARTBEAT_INTERVAL)
    run_lost_after: _Duration = _Duration(DEFAULT_LOST_AFTER)
    run_start_timeout: _Duration = _Duration(DEFAULT_START_TIMEOUT)
    #: Whether the workers track runs (``goatbeat_celery.track_runs`` sets it on the app): only
    #: then is a run no worker started within run_start_timeout judged lost; otherwise its
    #: outcome is unknown (core.rules.runs.lost_verdict).
    track_runs: bool = False
    #: With track_runs, how many times a run sent and never started (within run_start_timeout,
    #: or its share of its starting deadline) is sent again under its key before it is lost
    #: (core.rules.runs.resend_due); 0 never.
    run_resends: int = DEFAULT_RUN_RESENDS
    #: Drop a run not started this long after its due instant (None: never); a schedule's own
    #: ``starting_deadline`` wins.
    starting_deadline: _Typed[timedelta | None, Union[Duration, str, None]] = _Typed(None)
    #: What a due occurrence does while its schedule's previous run has not finished, for the
    #: schedules that do not say (needs run tracking; see core.rules.policies).
    overlap_policy: _Typed[OverlapPolicy, Union[OverlapPolicy, str]] = _Typed(
        OverlapPolicy.ALLOW)
    #: Occurrences a backfill claims in one tick at most, after the live schedules are
    #: dispatched (a backfill's own ``per_tick`` wins).
    backfill_per_tick: int = 100
    #: How many shards the schedules are split into, each led under its own lease
    #: (core.rules.shards); 1 is a single leader under ``lease_name``.
    shards: int = 1
    #: Delete the config schedules whose entry left ``beat_schedule`` (off: they stay,
    #: disabled), once they have been out of it and unwritten for ``config_prune_grace``
    #: (core.rules.sync), each deletion in the audit log.
    config_prune: bool = False
    config_prune_grace: _Duration = _Duration(timedelta(days=7))
    #: Alerts (core.rules.alerts), for the schedules that give no value of their own:
    #: ``late`` after this lateness, ``failed`` after this many failed runs in a row (0: off),
    #: ``overrun`` after this runtime, ``silent`` after this long without a success (None:
    #: off), ``missed`` after this many occurrences in a row did not run, ``lost`` after this
    #: many runs lost since the last success (0: off; True and False, as these two were once
    #: given, read as 1 and 0). The leader judges them every ``alert_interval``,
    #: ``alert_batch`` schedules at a time.
    alert_late: _Typed[timedelta | None, Union[Duration, str, None]] = _Typed(None)
    alert_failures: int = DEFAULT_ALERT_FAILURES
    max_runtime: _Typed[timedelta | None, Union[Duration, str, None]] = _Typed(None)
    alert_silent: _Typed[timedelta | None, Union[Duration, str, None]] = _Typed(None)
    alert_missed: int = DEFAULT_ALERT_MISSED
    alert_lost: int = DEFAULT_ALERT_LOST
    alert_interval: _Duration = _Duration(DEFAULT_ALERT_INTERVAL)
    alert_batch: int = DEFAULT_ALERT_BATCH
    #: Rotation's handover (core.rules.rotation): how long the broker's word on whether a
    #: rotated queue has a consumer is kept before it is asked again.
    rotation_presence_ttl: _Duration = _Duration(DEFAULT_PRESENCE_TTL)

    def __post_init__(self) -> None:
        problems: list[Problem] = []
        given = dict(vars(self))
        for name, (maximum, zero_allowed) in _DURATIONS.items():
            value = _duration(given[name], name, problems, maximum=maximum,
                              zero_allowed=zero_allowed)
            # An invalid one is replaced by a stand-in, so that the checks below still run.
            object.__setattr__(self, name, timedelta(seconds=1) if value is None else value)
        for name in ("starting_deadline", *_OPTIONAL_ALERT_DURATIONS):
            if given[name] is not None:
                object.__setattr__(self, name, _duration(
                    given[name], name, problems, maximum=validation.MAX_DURATION,
                    zero_allowed=False))
        if given["misfire_grace"] is not None:
            object.__setattr__(self, "misfire_grace", _duration(
                given["misfire_grace"], "misfire_grace", problems,
                maximum=validation.MAX_GRACE, zero_allowed=True))
        for name in ("alert_missed", "alert_lost"):
            if isinstance(given[name], bool):  # on/off switches before they were counts
                object.__setattr__(self, name, int(given[name]))
        for name in ("alert_failures", "alert_missed", "alert_lost"):
            problem = validation.count_problem(getattr(self, name), name, minimum=0,
                                               maximum=MAX_ALERT_FAILURES)
            if problem is not None:
                problems.append(problem)
        for name, most in _COUNTS.items():
            problem = validation.count_problem(getattr(self, name), name, minimum=1,
                                               maximum=most)
            if problem is not None:
                problems.append(problem)
        problem = validation.count_problem(self.run_resends, "run_resends", minimum=0,
                                           maximum=MAX_RUN_RESENDS)
        if problem is not None:
            problems.append(problem)
        problems.extend(validation.name_problems(self.lease_name, "lease_name"))
        for flag in ("track_runs", "config_prune"):
            if not isinstance(getattr(self, flag), bool):
                problems.append(Problem(flag,
                                        f"expected True or False, got {getattr(self, flag)!r}"))
        policy = MisfirePolicy.read(given["misfire_policy"], "misfire_policy", problems)
        object.__setattr__(self, "misfire_policy", policy or MisfirePolicy.LATEST)
        overlap = OverlapPolicy.read(given["overlap_policy"], "overlap_policy", problems)
        object.__setattr__(self, "overlap_policy", overlap or OverlapPolicy.ALLOW)
        ttl, renew = self.lease_ttl, self.lease_renew_interval
        if renew >= ttl and "lease_ttl" not in _named(problems) \
                and "lease_renew_interval" not in _named(problems):
            problems.append(Problem(
                "lease_renew_interval", f"must be shorter than lease_ttl ({renew} >= {ttl})",
                "a third of the ttl is a good value"))
        if not {"heartbeat_interval", "run_lost_after"} & _named(problems):
            lost = lost_after_problem(self.heartbeat_interval, self.run_lost_after)
            if lost is not None:
                problems.append(lost)
        if problems:
            raise ConfigurationError(problems, subject="goatbeat settings")

    @property
    def local_validity(self) -> timedelta:
        """How long a leader trusts its lease after asking for it: ttl - renew interval."""
        return self.lease_ttl - self.lease_renew_interval

    @property
    def run_times(self) -> RunTimes:
        """The run-tracking durations, as workers and the leader's lost-run search use them."""
        return RunTimes(heartbeat_interval=self.heartbeat_interval,
                        run_lost_after=self.run_lost_after,
                        run_start_timeout=self.run_start_timeout)

    def as_dict(self) -> dict[str, Any]:
        """Field values as plain data, durations in seconds and policies by value: what the
        documentation's table of defaults states. The beat banner formats its few fields itself
        (typed, not by key)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, timedelta):
                value = value.total_seconds()
            elif isinstance(value, (MisfirePolicy, OverlapPolicy)):
                value = value.value
            out[f.name] = value
        return out


def _duration(value: object, name: str, problems: list[Problem], *, maximum: timedelta,
              zero_allowed: bool) -> timedelta | None:
    """``value`` as a timedelta within the bounds; None with a problem appended otherwise."""
    if isinstance(value, str):
        # "30s", "1m": read as printed; an unreadable one is reported by to_timedelta.
        try:
            value = to_timedelta(value, name)
        except ConfigurationError as exc:
            problems.extend(exc.details)
            return None
    problem = validation.seconds_problem(value, name, maximum=maximum,
                                         inclusive_minimum=zero_allowed)
    if problem is not None:
        problems.append(problem)
        return None
    assert isinstance(value, (int, float, timedelta))  # seconds_problem refused anything else
    return to_timedelta(value, name)


def _named(problems: list[Problem]) -> set[str]:
    """The fields that ``problems`` are about."""
    return {problem.field for problem in problems}
