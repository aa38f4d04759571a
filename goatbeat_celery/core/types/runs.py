"""A run as workers report it and as its execution's run columns keep it: its states, the
reports (:class:`RunEvent`), the columns (:class:`RunRecord`), and the limits and defaults of
run tracking (:class:`RunTimes`, read from the settings).

What each report changes, and when a silent run counts as lost, are the rules of
:mod:`goatbeat_celery.core.rules.runs`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any

from goatbeat_celery.core.types import validation
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.problems import Problem, listed

#: A run error is cut to this many characters (``ExcType: message``).
MAX_ERROR_LENGTH = 300
#: Attempts written by hand at the column's limit stop growing instead of overflowing it.
MAX_ATTEMPTS = 1_000_000_000

DEFAULT_HEARTBEAT_INTERVAL = timedelta(seconds=10)
DEFAULT_LOST_AFTER = timedelta(seconds=60)
DEFAULT_START_TIMEOUT = timedelta(minutes=10)
#: How many times a run sent and never started is sent again (``goatbeat_run_resends``, for
#: the schedules that give no ``run_resends`` of their own), and the most either may say.
DEFAULT_RUN_RESENDS = 1
MAX_RUN_RESENDS = 10
#: A run is never sent again sooner than this after its last send: a worker's start report
#: takes up to half a second to be written, a busy queue a few seconds to reach it.
MIN_RESEND_WAIT = timedelta(seconds=10)
#: ``run_lost_after`` must cover this many heartbeat intervals: a run is declared lost only after
#: several heartbeats in a row went missing, never for one late write.
LOST_AFTER_HEARTBEATS = 3


class RunState(str, enum.Enum):
    """What a worker did with a run (the ``run_state`` column; NULL: not started).

    ``running`` and ``retrying`` are the live states: the occurrence is not over. ``retrying``
    means an attempt ended by asking Celery for a retry (``self.retry()``), whose message has not
    started yet. The others are ends; ``lost`` is presumed from a tracking worker's evidence
    (it went silent, or the run never started while the workers track runs), and ``unknown``
    says that no worker reported on the run where none may have been tracking (the workers do
    not track runs, or it was sent before they were known to): nothing is presumed about it.
    Both yield to a later report of the same run.
    """

    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    REVOKED = "revoked"
    REJECTED = "rejected"
    LOST = "lost"
    UNKNOWN = "unknown"

    @property
    def live(self) -> bool:
        """True while the occurrence is not over (running, or waiting for its retry)."""
        return self in _LIVE


_LIVE = frozenset({RunState.RUNNING, RunState.RETRYING})
#: What a report of no particular attempt may end (beside a row that shows no start): a
#: retry's wait, or the leader's verdict.
ENDED_BY_ANY_REPORT = frozenset({RunState.RETRYING, RunState.LOST, RunState.UNKNOWN})


class RunOutcome(str, enum.Enum):
    """How a worker saw a run end; each is also the :class:`RunState` it leaves."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    REVOKED = "revoked"
    REJECTED = "rejected"

    @property
    def state(self) -> RunState:
        return _OUTCOME_STATES[self]


_OUTCOME_STATES = {outcome: RunState(outcome.value) for outcome in RunOutcome}


class RunEventKind(str, enum.Enum):
    STARTED = "started"
    RETRIED = "retried"
    FINISHED = "finished"


