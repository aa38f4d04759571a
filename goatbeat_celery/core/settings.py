"""Engine settings: a frozen, keyword-only dataclass validated as a whole.

Durations accept seconds or :class:`~datetime.timedelta`. Every problem is collected and raised
at once in one :class:`~goatbeat_celery.core.errors.ConfigurationError`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import timedelta
from typing import Any

from goatbeat_celery.core import validation
from goatbeat_celery.core.errors import ConfigurationError
from goatbeat_celery.core.model import Duration, MisfirePolicy, to_timedelta

_HOUR = timedelta(hours=1)
_DAY = timedelta(days=1)
#: Each duration field: its bounds and whether zero is allowed. Upper bounds keep every instant
#: the engine computes from them (now + ttl, now - retention) far inside what a datetime holds.
_DURATIONS: dict[str, tuple[timedelta, bool]] = {
    "lease_ttl": (_HOUR, False),
    "lease_renew_interval": (_HOUR, False),
    "misfire_grace": (validation.MAX_GRACE, True),
    "max_interval": (_HOUR, False),
    "retention": (validation.MAX_DURATION, True),
    "retry_backoff": (_HOUR, False),
    "retry_backoff_max": (_DAY, False),
}
_COUNTS = {"max_catchup": validation.MAX_CATCHUP, "batch_size": 10_000, "prune_batch": 100_000}


@dataclass(frozen=True, kw_only=True)
class Settings:
    """How the engine behaves.

    The defaults make ``misfire_grace`` (60 s) cover a failover (``lease_ttl`` +
    ``lease_renew_interval`` = 40 s), so a change of leader loses nothing under ``latest``.
    """

    lease_name: str = "default"
    lease_ttl: Duration = timedelta(seconds=30)
    lease_renew_interval: Duration = timedelta(seconds=10)
    misfire_policy: MisfirePolicy | str = MisfirePolicy.LATEST
    misfire_grace: Duration = timedelta(seconds=60)
    max_catchup: int = 100
    batch_size: int = 500
    max_interval: Duration = timedelta(seconds=5)
    retention: Duration = timedelta(days=7)
    prune_batch: int = 1000
    retry_backoff: Duration = timedelta(seconds=1)
    retry_backoff_max: Duration = timedelta(seconds=30)
    #: Drop a run not started this long after its due instant (None: never); a schedule's own
    #: ``starting_deadline`` wins.
    starting_deadline: Duration | None = None

    def __post_init__(self) -> None:
        problems: list[str] = []
        for name, (maximum, zero_allowed) in _DURATIONS.items():
            value = getattr(self, name)
            if isinstance(value, str):
                # "30s", "1m": read as printed; an unreadable one is reported by to_timedelta.
                before = len(problems)
                value = to_timedelta(value, name, problems)
                if len(problems) > before:
                    object.__setattr__(self, name, timedelta(seconds=1))
                    continue
            problem = validation.seconds_problem(value, name, maximum=maximum,
                                                 inclusive_minimum=zero_allowed)
            if problem is not None:
                problems.append(problem)
                value = timedelta(seconds=1)  # a stand-in, so the checks below still run
            object.__setattr__(self, name, to_timedelta(value, name))
        if isinstance(self.starting_deadline, str):
            before = len(problems)
            read = to_timedelta(self.starting_deadline, "starting_deadline", problems)
            object.__setattr__(self, "starting_deadline", None if len(problems) > before else read)
        if self.starting_deadline is not None:
            problem = validation.seconds_problem(self.starting_deadline, "starting_deadline",
                                                 maximum=validation.MAX_DURATION,
                                                 inclusive_minimum=False)
            if problem is not None:
                problems.append(problem)
                object.__setattr__(self, "starting_deadline", None)
            else:
                object.__setattr__(self, "starting_deadline",
                                   to_timedelta(self.starting_deadline, "starting_deadline"))
        for name, most in _COUNTS.items():
            problem = validation.count_problem(getattr(self, name), name, minimum=1,
                                               maximum=most)
            if problem is not None:
                problems.append(problem)
        problems.extend(validation.name_problems(self.lease_name, "lease_name"))
        try:
            object.__setattr__(self, "misfire_policy", MisfirePolicy(self.misfire_policy))
        except ValueError:
            choices = ", ".join(p.value for p in MisfirePolicy)
            problems.append(
                f"misfire_policy: unknown policy {self.misfire_policy!r}; use one of: {choices}"
            )
        ttl, renew = self.ttl, self.renew_interval
        if renew >= ttl and "lease_ttl" not in _named(problems) \
                and "lease_renew_interval" not in _named(problems):
            problems.append(
                f"lease_renew_interval: must be shorter than lease_ttl ({renew} >= {ttl}); "
                "a third of the ttl is a good value"
            )
        if problems:
            raise ConfigurationError(problems, subject="goatbeat settings")

    # Typed views of the normalised fields (the dataclass accepts seconds too).
    @property
    def ttl(self) -> timedelta:
        return self.duration("lease_ttl")

    @property
    def renew_interval(self) -> timedelta:
        return self.duration("lease_renew_interval")

    @property
    def grace(self) -> timedelta:
        return self.duration("misfire_grace")

    @property
    def deadline(self) -> timedelta | None:
        """``starting_deadline`` as a timedelta, or None."""
        value = self.starting_deadline
        return value if value is None or isinstance(value, timedelta) else timedelta(seconds=value)

    @property
    def policy(self) -> MisfirePolicy:
        return MisfirePolicy(self.misfire_policy)

    @property
    def local_validity(self) -> timedelta:
        """How long a leader trusts its lease after asking for it: ttl - renew interval."""
        return self.ttl - self.renew_interval

    def seconds(self, name: str) -> float:
        """A duration field in seconds."""
        return self.duration(name).total_seconds()

    def duration(self, name: str) -> timedelta:
        """A duration field as a timedelta."""
        value = getattr(self, name)
        return value if isinstance(value, timedelta) else timedelta(seconds=value)

    def as_dict(self) -> dict[str, Any]:
        """Field values with durations in seconds, for banners and ``--json`` output."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, timedelta):
                value = value.total_seconds()
            elif isinstance(value, MisfirePolicy):
                value = value.value
            out[f.name] = value
        return out


def _named(problems: list[str]) -> set[str]:
    """The fields that ``problems`` are about."""
    return {problem.split(":", 1)[0] for problem in problems}
