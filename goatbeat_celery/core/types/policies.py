"""The run-policy settings a schedule holds: its overlap policy (:class:`OverlapPolicy`), its
mode (:class:`ScheduleMode`), its failure backoff (:class:`FailureBackoff`) and their bounds;
:class:`Choice` is how any such setting is read from a name.

What the policies do with a run is :mod:`goatbeat_celery.core.rules.policies`.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

from goatbeat_celery.core.types import validation
from goatbeat_celery.core.types.problems import Problem

DEFAULT_BACKOFF_FACTOR = 2.0
#: A factor above this would reach the cap in one step: give a longer base instead.
MAX_BACKOFF_FACTOR = 100.0
#: Most failures in a row a schedule may wait for before pausing itself.
MAX_PAUSE_AFTER = 1_000_000


_E = TypeVar("_E", bound="Choice")


class Choice(str, enum.Enum):
    """A setting given as an enum member or its name (settings, config entries, API, CLI)."""

    @classmethod
    def _noun(cls) -> str:
        """What a member is called in the problem naming an unknown one."""
        return "value"

    @classmethod
    def read(cls: type[_E], value: object, label: str, problems: list[Problem]) -> _E | None:
        """``value`` as a member; None, with a problem naming ``label`` appended, for anything
        else."""
        try:
            return cls(value)
        except ValueError:
            problems.append(cls.unknown(value, label))
            return None

    @classmethod
    def stored(cls: type[_E], value: object, label: str, damage: list[Problem]) -> _E | None:
        """:meth:`read` for a stored column: the problem is appended to a row's ``damage``."""
        return cls.read(value, label, damage)

    @classmethod
    def unknown(cls, value: object, label: str) -> Problem:
        """The problem of a ``label`` that names no member."""
        choices = ", ".join(member.value for member in cls)
        shown = validation.reason_text(validation.shown_value(value))
        return Problem(label, f"unknown {cls._noun()} {shown}", f"use one of: {choices}")


class OverlapPolicy(Choice):
    """What a due occurrence does while its schedule's previous run has not finished.

    * ``allow`` claims and sends it at once (every run is independent; Celery's behaviour);
    * ``skip`` records it as ``skipped``, with the run it did not overlap as the reason, and
      counts it on the schedule; it is never sent;
    * ``buffer_one`` claims it and holds it back until the run before it finishes, then sends
      it; while one is held, later ones are skipped.
    """

    ALLOW = "allow"
    SKIP = "skip"
    BUFFER_ONE = "buffer_one"


class ScheduleMode(Choice):
    """How an interval schedule's runs follow each other.

    * ``fixed_rate`` (the default): on the grid ``k × every`` from the Unix epoch, however long
      each run takes;
    * ``fixed_delay``: the first run on the grid, each next one ``every`` after the previous
      run finished (never two at once). Interval schedules only.
    """

    FIXED_RATE = "fixed_rate"
    FIXED_DELAY = "fixed_delay"


@dataclass(frozen=True, kw_only=True)
class FailureBackoff:
    """After the ``n``-th failed run in a row, the next run waits at least
    ``base · factor^(n-1)``, at most ``maximum`` (None: no cap but
    :data:`~goatbeat_celery.core.types.validation.MAX_DURATION`), from the failed run's end."""

    base: timedelta
    factor: float = DEFAULT_BACKOFF_FACTOR
    maximum: timedelta | None = None

    def delay(self, failures: int) -> timedelta:
        """The pause after ``failures`` failed runs in a row (none for zero)."""
        if failures <= 0:
            return timedelta(0)
        cap = self.maximum if self.maximum is not None else validation.MAX_DURATION
        # Computed on logarithms, so that a long run of failures cannot overflow.
        base = self.base.total_seconds()
        if base <= 0:
            return timedelta(0)
        exponent = min(failures - 1, 10_000)
        log_delay = math.log(base) + exponent * math.log(max(self.factor, 1.0))
        if log_delay >= math.log(cap.total_seconds()):
            return cap
        return min(timedelta(seconds=math.exp(log_delay)), cap)


def backoff_problems(base: object, factor: object, maximum: object) -> list[Problem]:
    """Every problem with a schedule's failure backoff fields (``failure_backoff``,
    ``failure_backoff_factor``, ``failure_backoff_max``), given as stored in a spec."""
    found: list[Problem] = []
    if base is not None:
        problem = validation.seconds_problem(base, "failure_backoff",
                                             inclusive_minimum=False)
        if problem is not None:
            found.append(problem)
    if factor is not None:
        number = validation.finite_number(factor)
        if number is None or not 1 <= number <= MAX_BACKOFF_FACTOR:
            found.append(Problem("failure_backoff_factor", "must be a number from 1 to "
                                 f"{MAX_BACKOFF_FACTOR:g}, got {validation.shown_value(factor)}"))
    if maximum is not None:
        problem = validation.seconds_problem(maximum, "failure_backoff_max",
                                             inclusive_minimum=False)
        if problem is not None:
            found.append(problem)
        elif isinstance(base, timedelta) and isinstance(maximum, timedelta) and maximum < base:
            found.append(Problem("failure_backoff_max", "must not be shorter than "
                                 f"{{failure_backoff}} ({maximum} < {base})",
                                 mentions=("failure_backoff",)))
    if base is None and (factor is not None or maximum is not None):
        found.append(Problem("failure_backoff", "give it too",
                             "{failure_backoff_factor} and {failure_backoff_max} only shape a "
                             "backoff", mentions=("failure_backoff_factor", "failure_backoff_max")))
    return found