@dataclass(frozen=True, kw_only=True, slots=True)
class RunEvent:
    """One report from a worker about the run of ``key`` (the task id = the idempotency key).

    ``run`` identifies the attempt: chosen by the process that ran it, ``None`` when the report
    comes from a process that did not run it (the worker's main process announcing a message it
    revoked, rejected, or whose pool process died). ``age`` is how long before the write the
    event happened, and ``started_age`` how long before the write the attempt had started
    (``None`` if it never started in that process), both on the worker's monotonic clock.
    ``runtime`` is the attempt's duration on that clock; ``error`` a short summary
    (:func:`~goatbeat_celery.core.rules.runs.error_summary`), ``traceback`` the exception's
    traceback (:func:`~goatbeat_celery.core.rules.tracebacks.traceback_text`), if any. Build them
    with :meth:`started`, :meth:`retried`, :meth:`finished`.
    """

    key: str
    kind: RunEventKind
    run: str | None
    worker: str
    age: timedelta
    outcome: RunOutcome | None = None
    runtime: timedelta | None = None
    error: str | None = None
    started_age: timedelta | None = None
    traceback: str | None = None

    @classmethod
    def started(cls, key: str, *, run: str, worker: str, age: timedelta) -> RunEvent:
        return cls(key=key, kind=RunEventKind.STARTED, run=run, worker=worker, age=age)

    @classmethod
    def retried(cls, key: str, *, run: str | None, worker: str, age: timedelta,
                runtime: timedelta | None = None, error: str | None = None,
                started_age: timedelta | None = None,
                traceback: str | None = None) -> RunEvent:
        return cls(key=key, kind=RunEventKind.RETRIED, run=run, worker=worker, age=age,
                   runtime=runtime, error=error, started_age=started_age, traceback=traceback)

    @classmethod
    def finished(cls, key: str, *, run: str | None, worker: str, age: timedelta,
                 outcome: RunOutcome, runtime: timedelta | None = None,
                 error: str | None = None, started_age: timedelta | None = None,
                 traceback: str | None = None) -> RunEvent:
        return cls(key=key, kind=RunEventKind.FINISHED, run=run, worker=worker, age=age,
                   outcome=outcome, runtime=runtime, error=error, started_age=started_age,
                   traceback=traceback)


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """The run columns of one execution, named as the columns are; an
    :class:`~goatbeat_celery.core.types.execution.Execution` has them as its own fields."""

    run_state: RunState | None = None
    run_id: str | None = None
    worker: str | None = None
    run_attempts: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    heartbeat_at: datetime | None = None
    runtime: timedelta | None = None
    run_error: str | None = None
    #: The traceback of the exception ``run_error`` names, when the worker had one: it goes
    #: with ``run_error`` (set and cleared with it).
    run_traceback: str | None = None

    @classmethod
    def of(cls, row: Any) -> RunRecord:
        """The run columns of an Execution, or of any row with attributes of those names."""
        return cls(**{name: getattr(row, name) for name in RUN_COLUMNS})

    def values(self) -> dict[str, Any]:
        """Column name → value, e.g. for ``dataclasses.replace(execution, **record.values())``."""
        return {name: getattr(self, name) for name in RUN_COLUMNS}


#: The run columns of ``goatbeat_execution``, in table order.
RUN_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(RunRecord))
#: What a store compares before writing a decision back: a decision made on a row that another
#: writer changed since (a report, a heartbeat, the leader's verdict) is made again.
CAS_COLUMNS: tuple[str, ...] = ("run_state", "run_id", "run_attempts", "heartbeat_at")


#: The ``run_state`` values that end a run, as stored.
ENDED_STATE_VALUES = tuple(state.value for state in RunState if not state.live)


def seconds_text(value: timedelta) -> str:
    """A duration as run errors show it: ``60s``, ``0.5s``, ``600s``."""
    return f"{value.total_seconds():g}s"


@dataclass(frozen=True, kw_only=True)
class RunTimes:
    """How long a run may go without news before it counts as lost (the settings
    ``goatbeat_heartbeat_interval``, ``goatbeat_run_lost_after`` and
    ``goatbeat_run_start_timeout``, which :class:`~goatbeat_celery.core.types.settings.Settings`
    reads and validates; ``Settings.run_times`` gives them as this).

    * ``heartbeat_interval`` (10 s): each worker process running goatbeat tasks writes one
      heartbeat for all of them this often; the leader looks for lost runs this often too.
    * ``run_lost_after`` (60 s): a running run whose last heartbeat is older is lost. At least
      three heartbeat intervals, so that one slow write never condemns a live run.
    * ``run_start_timeout`` (10 min): a run the broker took but no worker started within this
      long is lost (a queue without workers, a message lost) where the workers track runs, and
      of unknown outcome where they do not; a retry that has not started within this long
      after it was asked for is lost.

    Every problem is reported at once, as ConfigurationError.
    """

    heartbeat_interval: timedelta = DEFAULT_HEARTBEAT_INTERVAL
    run_lost_after: timedelta = DEFAULT_LOST_AFTER
    run_start_timeout: timedelta = DEFAULT_START_TIMEOUT

    def __post_init__(self) -> None:
        problems = [
            problem for name, maximum in RUN_TIME_MAXIMA.items()
            if (problem := validation.seconds_problem(getattr(self, name), name,
                                                      maximum=maximum,
                                                      inclusive_minimum=False)) is not None]
        if not problems:
            problems.extend(listed(lost_after_problem(self.heartbeat_interval,
                                                       self.run_lost_after)))
        if problems:
            raise ConfigurationError(problems, subject="goatbeat run tracking settings")


#: The upper bound of each duration: heartbeats at least hourly, verdicts within a week.
RUN_TIME_MAXIMA = {"heartbeat_interval": timedelta(hours=1),
                   "run_lost_after": validation.MAX_GRACE,
                   "run_start_timeout": validation.MAX_GRACE}


def lost_after_problem(heartbeat_interval: timedelta, run_lost_after: timedelta
                       ) -> Problem | None:
    """Why ``run_lost_after`` is too short for ``heartbeat_interval``, if it is."""
    least = heartbeat_interval * LOST_AFTER_HEARTBEATS
    if run_lost_after >= least:
        return None
    return Problem("run_lost_after", f"{seconds_text(run_lost_after)} must be at least "
                   f"{LOST_AFTER_HEARTBEATS} heartbeat intervals ({seconds_text(least)}), so "
                   "that one late heartbeat never marks a live run lost")
