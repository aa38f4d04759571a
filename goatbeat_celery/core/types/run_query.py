"""Runs across schedules: what a search of the history asks for (:class:`RunQuery`), where a
page of its answer ends (:class:`RunCursor`), and what a search bounded by the runs it reads
found (:class:`RunScan`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.instants import ensure_aware
from goatbeat_celery.core.types.runs import RunState

__all__ = ["MAX_RUNS_PAGE", "OUTCOMES", "RunCursor", "RunQuery", "RunScan", "outcome_of"]

#: Every outcome a run may show: what a worker reported (or the leader's verdict) once there
#: is any, beat's dispatch state before (as ``display.run_status`` words it).
OUTCOMES = frozenset(state.value for state in RunState) | frozenset(
    state.value for state in ExecutionState)
#: The most runs one page of a search holds.
MAX_RUNS_PAGE = 500


def outcome_of(state: str, run_state: str | None) -> str:
    """The outcome a run with these stored values shows: ``run_state`` once set, else
    ``state``."""
    return state if run_state is None else run_state


class RunCursor(NamedTuple):
    """Where a page of runs ended: its last run's occurrence and key. The next page holds the
    runs before it in the order of a search, newest occurrence first then key descending."""

    occurrence_at: datetime
    key: str


class RunScan(NamedTuple):
    """What a search that reads a bounded number of runs found: ``runs``, newest occurrence
    first then key descending, and ``stopped_at``, the last run it read when it stopped before
    the search was done (the runs after it in that order were not read: pass it as ``before``
    to read on); None when it filled its page or read every run there was."""

    runs: list[Execution]
    stopped_at: RunCursor | None


@dataclass(frozen=True, kw_only=True)
class RunQuery:
    """Which runs a search finds; every criterion given must hold (None: any).

    * ``outcomes``: the run shows one of these (:data:`OUTCOMES`, :func:`outcome_of`);
    * ``schedule_name``: a run of this schedule;
    * ``tag``: a run of a schedule that carries this tag now (runs of a removed schedule
      carry none);
    * ``worker``: the worker that reported it last, exactly;
    * ``since`` / ``until``: its occurrence lies in ``[since, until)``;
    * ``text``: its key, its worker's error or beat's note contains this, case aside.

    Raises ValueError for an unknown outcome or a naive instant.
    """

    outcomes: frozenset[str] | None = None
    schedule_name: str | None = None
    tag: str | None = None
    worker: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    text: str | None = None

    def __post_init__(self) -> None:
        if self.outcomes is not None:
            unknown = sorted(set(self.outcomes) - OUTCOMES)
            if unknown:
                raise ValueError(f"unknown outcome {unknown[0]!r}: expected one of "
                                 f"{', '.join(sorted(OUTCOMES))}")
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, ensure_aware(value, name))

    def matches_text(self, *values: str | None) -> bool:
        """Whether one of ``values`` contains :attr:`text`, case aside (True without one)."""
        if not self.text:
            return True
        wanted = self.text.lower()
        return any(value is not None and wanted in value.lower() for value in values)
