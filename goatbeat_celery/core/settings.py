"""Engine settings: a frozen, keyword-only dataclass validated as a whole.

Durations accept seconds or :class:`~datetime.timedelta`. Every problem is collected and raised
at once in one :class:`~goatbeat_celery.core.errors.ConfigurationError`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import timedelta
from typing import Any

from goatbeat_celery.core.errors import ConfigurationError
from goatbeat_celery.core.model import Duration, MisfirePolicy, to_timedelta

_DURATIONS = (
    "lease_ttl", "lease_renew_interval", "misfire_grace", "max_interval", "retention",
    "retry_backoff", "retry_backoff_max",
)
_POSITIVE_INTS = ("max_catchup", "batch_size", "prune_batch")


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

    def __post_init__(self) -> None:
        problems: list[str] = []
        for name in _DURATIONS:
            value = to_timedelta(getattr(self, name), name, problems)
            object.__setattr__(self, name, value)
        for name in _POSITIVE_INTS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                problems.append(f"{name}: must be an integer >= 1, got {value!r}")
        if not isinstance(self.lease_name, str) or not self.lease_name.strip():
            problems.append(f"lease_name: must be a non-empty string, got {self.lease_name!r}")
        try:
            object.__setattr__(self, "misfire_policy", MisfirePolicy(self.misfire_policy))
        except ValueError:
            choices = ", ".join(p.value for p in MisfirePolicy)
            problems.append(
                f"misfire_policy: unknown policy {self.misfire_policy!r}; use one of: {choices}"
            )
        ttl, renew = self.ttl, self.renew_interval
        if ttl <= timedelta(0):
            problems.append(f"lease_ttl: must be positive, got {ttl}")
        if renew <= timedelta(0):
            problems.append(f"lease_renew_interval: must be positive, got {renew}")
        elif ttl > timedelta(0) and renew >= ttl:
            problems.append(
                f"lease_renew_interval: must be shorter than lease_ttl ({renew} >= {ttl}); "
                "a third of the ttl is a good value"
            )
        for name in ("misfire_grace", "retention"):
            if getattr(self, name) < timedelta(0):
                problems.append(f"{name}: must be >= 0, got {getattr(self, name)}")
        for name in ("max_interval", "retry_backoff", "retry_backoff_max"):
            if getattr(self, name) <= timedelta(0):
                problems.append(f"{name}: must be positive, got {getattr(self, name)}")
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
