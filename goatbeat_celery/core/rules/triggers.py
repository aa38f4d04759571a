"""Triggers: small pure objects answering "which occurrence comes strictly after this instant?".

The core ships :class:`IntervalTrigger` (a fixed-rate grid anchored to the Unix epoch) and
:class:`OnceTrigger`. Other kinds (cron, Celery schedule classes) are adapters registered in a
:class:`TriggerRegistry` by whoever builds the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from goatbeat_celery.core.rules import validation
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.instants import UTC, JSONValue, ensure_aware
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.spec import TriggerSpec

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: No trigger has an occurrence after this instant (the latest one a user may give, see
#: :data:`~goatbeat_celery.core.rules.validation.LATEST_INSTANT`): past it, ``next_after`` is None,
#: so that adding an offset, a grace or an interval to an occurrence never overflows.
LAST_OCCURRENCE = validation.LATEST_INSTANT
_MICRO = timedelta(microseconds=1)


@runtime_checkable
class Trigger(Protocol):
    """Computes occurrences. Implementations are immutable and safe to share between threads."""

    def next_after(self, instant: datetime) -> datetime | None:
        """The first occurrence strictly after ``instant`` (aware, UTC), or ``None`` if none.

        ``instant`` is aware; a naive one raises ConfigurationError. Never returns a naive value,
        nor one after :data:`LAST_OCCURRENCE` (there is none past it).
        """
        ...

    def describe(self) -> str:
        """A short human description, e.g. ``every 0:01:00`` or ``cron 0 3 * * * Europe/Paris``."""
        ...


@runtime_checkable
class SeekableTrigger(Trigger, Protocol):
    """A trigger that can count a backlog without walking it point by point."""

    def points_before(
        self, start: datetime, bound: datetime, keep: int
    ) -> tuple[int, list[datetime]]:
        """Count occurrences ``p`` with ``start <= p < bound`` and return the last ``keep``.

        ``start`` must itself be an occurrence.
        """
        ...


class IntervalTrigger:
    """Every ``every``, on the grid ``k × every`` counted from the Unix epoch.

    Replicas agree on the grid without talking, and a restart joins the grid rather than
    restarting a countdown.
    """

    kind = "interval"

    def __init__(self, every: timedelta) -> None:
        if not isinstance(every, timedelta) or every <= timedelta(0):
            raise ConfigurationError(
                [Problem("every", f"interval must be a positive duration, got {every!r}")]
            )
        self.every = every
        self._step = every // _MICRO
        if self._step <= 0:
            raise ConfigurationError([Problem("every",
                                              "interval must be at least one microsecond")])
        #: The index of the last grid point at or before LAST_OCCURRENCE.
        self._last = ((LAST_OCCURRENCE - EPOCH) // _MICRO) // self._step
        #: The last instant :meth:`next_after` was asked about and its answer, as one tuple
        #: (threads may share the trigger): schedules sharing it and due together ask about
        #: the same instant, one after the other.
        self._last_next: tuple[datetime, datetime | None] | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, JSONValue]) -> IntervalTrigger:
        every = params.get("every")
        if isinstance(every, bool) or not isinstance(every, (int, float)) or every <= 0:
            raise ConfigurationError(
                [Problem("every",
                         f"interval must be a positive number of seconds, got {every!r}")]
            )
        return cls(timedelta(seconds=every))

    def to_spec(self) -> TriggerSpec:
        return TriggerSpec(kind=self.kind, params={"every": self.every.total_seconds()})

    def _index(self, instant: datetime) -> int:
        return ((ensure_aware(instant, "instant") - EPOCH) // _MICRO) // self._step

    def _point(self, index: int) -> datetime:
        return EPOCH + timedelta(microseconds=index * self._step)

    def next_after(self, instant: datetime) -> datetime | None:
        last = self._last_next
        if last is not None and last[0] == instant:
            return last[1]
        index = self._index(instant) + 1
        after = None if index > self._last else self._point(index)
        self._last_next = (instant, after)
        return after

    def points_before(
        self, start: datetime, bound: datetime, keep: int
    ) -> tuple[int, list[datetime]]:
        first = self._index(start)
        # Index of the last grid point strictly before bound (and none past LAST_OCCURRENCE).
        last = min((((ensure_aware(bound, "bound") - EPOCH) // _MICRO) - 1) // self._step,
                   self._last)
        count = max(0, last - first + 1)
        tail = [self._point(i) for i in range(max(first, last - keep + 1), last + 1)]
        return count, tail if count else []

    def describe(self) -> str:
        return f"every {self.every}"

    def __repr__(self) -> str:
        return f"IntervalTrigger(every={self.every!r})"


class OnceTrigger:
    """A single occurrence at ``at`` (Celery users call it clocked or one-off)."""

    kind = "once"

    def __init__(self, at: datetime) -> None:
        problem = validation.instant_problem(at, "at")
        if problem is not None:
            raise ConfigurationError([problem])
        self.at = ensure_aware(at, "at")

    @classmethod
    def from_params(cls, params: Mapping[str, JSONValue]) -> OnceTrigger:
        raw = params.get("at")
        if not isinstance(raw, str):
            raise ConfigurationError(
                [Problem("at", f"expected an ISO-8601 instant with a zone, got {raw!r}")])
        try:
            parsed = datetime.fromisoformat(raw)
        except ValueError as exc:
            raise ConfigurationError(
                [Problem("at", f"{raw!r} is not an ISO-8601 instant ({exc})")]) from exc
        return cls(parsed)

    def to_spec(self) -> TriggerSpec:
        return TriggerSpec(kind=self.kind, params={"at": self.at.isoformat()})

    def next_after(self, instant: datetime) -> datetime | None:
        return self.at if self.at > ensure_aware(instant, "instant") else None

    def describe(self) -> str:
        return f"once at {self.at.isoformat()}"

    def __repr__(self) -> str:
        return f"OnceTrigger(at={self.at!r})"


TriggerFactory = Callable[[Mapping[str, JSONValue]], Trigger]


class TriggerRegistry:
    """Builds triggers from their stored :class:`TriggerSpec`, by kind."""

    def __init__(self, factories: Mapping[str, TriggerFactory] | None = None) -> None:
        self._factories: dict[str, TriggerFactory] = dict(factories or {})

    @classmethod
    def default(cls) -> TriggerRegistry:
        """A registry knowing the core kinds ``interval`` and ``once``."""
        return cls({"interval": IntervalTrigger.from_params, "once": OnceTrigger.from_params})

    def with_kind(self, kind: str, factory: TriggerFactory) -> TriggerRegistry:
        """A copy of this registry that also builds ``kind``."""
        return TriggerRegistry({**self._factories, kind: factory})

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(sorted(self._factories))

    def build(self, spec: TriggerSpec) -> Trigger:
        """Build the trigger, raising ConfigurationError naming the kind or the bad parameter."""
        factory = self._factories.get(spec.kind)
        if factory is None:
            known = ", ".join(self.kinds)
            raise ConfigurationError(
                [Problem("trigger.kind", f"unknown trigger kind {spec.kind!r}",
                         f"use one of: {known}")]
            )
        return factory(spec.params)
